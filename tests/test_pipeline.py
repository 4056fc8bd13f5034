"""jacap_nb.pipeline (prompts, greedy decoding, generate / compress_context / answer) and every user-facing entry point's
input checks: each bad input raises a ValueError or TypeError naming the argument *before* any model work (a model
whose forward raises AssertionError, or a load_smollm2 that raises, proves it)."""
import copy, functools
import pytest, torch
from transformers import DynamicCache
from jacap_nb.models import tiny_model, cache_kwarg, load_smollm2
from jacap_nb.capture import capture_prefill
from jacap_nb.cache import compress_layers, active_run
from jacap_nb.allocation import LayerBudget
from jacap_nb.presses import make_press
from jacap_nb.pipeline import (PROMPT_FORMATS, prompt_texts, encode_prompt, eos_token_ids, greedy_decode, CompressedContext,
                               compress_context, answer, generate)
from tinytools import CharTokenizer, NoModel, count_attention_calls

NM, TOK = NoModel(), CharTokenizer()
CTX = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. " * 3
SEPS = list(PROMPT_FORMATS.values())


@pytest.fixture(scope="module")
def tiny(): return tiny_model("llama", seed=0)


# --- bad input, before any model work -------------------------------------------------------------------------------

BAD = {
    "empty context":                (lambda: generate(NM, TOK, "", "What?"), ValueError, "context must be a non-empty string"),
    "blank context":                (lambda: generate(NM, TOK, " \n\t", "What?"), ValueError, "context must be a non-empty string"),
    "context not str":              (lambda: generate(NM, TOK, ["a"], "What?"), TypeError, "context must be a str"),
    "empty question":               (lambda: generate(NM, TOK, CTX, ""), ValueError, "question must be a non-empty string"),
    "question list with ''":        (lambda: generate(NM, TOK, CTX, ["What?", ""]), ValueError, "question must be a non-empty string"),
    "empty question list":          (lambda: generate(NM, TOK, CTX, []), TypeError, "question must be a str or a non-empty list"),
    "max_new_tokens=0":             (lambda: generate(NM, TOK, CTX, "What?", max_new_tokens=0), ValueError, "max_new_tokens must be an int >= 1"),
    "max_new_tokens=2.0":           (lambda: generate(NM, TOK, CTX, "What?", max_new_tokens=2.0), TypeError, "max_new_tokens must be an int"),
    "press='jacap'":                (lambda: generate(NM, TOK, CTX, "What?", press="jacap"), TypeError, r"use press=make_press\('jacap'"),
    "press=object()":               (lambda: generate(NM, TOK, CTX, "What?", press=object()), TypeError, "press must be a jacap_nb press"),
    "separator=None":               (lambda: generate(NM, TOK, CTX, "What?", separator=None), TypeError, "separator must be a str"),
    "answer_prefix=3":              (lambda: generate(NM, TOK, CTX, "What?", answer_prefix=3), TypeError, "answer_prefix must be a str"),
    "decoding press, 2 questions":  (lambda: generate(NM, TOK, CTX, ["a?", "b?"], press=make_press("knorm", 0.5, max_cache_tokens=64)),
                                     ValueError, "ask one question at a time"),
    "prompt < window":              (lambda: generate(NM, TOK, "abc", "What?", press=make_press("knorm", 0.5, window=8)),
                                     ValueError, "window=8 is larger than the prompt"),
    "prompt < n_sink + window":     (lambda: generate(NM, TOK, "x" * 20, "What?", press=make_press("knorm", 0.5, n_sink=8, window=8)),
                                     ValueError, "below the 16 protected tokens"),
    "prompt < window, decoding":    (lambda: generate(NM, TOK, "abc", "What?", press=make_press("knorm", 0.5, window=8, max_cache_tokens=64)),
                                     ValueError, "window=8 is larger than the prompt"),
    "compress_context ''":          (lambda: compress_context(NM, TOK, "", make_press("jacap", 0.5)), ValueError, "context must be"),
    "compress_context press name":  (lambda: compress_context(NM, TOK, CTX, "knorm"), TypeError, r"make_press\('knorm'"),
    "answer on a str":              (lambda: answer(NM, TOK, "a context", "What?"), TypeError, "compressed must be what compress_context returns"),
    "answer ''":                    (lambda: answer(NM, TOK, CompressedContext(None, 10, None), ""), ValueError, "question must be a non-empty"),
    "answer max_new_tokens=0":      (lambda: answer(NM, TOK, CompressedContext(None, 10, None), "What?", 0), ValueError, "max_new_tokens"),
    "make_press windw=8":           (lambda: make_press("jacap", windw=8), ValueError, "unknown option 'windw'.*did you mean 'window'"),
    "make_press max_cache_token":   (lambda: make_press("jacap", max_cache_token=100), ValueError, "did you mean 'max_cache_tokens'"),
    "make_press ratio '0.5'":       (lambda: make_press("jacap", compression_ratio="0.5"), TypeError, "compression_ratio must be a number; got str"),
    "make_press ratio True":        (lambda: make_press("jacap", True), TypeError, "compression_ratio must be a number; got bool"),
    "make_press ratio 1.0":         (lambda: make_press("jacap", 1.0), ValueError, r"compression_ratio must be in \[0, 1\)"),
    "make_press ratio -0.1":        (lambda: make_press("jacap", -0.1), ValueError, "compression_ratio must be a finite number"),
    "make_press name 3":            (lambda: make_press(3), TypeError, "name must be a scorer name"),
    "make_press jacpa":             (lambda: make_press("jacpa"), ValueError, "did you mean 'jacap'"),
    "make_press max_cache '40'":    (lambda: make_press("knorm", 0, max_cache_tokens="40"), TypeError, "max_cache_tokens must be an int"),
    "make_press target alone":      (lambda: make_press("knorm", 0, target_cache_tokens=8), ValueError, "only mean something with max_cache_tokens"),
    "make_press target+interval":   (lambda: make_press("knorm", 0, max_cache_tokens=64, interval=4, target_cache_tokens=40),
                                     ValueError, "target_cache_tokens or interval, not both"),
    "make_press bad span":          (lambda: make_press("knorm", 0.5, protect=[(5, 2)]), ValueError, "spans must be"),
    "make_press head_reduce":       (lambda: make_press("knorm", 0.5, head_reduce="heads"), ValueError, "head_reduce must be one of"),
    "make_press n_sink -1":         (lambda: make_press("knorm", 0.5, n_sink=-1), ValueError, "n_sink must be an int >= 0"),
    "make_press deadline 0":        (lambda: make_press("knorm", 0.5, deadline=0), ValueError, "deadline must be a finite number > 0"),
    "make_press tau '5'":           (lambda: make_press("jacap_paper", tau="5"), TypeError, "tau must be a number"),
    "make_press noise_var":         (lambda: make_press("jacap", noise_var="autom"), ValueError, 'noise_var must be a number > 0 or "auto"'),
    "make_press queries":           (lambda: make_press("jacap", queries="ctx"), ValueError, "queries must be one of"),
    "make_press prior_weight 2":    (lambda: make_press("jacap", prior_weight=2), ValueError, r"prior_weight must be a finite number in \[0, 1\]"),
    "make_press causal=1":          (lambda: make_press("jacap", causal=1), TypeError, "causal must be True or False"),
    "make_press block 0":           (lambda: make_press("jacap", block=0), ValueError, "block must be an int >= 1"),
    "make_press kernel_size 4":     (lambda: make_press("snapkv", kernel_size=4), ValueError, "kernel_size must be odd"),
    "make_press pool":              (lambda: make_press("snapkv", pool="min"), ValueError, 'pool must be "max" or "avg"'),
    "make_press seed -1":           (lambda: make_press("random", seed=-1), ValueError, "seed must be an int >= 0"),
    "make_press preset":            (lambda: make_press("jacap", preset="papr"), ValueError, "unknown preset 'papr'"),
    "make_press knorm tau":         (lambda: make_press("knorm", tau=1.0), ValueError, "unknown option 'tau' for make_press\\('knorm'\\)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_before_model_work(case):
    fn, exc, match = BAD[case]
    with pytest.raises(exc, match=match):
        fn()


def test_protected_tokens_above_the_high_water_mark():
    "max_cache_tokens=3 cannot hold the 4 sinks: the message says so and what to change (not a target it computed)."
    with pytest.raises(ValueError) as e:
        make_press("knorm", 0, max_cache_tokens=3)
    msg = str(e.value)
    assert "max_cache_tokens=3" in msg and "4 protected tokens" in msg and "raise max_cache_tokens" in msg
    assert "target_cache_tokens" not in msg


@pytest.mark.parametrize("opts,decoding", [(dict(max_cache_tokens=10), (10, 9)), (dict(max_cache_tokens=40), (40, 35)),
                                           (dict(max_cache_tokens=6), (6, 5)), (dict(max_cache_tokens=1000), (1000, 968)),
                                           (dict(max_cache_tokens=40, interval=2), (40, 38)),
                                           (dict(max_cache_tokens=40, target_cache_tokens=8), (40, 8)),
                                           (dict(max_cache_tokens=20, window=8), (20, 18)),
                                           (dict(max_cache_tokens=14, protect=[(0, 8)]), (14, 13))])
def test_make_press_decoding_budgets(opts, decoding):
    "Small high-water marks are accepted and not cut to a fraction of themselves (target = max - min(32, max // 8), at least 1)."
    p = make_press("knorm", 0, **opts)
    assert p.decoding == decoding
    assert p.n_protected < decoding[1] < decoding[0]


def test_nested_presses_are_refused_before_the_model_runs(tiny):
    inner = make_press("jacap", 0.5)
    calls, hds = count_attention_calls(tiny)
    try:
        with make_press("knorm", 0.5)(tiny):
            with pytest.raises(ValueError, match=r"another press \(EvictionPress\) is already active"):
                generate(tiny, TOK, CTX, "What?", press=inner)
            with pytest.raises(ValueError, match="already active"):
                with inner(tiny): pass
    finally:
        for h in hds: h.remove()
    assert calls == [] and active_run(tiny) is None
    assert isinstance(generate(tiny, TOK, CTX, "What?", press=inner, max_new_tokens=2), str)      # usable afterwards


# --- the CLI and the harness refuse bad options before loading the model --------------------------------------------

def _no_load(*a, **k): raise AssertionError("load_smollm2 was called")


CLI_BAD = {
    "demo --ratios 1.5":      ["demo", "--ratios", "1.5"],
    "demo --ratios 0":        ["demo", "--ratios", "0"],
    "demo --methods jacpa":   ["demo", "--methods", "jacpa"],
    "demo --option hallo=5":  ["demo", "--option", "hallo=5"],
    "demo --option window":   ["demo", "--option", "window"],
    "demo --prompts 0":       ["demo", "--prompts", "0"],
    "demo --tokens 5":        ["demo", "--tokens", "5"],
    "demo --fmt glued":       ["demo", "--fmt", "glued"],
    "demo --filler wiki":     ["demo", "--filler", "wiki"],
    "demo max_cache_tokens=3": ["demo", "--option", "max_cache_tokens=3"],
    "bench --ratios 1.5":     ["bench", "passkey", "--methods", "full", "jacap", "--ratios", "1.5", "--out", "OUT"],
    "bench --methods h2o":    ["bench", "passkey", "--methods", "h2o", "--out", "OUT"],
    "bench jacap:windw=3":    ["bench", "passkey", "--methods", "jacap:windw=3", "--out", "OUT"],
    "bench --formats glued":  ["bench", "passkey", "--methods", "full", "--formats", "glued", "--out", "OUT"],
    "bench --n-facts passkey": ["bench", "passkey", "--methods", "full", "--n-facts", "2", "--out", "OUT"],
    "bench no --methods":     ["bench", "passkey", "--out", "OUT"],
    "bench unknown task":     ["bench", "longbench", "--methods", "full", "--out", "OUT"],
    "bench kvpress here":     ["bench", "passkey", "--methods", "kvpress:TOVA", "--out", "OUT"],
}


def _exit_code(argv) -> int:
    from jacap_nb.cli import main
    try: return main(argv)
    except SystemExit as e: return e.code


@pytest.mark.parametrize("case", list(CLI_BAD))
def test_cli_bad_options_exit_2_without_loading_the_model(case, monkeypatch, tmp_path, capsys):
    if case == "bench kvpress here" and __import__("importlib").util.find_spec("kvpress"): pytest.skip("kvpress is installed here")
    monkeypatch.setattr("jacap_nb.models.load_smollm2", _no_load)
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in CLI_BAD[case]]
    assert _exit_code(argv) == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()                   # nothing written either


@pytest.mark.parametrize("opt", [["--lengths", "5"], ["--depths", "2"], ["--n", "0"], ["--filler", "wiki"]], ids=lambda o: " ".join(o))
def test_cli_bench_task_values_checked_before_loading(opt, monkeypatch, tmp_path):
    monkeypatch.setattr("jacap_nb.models.load_smollm2", _no_load)
    assert _exit_code(["bench", "passkey", "--methods", "full", *opt, "--out", str(tmp_path / "out")]) == 2


@pytest.mark.parametrize("opt", ["window=5000", "n_sink=2000"])
def test_cli_demo_prompt_budget_checked_before_loading(opt, monkeypatch):
    monkeypatch.setattr("jacap_nb.models.load_smollm2", _no_load)
    assert _exit_code(["demo", "--option", opt]) == 2


@pytest.mark.parametrize("command", ["demo", "bench", "speed"])
def test_every_cli_command_ships_with_the_package(command):
    """Each sub-command's module is a file of the imported jacap_nb package (checked on disk: an editable install of
    another checkout must not supply a missing module) and answers --help."""
    import pathlib, jacap_nb
    from jacap_nb.cli import COMMANDS
    mod = COMMANDS[command][0]
    assert (pathlib.Path(jacap_nb.__file__).parent / (mod.split(".")[-1] + ".py")).exists(), mod
    assert _exit_code([command, "--help"]) == 0


def _run_bench_cases():
    from jacap_nb.bench import run_bench
    go = lambda out, **kw: run_bench(**{**dict(task="passkey", methods=["full", "jacap"], ratios=[0.5], out_dir=out,
                                               model=NM, tokenizer=TOK), **kw})
    return {
        "unknown task option":  (lambda out: go(out, lenghts=[100]), "unknown option\\(s\\) lenghts for task 'passkey'; valid: lengths"),
        "ratio 1.5":            (lambda out: go(out, ratios=[0.5, 1.5]), r"compression ratios must be numbers in \[0, 1\); got 1.5"),
        "ratio '0.5'":          (lambda out: go(out, ratios=["0.5"]), "compression ratios must be numbers"),
        "no ratios":            (lambda out: go(out, ratios=[]), "ratios must be a non-empty list"),
        "format glued":         (lambda out: go(out, formats=["blank", "glued"]), "unknown prompt format 'glued'; valid: blank, kvpress"),
        "no formats":           (lambda out: go(out, formats=[]), "formats must be a non-empty list"),
        "unknown task":         (lambda out: go(out, task="longbench"), "unknown task 'longbench'"),
        "unknown method":       (lambda out: go(out, methods=["full", "h2o"]), "unknown method 'h2o'"),
        "bad method option":    (lambda out: go(out, methods=["jacap:windw=2"]), "did you mean 'window'"),
        "task value":           (lambda out: go(out, lengths=[5]), "lengths must be a non-empty list of ints >= 16"),
    }


@pytest.mark.parametrize("case", list(_run_bench_cases()))
def test_run_bench_bad_options(case, tmp_path):
    fn, match = _run_bench_cases()[case]
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=match):
        fn(out)
    assert not (out / "rows.jsonl").exists()


