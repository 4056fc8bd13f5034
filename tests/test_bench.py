"""jacap_nb.bench end to end on a tiny random-weight Llama with a character tokenizer: resuming, prompt formats,
multi-question grouping, the recorded configuration, the language-modelling tasks. 12_bench checks one run's row
count, a plain rerun, the formats in config.json, the multiquestion row count and three bad options."""
import copy, json, os, sys
import pytest, torch
from transformers import DynamicCache
import jacap_nb.bench as B
from jacap_nb.allocation import LayerBudget
from jacap_nb.methods import parse_method, parse_value
from jacap_nb.bench import bench_args, bench_cli, run_bench, ResultStore, row_key, compress_prefill, needs_pipeline
from jacap_nb.capture import capture_prefill
from jacap_nb.models import tiny_model, cache_kwarg
from jacap_nb.pipeline import PROMPT_FORMATS, generate, encode_prompt
from jacap_nb.presses import make_press
from jacap_nb.report import load_rows
from jacap_nb.tasks import get_task
from jacap_nb.texts import token_counter
from tinytools import CharTokenizer, rand_ids

OPTS = dict(lengths=[160], depths=[0.0, 1.0], n=1, filler="repetitive")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tiny(): return tiny_model("llama", seed=0), CharTokenizer()


def _counting(monkeypatch, name):
    "Replace jacap_nb.bench.<name> by a wrapper that counts its calls."
    real, calls = getattr(B, name), []
    def wrapped(*a, **k): calls.append(a); return real(*a, **k)
    monkeypatch.setattr(B, name, wrapped)
    return calls


def _press(method, ratio):
    if method == "full": return None
    spec = parse_method(method)
    return make_press(spec.name, ratio, **spec.options)


# --- resuming --------------------------------------------------------------------------------------------------------

