"""jacap_nb.kvpress_compat against kvpress itself. Runs only where kvpress is installed (its own environment: kvpress
0.5.5 pins transformers < 5.3); tests/conftest.py leaves this file out of collection elsewhere. 09_kvpress_compat is
not executed by nbdev_test (skip_exec), so these are the checks of the interop.

Fast tests use a tiny random Llama with SmolLM2's vocabulary and tokenizer (kvpress's pipeline needs a chat template);
the SmolLM2 ones that take more than a few seconds are marked slow."""
import pytest
kvpress = pytest.importorskip("kvpress")   # the collection guard is tests/conftest.py; this only makes a stray run explicit
import torch
from transformers import pipeline, DynamicCache, AutoTokenizer
from jacap_nb.methods import parse_method
from jacap_nb.bench import needs_pipeline, run_bench
from jacap_nb.capture import capture_prefill
from jacap_nb.kvpress_compat import JacapPress, make_kvpress, kvpress_replay, kvpress_generate
from jacap_nb.models import tiny_model, load_smollm2, smollm2_cache_dir
from jacap_nb.pipeline import PROMPT_FORMATS, generate, compress_context, encode_prompt
from jacap_nb.presses import make_press
from jacap_nb.scorers import SCORERS
from jacap_nb.report import load_rows
from jacap_nb.tasks import passkey_examples
from jacap_nb.texts import token_counter
from tinytools import NoModel

SEPS = list(PROMPT_FORMATS.values())


@pytest.fixture(scope="module")
def tok():
    d = smollm2_cache_dir()
    return AutoTokenizer.from_pretrained(d) if (d / "tokenizer_config.json").exists() else load_smollm2()[1]


@pytest.fixture(scope="module")
def tiny(tok):
    "A 2-layer random Llama over SmolLM2's vocabulary, in kvpress's pipeline."
    m = tiny_model("llama", vocab_size=len(tok), seed=0)
    return m, pipeline("kv-press-text-generation", model=m, tokenizer=tok)


@pytest.fixture(scope="module")
def example(tok):
    return passkey_examples(lengths=[256], depths=[0.5], n=1, filler="pydoc", count_tokens=token_counter(tok))[0]


def kept_positions(cache, prefill) -> dict:
    "Positions (sorted, per layer (B, Hkv, k)) of a compressed cache's keys in the full prefill (kvpress keeps top-k order)."
    out = {}
    for i, (lay, full) in enumerate(zip(cache.layers, prefill.layers)):
        eq = (lay.keys[:, :, :, None, :] == full["keys"][:, :, None, :, :]).all(-1)        # (B, Hkv, k, N)
        assert (eq.sum(-1) == 1).all(), "every kept key is exactly one prefill key"
        out[i] = eq.float().argmax(-1).sort(-1).values
    return out


def pipeline_cache(pipe, context, question, press, prefix="", sep=""):
    "The compressed context cache kvpress's pipeline builds (its prefill with `press`), via the pipeline's `cache` argument."
    cache = DynamicCache()
    pipe(context + sep, question=question, answer_prefix=prefix, press=press, max_new_tokens=2, cache=cache)
    return cache


# --- JacapPress: our scorers under kvpress's hook keep what our hook keeps --------------------------------------------------

@pytest.mark.parametrize("name", [n for n in SCORERS if not SCORERS[n].replay])   # JacapPress refuses a replay scorer (09)
@pytest.mark.parametrize("sep", SEPS, ids=list(PROMPT_FORMATS))
def test_jacap_press_in_kvpress_pipeline_keeps_our_tokens(name, sep, tiny, tok, example):
    model, pipe = tiny
    r = 0.6
    ours = compress_context(model, tok, example.context, make_press(name, r, budget="uniform", window=0), sep)   # kvpress: one ratio per layer, no end window
    cache = pipeline_cache(pipe, example.context, example.question, JacapPress(r, scorer=SCORERS[name]()), example.answer_prefix, sep)
    ctx_ids, _ = encode_prompt(tok, example.context, [example.question], example.answer_prefix, sep)
    assert ctx_ids.shape[1] == ours.n_tokens
    theirs = kept_positions(cache, capture_prefill(model, ctx_ids))
    assert sorted(theirs) == sorted(ours.run.kept_indices)
    for l in theirs: assert torch.equal(theirs[l], ours.run.kept_indices[l]), l