# --- generate is the harness's path ---------------------------------------------------------------------------------

PRESSES = {"full": lambda: None, "jacap 0.5": lambda: make_press("jacap", 0.5), "knorm 0.75 shared": lambda: make_press("knorm", 0.75, head_reduce="layer"),
           "snapkv 0.5 window 4": lambda: make_press("snapkv", 0.5, window=4),
           "jacap replay heads 0.75": lambda: make_press("jacap", 0.75, queries="replay", score="attention", prior_weight=0, budget="heads"),
           "jacap replay layers 0.75": lambda: make_press("jacap", 0.75, queries="replay", score="attention", prior_weight=0, budget="layers"),
           "jacap measured budget 0.75": lambda: make_press("jacap", 0.75, budget=LayerBudget((0.01, 0.5), ((0.9, 0.1), (0.5, 0.0))))}
QUESTIONS = ["What is the colour of the sky?", "Where do we go?", "What is green?"]


def _harness(model, tok, context, questions, press, prefix, sep, max_new_tokens):
    "What jacap_nb.bench does: one captured prefill, replayed by compress_layers, every question on a copy of the cache."
    ctx_ids, q_ids = encode_prompt(tok, context, questions, prefix, sep)
    pre = capture_prefill(model, ctx_ids)
    cache = pre.full_cache() if press is None else compress_layers(press, model, pre)[0]
    return [greedy_decode(model, tok, copy.deepcopy(cache), q, pre.n_tokens, max_new_tokens) for q in q_ids]