def test_resume_redoes_only_what_is_missing(tiny, tmp_path, monkeypatch):
    model, tok = tiny
    methods, kw = ["full", "knorm", "jacap:halo=32"], dict(formats=["blank", "kvpress"], max_new_tokens=3, progress=False, **OPTS)
    run_bench("passkey", methods, [0.5, 0.75], tmp_path, model, tok, **kw)
    rows = load_rows(tmp_path)
    assert len(rows) == 2 * 2 * (1 + 2 * 2)                          # examples x formats x (full + methods x ratios)
    keys = [row_key(r["uid"], r["method"], r["ratio"], r["format"]) for r in rows]
    assert len(set(keys)) == len(keys)
    prefills = _counting(monkeypatch, "capture_prefill")
    run_bench("passkey", methods, [0.5, 0.75], tmp_path, model, tok, **kw)            # nothing to do: no model work
    assert load_rows(tmp_path) == rows and prefills == []
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    (tmp_path / "rows.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:10])   # an interrupted last write
    run_bench("passkey", methods, [0.5, 0.75], tmp_path, model, tok, **kw)
    again = load_rows(tmp_path)
    assert len(prefills) == 1                                          # one context in one format redone
    assert again[:-1] == rows[:-1] and len(again) == len(rows)
    redone = {k: v for k, v in again[-1].items() if not k.endswith("seconds")}
    assert redone == {k: v for k, v in rows[-1].items() if not k.endswith("seconds")}     # deterministic: the same row
    run_bench("passkey", methods + ["snapkv"], [0.5, 0.75], tmp_path, model, tok, **kw)   # a new method: only its rows
    assert len(load_rows(tmp_path)) == len(rows) + 2 * 2 * 2
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert [r["rows_after"] for r in cfg["runs"]] == [20, 20, 20, 28] and "snapkv" in cfg["methods"]


def test_a_folder_measured_by_another_rule_takes_no_rows(tiny, tmp_path):
    "`budget='auto'` rows of a folder whose layer_budget_auto.json another rule measured are not mixed with today's."
    model, tok = tiny
    kw = dict(formats=["blank"], max_new_tokens=3, progress=False, **OPTS)
    run_bench("passkey", ["full", "jacap:halo=32"], [0.5], tmp_path, model, tok, **kw)
    saved = tmp_path / "layer_budget_auto.json"
    lb = LayerBudget.load(saved)
    assert lb.source.endswith("heads=0.75")                                            # MEASURED_HEADS
    n = len(load_rows(tmp_path))
    run_bench("passkey", ["full", "jacap:halo=32"], [0.5, 0.75], tmp_path, model, tok, **kw)   # the same rule: rows added
    assert len(load_rows(tmp_path)) == n + 2 and LayerBudget.load(saved) == lb              # 2 examples at 0.75; record kept
    LayerBudget(lb.thresholds, lb.kept, lb.source.replace(", heads=0.75", "")).save(saved)   # as a folder made before
    with pytest.raises(ValueError, match="another rule"):
        run_bench("passkey", ["full", "jacap:halo=32"], [0.5, 0.75, 0.9], tmp_path, model, tok, **kw)


def test_result_store_survives_a_cut_line_in_the_middle(tmp_path):
    p = tmp_path / "rows.jsonl"
    good = [dict(uid=str(i), method="m", ratio=0.5, format="blank") for i in range(3)]
    p.write_text(json.dumps(good[0]) + "\n" + '{"uid": "x", "met' + "\n" + json.dumps(good[1]) + "\n" + json.dumps(good[2]))
    st = ResultStore(p)
    assert st.rows == good and len(st) == 3 and row_key("1", "m", 0.5, "blank") in st and row_key("x", "m", 0.5) not in st
    st.append(dict(uid="3", method="m", ratio=0.5, format="kvpress"))
    assert load_rows(p)[-1]["uid"] == "3" and len(load_rows(p)) == 4   # appended on a fresh line


@pytest.mark.parametrize("ratio,fmt,same", [(0.5, "blank", True), (0.50, "blank", True), (0, "blank", True),
                                            (0.75, "blank", False), (0.5, "kvpress", False)])
def test_row_key(ratio, fmt, same):
    assert (row_key("u", "jacap", ratio, fmt) == row_key("u", "jacap", {0: 0.0}.get(ratio, 0.5), "blank")) is same


# --- formats: the harness answers what generate answers ---------------------------------------------------------------

def test_rows_equal_generate_in_both_formats(tiny, tmp_path):
    model, tok = tiny
    methods = ["full", "jacap", "knorm:head_reduce=layer", "snapkv:window=4"]
    run_bench("passkey", methods, [0.5], tmp_path, model, tok, formats=["blank", "kvpress"], max_new_tokens=6, progress=False, **OPTS)
    rows = load_rows(tmp_path)
    assert {r["format"] for r in rows} == {"blank", "kvpress"} and len(rows) == 2 * 2 * 4
    exs = {e.uid: e for e in get_task("passkey").make(count_tokens=token_counter(tok), **OPTS)}
    for r in rows:
        e = exs[r["uid"]]
        want = generate(model, tok, e.context, e.question, _press(r["method"], r["ratio"]), 6, e.answer_prefix,
                        PROMPT_FORMATS[r["format"]], stop=get_task("passkey").done)
        assert r["prediction"] == want, (r["method"], r["format"])
    # the two formats are different prompts: the glued one has the blank line's tokens fewer
    by = {(r["uid"], r["method"], r["format"]): r for r in rows}
    for uid in exs: assert by[(uid, "full", "blank")]["context_tokens"] == by[(uid, "full", "kvpress")]["context_tokens"] + 2


# --- multi-question contexts ----------------------------------------------------------------------------------------------

def test_multiquestion_contexts_are_prefilled_and_compressed_once(tiny, tmp_path, monkeypatch):
    model, tok = tiny
    prefills, compressions = _counting(monkeypatch, "capture_prefill"), _counting(monkeypatch, "compress_prefill")
    opts = dict(lengths=[200], n=2, filler="repetitive", n_facts=3)
    run_bench("multiquestion", ["full", "knorm", "jacap"], [0.5], tmp_path, model, tok, formats=["blank", "kvpress"],
              max_new_tokens=4, progress=False, save_kept=True, **opts)
    rows = load_rows(tmp_path)
    assert len(rows) == 2 * 3 * 2 * 3                                  # contexts x questions x formats x methods
    assert len(prefills) == 2 * 2 and len(compressions) == 2 * 2 * 3  # per context and format, not per question
    assert len(list((tmp_path / "kept").glob("*.pt"))) == 2 * 2 * 2   # one kept set per compression (full keeps all)
    exs = {e.uid: e for e in get_task("multiquestion").make(count_tokens=token_counter(tok), **opts)}
    for r in rows:
        e = exs[r["uid"]]
        assert r["prediction"] == generate(model, tok, e.context, e.question, _press(r["method"], r["ratio"]), 4,
                                           e.answer_prefix, PROMPT_FORMATS[r["format"]], stop=get_task("multiquestion").done)
    for cid in {e.meta["context_id"] for e in exs.values()}:
        for fmt in ("blank", "kvpress"):
            group = [r for r in rows if r["meta"]["context_id"] == cid and r["format"] == fmt and r["method"] == "knorm"]
            assert len(group) == 3 and len({(r["context_tokens"], r["kept_tokens"], r["cache_bytes"]) for r in group}) == 1


# --- the recorded configuration --------------------------------------------------------------------------------------------

def _machine_paths(tmp_path):
    return [p for p in {str(tmp_path), os.path.expanduser("~"), os.getcwd(), ROOT, sys.prefix, sys.executable} if len(p) > 1]


def test_config_records_the_run_and_no_machine_path(tiny, tmp_path):
    model, tok = tiny
    out = tmp_path / "run"
    run_bench("passkey", ["full", "jacap:halo=32"], [0.5], out, model, tok, formats=["kvpress"], max_new_tokens=3,
              progress=False, command="jacap-nb bench passkey --methods full jacap:halo=32", **OPTS)
    text = (out / "config.json").read_text()
    cfg = json.loads(text)
    for k in ("protocol", "decoding", "model", "versions", "formats", "methods", "runs"): assert k in cfg, k
    assert cfg["decoding"] == dict(greedy=True, max_new_tokens=3) and cfg["model"]["n_layers"] == 2
    assert cfg["methods"]["jacap:halo=32"]["press"]["scorer_options"]["halo"] == 32           # resolved options recorded
    assert cfg["methods"]["jacap:halo=32"]["press"]["scorer_options"]["noise_var"] == "auto"  # with the defaults
    assert cfg["formats"]["kvpress"]["separator"] == "" and {"torch", "transformers", "jacap_nb"} <= set(cfg["versions"])
    assert cfg["runs"][0]["task_options"] == OPTS and cfg["runs"][0]["n_examples"] == 2
    for p in _machine_paths(tmp_path): assert p not in text, p


def test_config_written_by_the_cli_has_no_machine_path(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr("jacap_nb.models.load_smollm2", lambda *a, **k: tiny)
    out = tmp_path / "cli"
    assert bench_cli(["passkey", "--methods", "full", "--ratios", "0.5", "--lengths", "160", "--depths", "0", "--n", "1",
                      "--filler", "repetitive", "--max-new-tokens", "2", "--out", str(out)]) == 0
    assert len(load_rows(out)) == 1
    text = (out / "config.json").read_text()
    for p in _machine_paths(tmp_path): assert p not in text, p


# --- methods ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,backend,name,options", [
    ("full", "full", "full", {}),
    (" jacap ", "jacap_nb", "jacap", {}),
    ("jacap:halo=32,noise_var=auto", "jacap_nb", "jacap", {"halo": 32, "noise_var": "auto"}),
    ("jacap:preset=paper", "jacap_nb", "jacap", {"preset": "paper"}),
    ("knorm:head_reduce=layer,window=4", "jacap_nb", "knorm", {"head_reduce": "layer", "window": 4}),
    ("expected_attention:stats_window=none", "jacap_nb", "expected_attention", {"stats_window": None}),
    ("kvpress:TOVA", "kvpress", "TOVAPress", {}),
    ("kvpress:SnapKVPress:window_size=32", "kvpress", "SnapKVPress", {"window_size": 32}),
    ("kvpress:AdaKV:press=ExpectedAttention", "kvpress", "AdaKVPress", {"press": "ExpectedAttention"})])