@pytest.mark.slow
@pytest.mark.parametrize("ratio", [0.5, 0.75])
@pytest.mark.parametrize("sep", SEPS, ids=list(PROMPT_FORMATS))
def test_jacap_press_answers_like_generate_on_smollm2(ratio, sep):
    model, tok = load_smollm2()
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok)
    ex = passkey_examples(lengths=[512], depths=[0.75], n=1, filler="pydoc", count_tokens=token_counter(tok))[0]
    ours = generate(model, tok, ex.context, ex.question, make_press("jacap", ratio, budget="uniform", window=0), 8, ex.answer_prefix, sep)
    theirs = kvpress_generate(pipe, ex.context, [ex.question], JacapPress(ratio), ex.answer_prefix, 8, sep)[0]
    assert ours == theirs


def test_jacap_press_checks_its_scorer():
    with pytest.raises(TypeError, match="scorer must be a jacap_nb Scorer"):
        JacapPress(0.5, scorer="jacap")


# --- JacapPress in kvpress's wrappers (the five failures kvpress's own suite found: F1-F5) -------------------------------

from kvpress import (BlockPress, CAMPress, ChunkPress, CriticalAdaKVPress, DecodingPress, DMSPress, KnormPress,
                     PerLayerCompressionPress)


@pytest.fixture(scope="module")
def grad_model():
    "kvpress's test idiom: a model whose weights require grad, called outside torch.no_grad()."
    m = tiny_model("llama", vocab_size=512, seed=1)
    assert all(p.requires_grad for p in m.parameters())
    return m


def prefill_lengths(press, model, ids):
    cache = DynamicCache()
    with press(model): model(ids, past_key_values=cache)     # no torch.no_grad(): autograd is on
    return [layer.keys.shape[2] for layer in cache.layers]


def test_f1_jacap_press_runs_with_autograd_on(grad_model):
    ids = torch.randint(0, 512, (1, 128))
    assert torch.is_grad_enabled()
    assert prefill_lengths(JacapPress(0.5), grad_model, ids) == [64, 64]


@pytest.mark.parametrize("wrap", [lambda p: PerLayerCompressionPress(compression_ratios=[0.25, 0.75], press=p),
                                  lambda p: CriticalAdaKVPress(press=p)], ids=["PerLayerCompression", "CriticalAdaKV"])
def test_f2_wrappers_that_do_not_forward_post_init(wrap, grad_model):
    "PerLayerCompressionPress and CriticalAdaKVPress never call the inner press's post_init_from_model."
    press = wrap(JacapPress(0.5))
    n = prefill_lengths(press, grad_model, torch.randint(0, 512, (1, 128)))
    if isinstance(press, PerLayerCompressionPress): assert n == [96, 32]


def test_f2_score_outside_a_press_block_says_what_to_do(grad_model):
    attn = grad_model.model.layers[0].self_attn
    if hasattr(attn, "rotary_emb"): del attn.rotary_emb     # as on a model that no kvpress press has entered
    with pytest.raises(RuntimeError, match="inside that block"):
        JacapPress(0.5).score(attn, torch.zeros(1, 4, 64), torch.zeros(1, 2, 4, 16), torch.zeros(1, 2, 4, 16), None,
                              {"position_embeddings": (torch.ones(1, 4, 16), torch.zeros(1, 4, 16))})


def test_f3_chunk_and_block_press(grad_model):
    ids = torch.randint(0, 512, (1, 256))
    assert prefill_lengths(ChunkPress(press=JacapPress(0.5), chunk_length=24), grad_model, ids) == [128, 128]
    assert prefill_lengths(BlockPress(press=JacapPress(0.5), block_size=48), grad_model, ids) == [128, 128]