@pytest.mark.parametrize("press", list(PRESSES))
@pytest.mark.parametrize("sep", SEPS, ids=list(PROMPT_FORMATS))
@pytest.mark.parametrize("many", [False, True], ids=["one question", "three questions"])
def test_generate_equals_the_harness_path(press, sep, many, tiny):
    qs = QUESTIONS if many else QUESTIONS[0]
    got = generate(tiny, TOK, CTX, qs, PRESSES[press](), 8, "The answer is ", sep)
    want = _harness(tiny, TOK, CTX, QUESTIONS if many else QUESTIONS[:1], PRESSES[press](), "The answer is ", sep, 8)
    assert got == (want if many else want[0])
    assert all(len(a) > 0 for a in want)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_greedy_decode_equals_model_generate(arch):
    "The one greedy decoder gives Transformers' greedy generate on the same tokens (full cache), up to its eos."
    m = tiny_model(arch)
    ctx_ids, (q_ids,) = encode_prompt(TOK, CTX, ["What?"], "", "\n\n")
    ref = m.generate(torch.cat([ctx_ids, q_ids], 1), max_new_tokens=10, do_sample=False)[0, ctx_ids.shape[1] + q_ids.shape[1]:].tolist()
    ref = ref[:ref.index(2)] if 2 in ref else ref
    cache = DynamicCache()
    with torch.no_grad(): m.model(input_ids=ctx_ids, **{cache_kwarg(m): cache})
    assert greedy_decode(m, TOK, cache, q_ids, ctx_ids.shape[1], 10) == TOK.decode(ref)