def test_parse_method(spec, backend, name, options):
    m = parse_method(spec)
    assert (m.label, m.backend, m.name, m.options) == (spec.strip(), backend, name, options)
    if backend != "kvpress": assert needs_pipeline(m) is False      # kvpress specs: tests/test_kvpress_compat.py (needs kvpress)


@pytest.mark.parametrize("spec,match", [("", "non-empty string"), (None, "non-empty string"), ("h2o", "unknown method 'h2o'"),
                                        ("jacap:tau", "key=value pairs"), ("kvpress:", "kvpress:<Press>"),
                                        ("jacap:hallo=5", "did you mean 'halo'"), ("capkv:tau=0", "tau must be"),
                                        ("jacap:max_cache_tokens=3", "cannot hold the 4 protected tokens")])
def test_parse_method_errors(spec, match):
    with pytest.raises(ValueError, match=match): parse_method(spec)


@pytest.mark.parametrize("text,value", [("3", 3), ("0.5", 0.5), ("1e-2", 0.01), ("true", True), ("False", False), ("none", None),
                                        ("null", None), ("auto", "auto"), (" layer ", "layer"), ("-2", -2)])
def test_parse_value(text, value):
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_bench_args():
    kw = bench_args(["multiquestion", "--methods", "full", "capkv:tau=2", "--ratios", "0.5", "0.9", "--out", "x", "--formats",
                     "blank", "kvpress", "--lengths", "512", "--n", "3", "--seed", "7", "--n-facts", "2", "--save-kept"])
    assert kw["methods"] == ["full", "capkv:tau=2"] and kw["ratios"] == [0.5, 0.9] and kw["formats"] == ["blank", "kvpress"]
    assert kw["lengths"] == [512] and kw["n"] == 3 and kw["seed"] == 7 and kw["n_facts"] == 2 and kw["save_kept"]
    assert "depths" not in kw and "filler" not in kw                     # unset task options: the task's defaults