def test_f3_a_chunk_scores_as_a_prompt_of_its_own(grad_model):
    "A chunk given with the whole prompt's RoPE scores as the same chunk given with its own positions' RoPE (RoPE's logits see relative positions only)."
    ids = torch.randint(0, 512, (1, 96))
    with torch.no_grad():
        pre = capture_prefill(grad_model, ids)
    attn, lay, press = grad_model.model.layers[1].self_attn, pre.layers[1], JacapPress(0.5)
    cos, sin = lay["position_embeddings"]
    i, n = 40, 32
    h, k, v = lay["hidden_states"][:, i:i + n], lay["keys"][:, :, i:i + n], lay["values"][:, :, i:i + n]
    with press(grad_model):
        part = press.score(attn, h, k, v, None, {"position_embeddings": (cos, sin)})                  # ChunkPress's call
        own = press.score(attn, h, k, v, None, {"position_embeddings": (cos[:, i:i + n], sin[:, i:i + n])})
    torch.testing.assert_close(part, own, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("wrapper", [DecodingPress, CAMPress])
def test_f4_decoding_time_compression(wrapper, tiny):
    "kvpress's aime25 / math500 configuration: DecodingPress(JacapPress()) compresses the cache while generating."
    _, pipe = tiny
    press = wrapper(base_press=JacapPress(), compression_interval=3, target_size=48)
    cache = DynamicCache()
    out = pipe("The quick brown fox jumps over the lazy dog. " * 8, question="What animal jumps?", press=press,
               cache=cache, max_new_tokens=15)
    assert len(out["answer"]) > 0
    assert all(48 <= layer.keys.shape[2] <= 50 for layer in cache.layers)


def test_f4_decoding_view_places_the_buffered_tokens_last(grad_model):
    "At a decoding call the buffered tokens are the cache's last slots, the last of them at cache_position."
    lay_keys = torch.randn(1, 2, 40, 16)
    h = torch.randn(1, 5, 64)
    attn = grad_model.model.layers[0].self_attn
    attn.rotary_emb = grad_model.model.rotary_emb
    view = JacapPress().view(attn, h, lay_keys, torch.randn(1, 2, 40, 16),
                             {"position_embeddings": grad_model.model.rotary_emb(h, torch.tensor([[99]])),
                              "cache_position": torch.tensor([99])})
    assert view.token_positions.tolist() == [[95, 96, 97, 98, 99]]
    assert view.positions[0, 0, -5:].tolist() == [95, 96, 97, 98, 99] and view.positions[0, 0, 0] == 60
    cos, _ = grad_model.model.rotary_emb(h, torch.arange(95, 100)[None])
    torch.testing.assert_close(view.cos, cos)
    assert view.keys_pre is lay_keys


def test_f5_one_token_prompt_and_dms_decoding(grad_model, tiny):
    assert prefill_lengths(JacapPress(0.5), grad_model, torch.randint(0, 512, (1, 1))) == [1, 1]
    _, pipe = tiny
    press = DMSPress(press=JacapPress(), threshold=-0.5, sliding_window_size=4, decoding=True)
    assert len(pipe("A short context.", question="What?", press=press, max_new_tokens=6)["answer"]) > 0


# --- kvpress presses replayed on a captured prefill == their own hook in kvpress's pipeline prefill ------------------------

SCORER_PRESSES = {n: (lambda r, n=n: make_kvpress(n, r)) for n in
                  ("Knorm", "SnapKV", "ExpectedAttention", "TOVA", "StreamingLLM", "KeyDiff", "Cap", "Compactor", "CUR",
                   "LagKV", "NonCausalAttn", "LeverageScore", "Random")}
SCORER_PRESSES["JacapPress"] = lambda r: JacapPress(r)
SCORER_PRESSES["JacapPress(KNorm)"] = lambda r: JacapPress(r, scorer=SCORERS["knorm"](), window=8)


@pytest.mark.parametrize("name", list(SCORER_PRESSES))
@pytest.mark.parametrize("ratio", [0.25, 0.75])
def test_replay_equals_the_press_hook_in_the_pipeline(name, ratio, tiny, tok, example):
    model, pipe = tiny
    ctx_ids, _ = encode_prompt(tok, example.context, [example.question], example.answer_prefix, "")
    pre = capture_prefill(model, ctx_ids)
    torch.manual_seed(0)                                    # LeverageScore and Random draw from the global generator
    cache = pipeline_cache(pipe, example.context, example.question, SCORER_PRESSES[name](ratio), example.answer_prefix)
    torch.manual_seed(0)
    replay, kept = kvpress_replay(SCORER_PRESSES[name](ratio), model, pre)
    theirs, mine = kept_positions(cache, pre), kept_positions(replay, pre)
    assert sorted(theirs) == sorted(kept) == [0, 1]
    for l in theirs: assert torch.equal(theirs[l], kept[l]) and torch.equal(mine[l], kept[l]), l
    assert [l.keys.shape[2] for l in replay.layers] == [int(pre.n_tokens * (1 - ratio))] * 2


def test_replay_keeps_pyramidkv_budgets():
    model, tok = load_smollm2()
    ex = passkey_examples(lengths=[256], depths=[0.5], n=1, filler="pydoc", count_tokens=token_counter(tok))[0]
    ctx_ids, _ = encode_prompt(tok, ex.context, [ex.question], ex.answer_prefix, "")
    hooked = DynamicCache()
    with torch.no_grad(), make_kvpress("PyramidKV", 0.5)(model):          # what kvpress's pipeline prefill does
        model.model(input_ids=ctx_ids, past_key_values=hooked)
    replay, _ = kvpress_replay(make_kvpress("PyramidKV", 0.5), model, capture_prefill(model, ctx_ids))
    assert [l.keys.shape[2] for l in replay.layers] == [l.keys.shape[2] for l in hooked.layers]


@pytest.mark.parametrize("arch", ["gemma3", "llama"])
def test_replayed_cache_masks_new_tokens_causally(arch):
    "Tokens appended in one forward pass see what they would one by one: on a hybrid model too (Gemma-3), where a plain"
    "layer's kept count made the full-attention layers' new tokens see each other's future."
    g = tiny_model(arch)                              # gemma3: layer 0 a sliding window of 8, layer 1 full attention
    ids = torch.randint(3, 128, (1, 24), generator=torch.Generator().manual_seed(0))
    pre, new, pos = capture_prefill(g, ids[:, :20]), ids[:, 20:], torch.arange(20, 24)[None]
    def logits(one_by_one):
        cache, _ = kvpress_replay(make_kvpress("Knorm", 0.5), g, pre)
        with torch.no_grad():
            if not one_by_one: return g(input_ids=new, position_ids=pos, past_key_values=cache).logits[0]
            return torch.cat([g(input_ids=new[:, j:j + 1], position_ids=pos[:, j:j + 1], past_key_values=cache).logits[0]
                              for j in range(4)])
    torch.testing.assert_close(logits(False), logits(True), atol=1e-4, rtol=1e-4)

# --- kvpress methods in the harness -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,pipe", [("kvpress:TOVA", False), ("kvpress:SnapKV:window_size=16", False), ("kvpress:KVzip", True),
                                       ("kvpress:AdaKV:press=ExpectedAttention", True)])