def test_answer_leaves_the_compressed_context_unchanged(tiny):
    ctx = compress_context(tiny, TOK, CTX, make_press("jacap", 0.5))
    shapes, nbytes = [tuple(l.keys.shape) for l in ctx.cache.layers], ctx.nbytes
    a1 = answer(tiny, TOK, ctx, QUESTIONS[0], 6)
    answer(tiny, TOK, ctx, QUESTIONS[1], 6)
    assert answer(tiny, TOK, ctx, QUESTIONS[0], 6) == a1
    assert [tuple(l.keys.shape) for l in ctx.cache.layers] == shapes and ctx.nbytes == nbytes
    assert ctx.kept_tokens == ctx.n_tokens // 2 and ctx.cache.get_seq_length() == ctx.n_tokens
    assert len(ctx.run.records) == 2 and ctx.prefill_seconds > 0


@pytest.mark.parametrize("limit", [1, 3, 5])
def test_stop_ends_the_answer(limit, tiny):
    calls = []
    def stop(text): calls.append(text); return len(text) >= limit
    out = generate(tiny, TOK, CTX, "What?", max_new_tokens=20, stop=stop)
    assert len(out) == limit and calls[-1] == out                 # one character per token with this tokenizer


@pytest.mark.parametrize("gen_eos,tok_eos,want", [(2, 2, {2}), ([2, 7], 2, {2, 7}), (None, 5, {5}), (3, None, {3}), ((4, 9), 4, {4, 9})])
def test_eos_token_ids(gen_eos, tok_eos, want):
    m = tiny_model("llama")
    m.generation_config.eos_token_id = gen_eos
    tok = CharTokenizer(); tok.eos_token_id = tok_eos
    assert eos_token_ids(m, tok) == want