@pytest.mark.parametrize("method,ratio", [("full", 0.0), ("jacap", 0.5), ("knorm:head_reduce=layer", 0.75), ("random", 0.9)])
def test_compress_prefill(method, ratio, tiny):
    model, _ = tiny
    pre = capture_prefill(model, rand_ids(81, seed=2))
    cache, info = compress_prefill(parse_method(method), ratio, model, pre)
    assert info["kept_tokens"] == int(81 * (1 - ratio)) and cache.get_seq_length() == 81
    assert info["cache_bytes"] == 2 * 2 * (1 * 2 * int(81 * (1 - ratio)) * 16) * 4       # layers x (K, V) x B Hkv N d x fp32
    assert (info["kept"] is None) == (method == "full") and info["compress_seconds"] >= 0
    if method != "full":
        assert set(info["kept"]) == {0, 1} and info["press"]["scorer"] == method.split(":")[0]


# --- language-modelling tasks --------------------------------------------------------------------------------------------

def test_fidelity_rows(tiny, tmp_path):
    model, tok = tiny
    run_bench("fidelity", ["full", "streaming", "jacap"], [0.5], tmp_path, model, tok, progress=False, formats=["blank", "kvpress"],
              n=2, prefix_tokens=120, continuation_tokens=20)
    rows = load_rows(tmp_path)
    assert len(rows) == 2 * 3 and {r["format"] for r in rows} == {"blank"}     # no question: one format only
    for r in rows:
        assert r["n_positions"] == 19 and r["kl"] >= -1e-6 and 0 <= r["top1"] <= 1
        if r["method"] == "full": assert abs(r["kl"]) < 1e-6 and r["top1"] == 1.0 and r["ppl_full"] == r["ppl_comp"]
        else: assert r["kept_tokens"] == 60 and r["kl"] > 0