def test_needs_pipeline(spec, pipe):
    assert needs_pipeline(parse_method(spec)) is pipe


def test_pipeline_press_leaves_no_head_masks(tok, example):
    """A head-wise kvpress press (AdaKV) run through kvpress_generate leaves nothing that masks a later decode on another
    cache. (head_dim 128: kvpress's masking needs a half-space holding every question query, which 16 dims may lack.)"""
    from kvpress import AdaKVPress, KnormPress
    from jacap_nb.pipeline import greedy_decode
    model = tiny_model("llama", vocab_size=len(tok), head_dim=128, seed=0)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok)
    ctx_ids, q_ids = encode_prompt(tok, example.context, [example.question], example.answer_prefix, "\n\n")
    full = capture_prefill(model, ctx_ids)
    before = greedy_decode(model, tok, full.full_cache(), q_ids[0], full.n_tokens, 6)
    kvpress_generate(pipe, example.context, [example.question], AdaKVPress(KnormPress(0.75)), example.answer_prefix, 2)
    assert all(getattr(m, "masked_key_indices", None) is None for m in model.modules())
    assert greedy_decode(model, tok, full.full_cache(), q_ids[0], full.n_tokens, 6) == before


@pytest.mark.parametrize("methods,match", [(["full", "kvpress:H2O"], "kvpress has no press 'H2OPress'"),
                                           (["kvpress:Knorm:windw=3"], "windw")])
