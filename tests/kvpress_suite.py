"""kvpress 0.5.5's own test suite, with JacapPress among its presses: `python tests/kvpress_suite.py [pytest args]`.

Run it in the kvpress environment (.ci/run's step 2). The adaptation, all of it:
1. kvpress's sdist is downloaded from PyPI and its `tests/` copied into build/kvpress-suite/.
2. The hub models its fixtures name are local folders of the same relative path, built once (transformers reads a
   local folder before the hub): `MaxJeblick/llama2-0b-unit-test` (and its lower-case spelling) is a random 2-layer
   Llama of the shapes kvpress's tests assert (2 KV heads of dimension 6), with SmolLM2's tokenizer; the chat models
   (`h2oai/h2o-danube3-500m-chat`, `meta-llama/Llama-3.2-1B-Instruct`) are the embedded SmolLM2.
3. `tests/default_presses.py` gains JacapPress (Jacap's default scorer, and CapKV's through the same adapter) at the
   same two ratios as kvpress's presses, so every test that loops over that list, each wrapper of
   `test_presses_run` and every decoding press included, runs JacapPress with kvpress's own assertions. The two
   presses of that list that download their parameters from the hub are left out (`HUB_PRESSES`).
4. The test files that name KnormPress as "any press" (`AS_JACAP`) run a second time as `*_as_jacap.py`: the same
   file, KnormPress rebound to JacapPress at its end (test functions read module globals when they run).
5. kvpress's own tests that fail on these stand-ins whatever the press (`STAND_IN_FAILURES`, each with its reason)
   are deselected; every other test must pass.
kvpress's presses passing through steps 2-5 are the check that the adaptation is sound."""
import os, shutil, subprocess, sys, tarfile, tempfile
from pathlib import Path

VERSION = "0.5.5"
ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "kvpress-suite"
UNIT_TEST = ("MaxJeblick/llama2-0b-unit-test", "maxjeblick/llama2-0b-unit-test")
CHAT = ("h2oai/h2o-danube3-500m-chat", "meta-llama/Llama-3.2-1B-Instruct")
HUB_PRESSES = ("ExpectedAttentionStatsPress", "QFilterPress")   # download statistics / filters from the hub
AS_JACAP = ("tests/test_press_call.py", "tests/test_per_layer_compression_press.py", "tests/test_decoding_compression.py",
            "tests/presses/test_head_compression.py", "tests/presses/test_presses.py")
STAND_IN_FAILURES = {
    "tests/presses/test_duo_attention_press.py::test_load_attention_pattern": "downloads DuoAttention's patterns",
    "tests/presses/test_ea_with_stats.py::test_load_stats": "downloads query statistics from the hub",
    "tests/presses/test_qfilters_press.py::test_load_qfilters": "downloads Q-filters from the hub",
    "tests/test_generate.py::test_generate": "compares the generated text of the real unit-test weights",
    "tests/test_pipeline.py::test_pipeline": "asserts Llama 2's tokenizer's context length (23 tokens; SmolLM2's: 46)",
    "tests/test_pipeline.py::test_pipeline_single_or_no_question": "the same context length",
    "tests/test_pipeline.py::test_pipeline_compresses_context": "the same context length",
    "tests/test_pipeline.py::test_pipeline_answer_is_correct": "compares danube3's own answer word for word",
    "tests/presses/test_head_compression.py::test_dms_press_compression_ratio":
        "kvpress's attention patch finds no masking key for the stand-in's random queries (RandomPress inside)",
    "tests/test_pipeline.py::test_pipeline_only_computes_the_logits_it_needs[KVzipPress]": "the same attention patch",
}

JACAP_PRESSES = '''

# --- added by jacap_nb's tests/kvpress_suite.py -------------------------------------------------------------------
from jacap_nb.kvpress_compat import JacapPress
from jacap_nb.scorers import CapKV

class JacapCapKVPress(JacapPress):
    "JacapPress with jacap_nb's CapKV scorer."
    def __init__(self, compression_ratio=0.0): super().__init__(compression_ratio, scorer=CapKV())

default_presses += [
    {"cls": JacapPress, "kwargs": [{"compression_ratio": 0.2}, {"compression_ratio": 0.8}]},
    {"cls": JacapCapKVPress, "kwargs": [{"compression_ratio": 0.2}, {"compression_ratio": 0.8}]},
]
'''
NOT_AGAIN = {"tests/presses/test_presses_as_jacap.py::test_presses_run": "test_presses.py runs it, JacapPress included",
             "tests/presses/test_presses_as_jacap.py::test_presses_run_observed_attention": "no KnormPress in it"}