# --- prompts with a chat template -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smol_tok():
    from transformers import AutoTokenizer
    from jacap_nb.models import smollm2_cache_dir
    d = smollm2_cache_dir()
    return AutoTokenizer.from_pretrained(d) if (d / "tokenizer_config.json").exists() else load_smollm2()[1]


@pytest.mark.parametrize("sep", SEPS, ids=list(PROMPT_FORMATS))
@pytest.mark.parametrize("prefix", ["", "The pass key is "])
def test_prompt_split_is_the_chat_template(sep, prefix, smol_tok):
    "Context and question texts join into the chat template of the whole user turn; the split is where the question starts."
    context, question = "Some text.\nMore text.", "What is the pass key?"
    c, q = prompt_texts(smol_tok, context, question, prefix, sep)
    whole = smol_tok.apply_chat_template([{"role": "user", "content": context + sep + question}], add_generation_prompt=True, tokenize=False)
    assert c + q == whole + prefix
    assert c.endswith(context + sep) and q.startswith(question)
    ctx_ids, (q_ids,) = encode_prompt(smol_tok, context, [question], prefix, sep)
    assert smol_tok.decode(ctx_ids[0]) == c and smol_tok.decode(q_ids[0]) == q


@pytest.mark.parametrize("sep", SEPS, ids=list(PROMPT_FORMATS))
def test_prompt_split_without_chat_template(sep):
    tok = CharTokenizer(); tok.bos_token = "<s>"
    assert prompt_texts(tok, "ctx", "q?", "A: ", sep) == ("<s>ctx" + sep, "q?\nA: ")