def test_bad_kvpress_methods_fail_before_model_work(methods, match, tmp_path, tok):
    with pytest.raises((ValueError, TypeError), match=match):
        run_bench("passkey", methods, [0.5], tmp_path, NoModel(), tok, lengths=[64], depths=[0.5], n=1)


@pytest.mark.slow
def test_side_by_side_with_kvpress_presses(tmp_path):
    "Our presses and kvpress's (a replayed ScorerPress and a pipeline-only press) side by side, in both formats."
    methods = ["full", "jacap", "kvpress:TOVA", "kvpress:KVzip"]
    run_bench("passkey", methods, [0.75], tmp_path, formats=["blank", "kvpress"], lengths=[512], depths=[0.25, 0.75], n=1,
              filler="pydoc", max_new_tokens=8, progress=False)
    rows = load_rows(tmp_path)
    assert sorted((r["method"], r["format"]) for r in rows) == sorted((m, f) for m in methods for f in ("blank", "kvpress") for _ in range(2))
    for r in rows:
        assert isinstance(r["prediction"], str) and r["ratio"] == (0.0 if r["method"] == "full" else 0.75)
        if r["method"] in ("jacap", "kvpress:TOVA"): assert r["kept_tokens"] == int(r["context_tokens"] * 0.25)
        if r["method"] == "kvpress:KVzip": assert r["pipeline_seconds"] > 0
    assert sum(r["correct"] for r in rows if r["method"] == "full") == 4


# --- kvpress's evaluation CLI with jacap and adakv_jacap, on a RULER-format dataset of our tasks ------------------------

@pytest.mark.parametrize("press_name", ["jacap", "adakv_jacap"])
def test_kvpress_evaluation_cli(press_name, tok, tmp_path):
    "`jacap-nb kvpress-eval`: kvpress's own evaluate.py runs JacapPress (alone and in AdaKVPress) on SmolLM2 and scores it with its metric."
    import json, subprocess, sys
    import pandas as pd
    from pathlib import Path
    from kvpress_suite import WORK, fetch_tests
    from jacap_nb.kvpress_compat import ruler_dataset
    load_smollm2()                                       # the dequantised copy kvpress's CLI loads by its folder
    exs = passkey_examples(lengths=[192], depths=[0.25, 0.75], n=1, filler="pydoc", count_tokens=token_counter(tok))
    ds = ruler_dataset(exs, tmp_path / "ruler")
    ev = fetch_tests(WORK) / "evaluation"
    cmd = [str(Path(sys.executable).parent / "jacap-nb"), "kvpress-eval", "--evaluation-dir", str(ev), "--dataset-dir", str(ds),
           "--config_file", str(ev / "evaluate_config.yaml"), "--model", str(smollm2_cache_dir()), "--dataset", "jacap_tasks",
           "--data_dir", "4096", "--press_name", press_name, "--compression_ratio", "0.5", "--max_new_tokens", "4",
           "--device", "cpu", "--output_dir", str(tmp_path / "out")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = (tmp_path / "out").iterdir()
    assert f"__{press_name}__0.50" in run.name
    pred = pd.read_csv(run / "predictions.csv")
    assert len(pred) == 2 and (pred["compression_ratio"] == 0.5).all()
    assert 0 <= json.loads((run / "metrics.json").read_text())["passkey"]["string_match"] <= 100


def test_kvpress_evaluation_cli_refuses_a_wrong_folder(tmp_path):
    from jacap_nb.kvpress_compat import kvpress_evaluate, ruler_dataset
    with pytest.raises(FileNotFoundError, match="has no evaluate.py"): kvpress_evaluate(tmp_path, [])
    with pytest.raises(ValueError, match="needs question-answering examples"): ruler_dataset([], tmp_path)