DESELECT = '''# written by jacap_nb's tests/kvpress_suite.py: the tests deselected and why, and a count of those that run JacapPress
SKIP = %r

def _name(nodeid): return nodeid.split("[")[0].replace("_as_jacap.py", ".py")

def _runs_jacap(item):
    "A test of an *_as_jacap.py copy, or one parametrised by a JacapPress entry of default_presses."
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "_as_jacap.py" in item.nodeid or any(isinstance(v, dict) and v.get("cls", type).__name__.startswith("Jacap")
                                                for v in params.values())

_jacap, _outcomes = set(), {}

def pytest_collection_modifyitems(config, items):
    "Deselect a test by its node id, or every parametrisation of a test named without brackets (its copy's too)."
    drop = [it for it in items if it.nodeid in SKIP or it.nodeid.replace("_as_jacap.py", ".py") in SKIP or _name(it.nodeid) in SKIP]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [it for it in items if it not in drop]
    _jacap.update(it.nodeid for it in items if _runs_jacap(it))

def pytest_runtest_logreport(report):
    if report.nodeid in _jacap and (report.when == "call" or report.outcome != "passed"):
        _outcomes[report.nodeid] = report.outcome if report.when == "call" or report.outcome == "failed" else "skipped"

def pytest_terminal_summary(terminalreporter):
    n = {k: sum(v == k for v in _outcomes.values()) for k in ("passed", "failed", "skipped")}
    terminalreporter.write_line(f"kvpress's own tests running JacapPress: {n['passed']} passed, {n['failed']} failed, "
                                f"{n['skipped']} skipped")
'''


def fetch_tests(work:Path) -> Path:
    "kvpress's sdist tests/ and evaluation/ in `work` (downloaded once)."
    if (work / "tests" / "default_presses.py.orig").exists(): return work
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"kvpress=={VERSION}", "-d", tmp], check=True)
        (sdist,) = Path(tmp).glob("kvpress-*.tar.gz")
        with tarfile.open(sdist) as tar: tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"kvpress-{VERSION}"
        shutil.rmtree(work, ignore_errors=True); work.mkdir(parents=True)
        for d in ("tests", "evaluation"): shutil.copytree(src / d, work / d)
    (work / "pytest.ini").write_text("[pytest]\n")      # the rootdir is kvpress's folder, not this repo
    shutil.copy(work / "tests" / "default_presses.py", work / "tests" / "default_presses.py.orig")
    return work


def add_jacap(work:Path):
    "default_presses.py as shipped, less `HUB_PRESSES`, plus JacapPress; the `AS_JACAP` copies."
    text = (work / "tests" / "default_presses.py.orig").read_text()
    text += "\ndefault_presses = [p for p in default_presses if p['cls'].__name__ not in %r]\n" % (HUB_PRESSES,)
    (work / "tests" / "default_presses.py").write_text(text + JACAP_PRESSES)
    (work / "conftest.py").write_text(DESELECT % (dict(STAND_IN_FAILURES, **NOT_AGAIN),))
    for name in AS_JACAP:
        src = work / name
        src.with_name(src.stem + "_as_jacap.py").write_text(
            src.read_text() + "\n\n# added by jacap_nb's tests/kvpress_suite.py: the tests above, JacapPress where they name KnormPress\n"
            "from jacap_nb.kvpress_compat import JacapPress as KnormPress  # noqa: E402,F811\n")


def build_stand_ins(work:Path):
    "The hub folders kvpress's fixtures name, as local folders (see the module's docstring)."
    import torch
    from jacap_nb.models import load_smollm2, smollm2_cache_dir, tiny_model
    load_smollm2()                                        # makes the dequantised copy if it is missing
    smol = smollm2_cache_dir()
    for name in CHAT:
        dst = work / name
        if not dst.exists(): dst.parent.mkdir(parents=True, exist_ok=True); dst.symlink_to(smol, target_is_directory=True)
    first = work / UNIT_TEST[0]
    if not (first / "config.json").exists():
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(smol)
        m = tiny_model("llama", vocab_size=len(tok), hidden_size=24, intermediate_size=48, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=6, max_position_embeddings=8192, seed=0)
        m.config.pad_token_id, m.config.bos_token_id, m.config.eos_token_id = tok.pad_token_id, tok.bos_token_id, tok.eos_token_id
        m.generation_config.pad_token_id = tok.pad_token_id
        m.generation_config.eos_token_id = tok.eos_token_id
        m.save_pretrained(first); tok.save_pretrained(first)
        torch.manual_seed(0)
    for name in UNIT_TEST[1:]:
        dst = work / name
        if not dst.exists(): dst.parent.mkdir(parents=True, exist_ok=True); dst.symlink_to(first.resolve(), target_is_directory=True)


def main(argv:list) -> int:
    work = fetch_tests(WORK)
    add_jacap(work)
    build_stand_ins(work)
    env = dict(os.environ, PYTHONPATH=str(work),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, str(ROOT / "tests" / "run_pytest.py"), "tests", "-p", "no:cacheprovider", *argv]
    print("kvpress", VERSION, "own tests in", work, ":", " ".join(cmd[2:]), flush=True)
    return subprocess.run(cmd, cwd=work, env=env).returncode


if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