@pytest.mark.slow
def test_smollm2_ratio_zero_is_the_full_cache():
    "On the real model, a press at ratio 0 answers what the full cache answers, and both equal Transformers' generate."
    model, tok = load_smollm2()
    from jacap_nb.tasks import passkey_examples
    from jacap_nb.texts import token_counter
    ex = passkey_examples(lengths=[256], depths=[0.5], n=1, filler="pydoc", count_tokens=token_counter(tok))[0]
    full = generate(model, tok, ex.context, ex.question, None, 8, ex.answer_prefix)
    assert generate(model, tok, ex.context, ex.question, make_press("jacap", 0.0), 8, ex.answer_prefix) == full
    ctx_ids, (q_ids,) = encode_prompt(tok, ex.context, [ex.question], ex.answer_prefix)
    ids = torch.cat([ctx_ids, q_ids], 1)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)[0, ids.shape[1]:]
    assert tok.decode(out, skip_special_tokens=True) == full


@pytest.mark.slow
def test_smollm2_default_press_leaves_the_model_as_it_was():
    "The default press (a measured per-layer budget: head masks; queries from the attention function) on the real model."
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as reg
    model, tok = load_smollm2()
    state = lambda: (sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()),
                     {k: reg[k] for k in reg.keys()}, active_run(model))
    before = state()
    from jacap_nb.tasks import passkey_examples
    from jacap_nb.texts import token_counter
    ex = passkey_examples(lengths=[256], depths=[0.5], n=1, filler="pydoc", count_tokens=token_counter(tok))[0]
    press = make_press("jacap", 0.75)
    assert isinstance(press.resolve(model, tok).budget, LayerBudget)
    generate(model, tok, ex.context, ex.question, press, 8, ex.answer_prefix)
    assert state() == before