def test_streaming_rows(tiny, tmp_path):
    "Decoding-time eviction under a fixed budget: full rows match the reference; evictions happen within the budget."
    model, tok = tiny
    run_bench("streaming", ["full", "knorm", "jacap"], [0.5], tmp_path, model, tok, progress=False, interval=8,
              n=1, prefix_tokens=40, continuation_tokens=80)
    rows = {r["method"]: r for r in load_rows(tmp_path)}
    assert abs(rows["full"]["kl"]) < 1e-6 and rows["full"]["top1"] == 1.0
    n = rows["full"]["context_tokens"]
    for m in ("knorm", "jacap"):
        assert rows[m]["max_cache_tokens"] == int(n * 0.5) and rows[m]["eviction_events"] > 0
        assert rows[m]["kept_tokens"] <= rows[m]["max_cache_tokens"] and rows[m]["cache_bytes"] < rows["full"]["cache_bytes"]
        assert rows[m]["n_positions"] == rows["full"]["n_positions"] and rows[m]["kl"] > 0


@pytest.mark.parametrize("max_cache,interval", [(40, 8), (33, 1), (64, 16)])
def test_stream_chunks_equal_token_by_token(max_cache, interval, tiny):
    "Feeding high-water-aligned chunks gives the logits of feeding one token at a time, and never outgrows the budget."
    model, _ = tiny
    ids = rand_ids(90, seed=2)
    mk = lambda: make_press("jacap", 0.0, max_cache_tokens=max_cache, interval=interval)
    chunked, final, run = B._stream_logits(model, mk(), ids, 20)
    assert final.layers[0].keys.shape[2] <= max_cache and len(run.records) > 0
    kw, cache, out = cache_kwarg(model), DynamicCache(), []
    with torch.no_grad(), mk()(model):
        model(input_ids=ids[:, :20], **{kw: cache})
        for p in range(20, 90):
            out.append(model(input_ids=ids[:, p:p + 1], position_ids=torch.tensor([[p]]), **{kw: cache}).logits[0].float())
    torch.testing.assert_close(chunked, torch.cat(out), atol=1e-4, rtol=1e-4)


def test_kvpress_methods_need_kvpress_here(tiny, tmp_path):
    if __import__("importlib").util.find_spec("kvpress"): pytest.skip("kvpress is installed here (tests/test_kvpress_compat.py)")
    with pytest.raises(ValueError, match="kvpress methods need kvpress"):
        run_bench("passkey", ["full", "kvpress:TOVA"], [0.5], tmp_path, *tiny, **OPTS)


# --- needle statistics with a real tokenizer -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smol_tok():
    from transformers import AutoTokenizer
    from jacap_nb.models import smollm2_cache_dir, load_smollm2
    d = smollm2_cache_dir()
    return AutoTokenizer.from_pretrained(d) if (d / "tokenizer_config.json").exists() else load_smollm2()[1]


@pytest.mark.parametrize("fmt", list(PROMPT_FORMATS))
@pytest.mark.parametrize("task,opts", [("passkey", dict(lengths=[300], depths=[0.0, 0.5, 1.0], n=1, filler="pydoc")),
                                       ("multiquestion", dict(lengths=[300], n=1, filler="pydoc", n_facts=3))])
def test_answer_token_positions_cover_the_answer(fmt, task, opts, smol_tok):
    "The tokens needle_kept looks at are the context tokens of the answer's occurrences (the passkey is stated twice)."
    for e in get_task(task).make(count_tokens=token_counter(smol_tok), **opts):
        pos = B.answer_token_positions(smol_tok, e, PROMPT_FORMATS[fmt])
        ids, _ = encode_prompt(smol_tok, e.context, [e.question], e.answer_prefix, PROMPT_FORMATS[fmt])
        assert pos and max(pos) < ids.shape[1] and pos == sorted(set(pos))
        text = smol_tok.decode(ids[0, pos])
        assert text.replace(" ", "").count(e.answer) >= 2 or text.count(e.answer[:3]) >= 2, (text, e.answer)
        assert len(pos) <= 2 * len(e.answer) + 4                       # digits, and nothing far from them


def test_hybrid_model_rows_equal_generate_and_count_the_windows(tmp_path):
    "Gemma 3 (a window layer, a full layer): the bench's replayed rows are generate()'s answers; the window's bytes are reported."
    model, tok = tiny_model("gemma3", seed=1), CharTokenizer()
    methods = ["full", "jacap:budget=uniform", "knorm"]
    run_bench("passkey", methods, [0.5], tmp_path, model, tok, formats=["blank"], max_new_tokens=5, progress=False, **OPTS)
    rows = load_rows(tmp_path)
    exs = {e.uid: e for e in get_task("passkey").make(count_tokens=token_counter(tok), **OPTS)}
    for r in rows:
        e = exs[r["uid"]]
        want = generate(model, tok, e.context, e.question, _press(r["method"], r["ratio"]), 5, e.answer_prefix,
                        PROMPT_FORMATS["blank"], stop=get_task("passkey").done)
        assert r["prediction"] == want, r["method"]
        assert r["window_bytes"] == 2 * 2 * 7 * 16 * 4                 # keys + values, 2 KV heads x 7 slots x 16 dims, fp32
        n = r["context_tokens"]
        assert r["kept_tokens"] == (n if r["method"] == "full" else make_press("knorm", 0.5).prefill_keep(n))  # the full layer


def test_code_rows_keep_correct_and_similarity(tiny, tmp_path):
    "The code task's rows carry the edit similarity beside `correct`; the summary averages it."
    from jacap_nb.code_tasks import code_correct, code_similarity
    from jacap_nb.report import summarize
    model, tok = tiny
    run_bench("code", ["full", "jacap"], [0.5], tmp_path, model, tok, formats=["blank"], max_new_tokens=5, progress=False,
              lengths=[200], depths=[0.5], n=2)
    rows = load_rows(tmp_path)
    assert len(rows) == 4 and all(r["task"] == "code" for r in rows)
    for r in rows:
        assert r["similarity"] == round(code_similarity(r["prediction"], r["answer"]), 4)
        assert r["correct"] == code_correct(r["prediction"], r["answer"])
    exs = {e.uid: e for e in get_task("code").make(count_tokens=token_counter(tok), lengths=[200], depths=[0.5], n=2)}
    for r in rows:                                                  # the harness answers as the public generate() does
        e = exs[r["uid"]]
        assert r["prediction"] == generate(model, tok, e.context, e.question, _press(r["method"], r["ratio"]), 5,
                                           e.answer_prefix, stop=get_task("code").done)
    s = {x["method"]: x for x in summarize(rows)}
    assert s["jacap"]["similarity"] == pytest.approx(sum(r["similarity"] for r in rows if r["method"] == "jacap") / 2)
    run_bench("passkey", ["full"], [0.5], tmp_path / "passkey", model, tok, formats=["blank"], max_new_tokens=3,
              progress=False, **OPTS)
    assert all("similarity" not in r for r in load_rows(tmp_path / "passkey"))      # a task without one: no column
