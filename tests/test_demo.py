"""jacap_nb.demo: the table shows what generate answers and what each cache costs (on a tiny model), and the real
demo on SmolLM2 (slow). 10_demo checks five bad options of demo() and three of the CLI."""
import re
import pytest, torch
from jacap_nb.demo import demo, _evenly
from jacap_nb.models import tiny_model
from jacap_nb.pipeline import generate, PROMPT_FORMATS
from jacap_nb.presses import make_press
from jacap_nb.tasks import passkey_examples, number_complete, passkey_correct
from jacap_nb.texts import token_counter
from tinytools import CharTokenizer, NoModel


@pytest.mark.parametrize("fmt", list(PROMPT_FORMATS))
def test_demo_cells_are_generate_answers(fmt, capsys):
    model, tok = tiny_model("llama"), CharTokenizer()
    res = demo(prompts=2, tokens=128, ratios=(0.5, 0.75), methods=("jacap", "knorm"), filler="repetitive", fmt=fmt,
               model=model, tokenizer=tok, verbose=True, window=2)
    exs = passkey_examples(lengths=[128], depths=_evenly(2), n=1, filler="repetitive", seed=0, count_tokens=token_counter(tok))
    cols = [("full", 0.0)] + [(m, r) for m in ("jacap", "knorm") for r in (0.5, 0.75)]
    assert set(res["cells"]) == {(e.meta["depth"], m, r) for e in exs for m, r in cols}
    for e in exs:
        for m, r in cols:
            press = None if m == "full" else make_press(m, r, window=2)
            want = generate(model, tok, e.context, e.question, press, 12, e.answer_prefix, PROMPT_FORMATS[fmt], stop=number_complete)
            cell = res["cells"][(e.meta["depth"], m, r)]
            assert cell == dict(answer=want, correct=passkey_correct(want, e.answer), expected=e.answer)
    n = res["costs"][("full", 0.0)]["kept"]
    for m, r in cols[1:]:
        c = res["costs"][(m, r)]
        assert c["kept"] == pytest.approx(int(n * (1 - r)), abs=1) and c["mib"] < res["costs"][("full", 0.0)]["mib"]
        assert 0 < c["evict_s"] and 0 < c["prefill_s"]
    out = capsys.readouterr().out
    assert "full cache" in out and "jacap 0.75" in out
    assert len(re.findall("[✓✗] ['\"]", out)) == len(exs) * len(cols)              # one marked, whole answer per cell


def test_demo_says_which_layers_a_hybrid_model_compresses(capsys):
    "On a model with sliding-window layers the table says the ratio applies to the others; on a plain one it says nothing."
    from jacap_nb.models import sliding_window_layers
    for kind in ("gemma3", "llama"):
        model = tiny_model(kind)
        demo(prompts=1, tokens=128, ratios=(0.5,), methods=("knorm",), filler="repetitive", model=model,
             tokenizer=CharTokenizer(), verbose=True)
        out, w = capsys.readouterr().out, len(sliding_window_layers(model))
        n = model.config.get_text_config().num_hidden_layers
        assert (f"{w} of {n} layers attend through a sliding window" in out) == (kind == "gemma3") and (w > 0) == (kind == "gemma3")


@pytest.mark.parametrize("kw,exc,match", [
    (dict(tokens=5), ValueError, r"tokens must be an int in \[128, 8192\]"), (dict(tokens=True), ValueError, "tokens must be"),
    (dict(prompts=21), ValueError, "prompts must be an int in"), (dict(ratios=()), ValueError, "ratios must be a non-empty list"),
    (dict(ratios=(True,)), ValueError, r"ratios must be numbers in \(0, 1\)"), (dict(methods=()), ValueError, "methods must be a non-empty"),
    (dict(fmt="glued"), ValueError, "fmt must be one of blank, kvpress"), (dict(n_sink=-1), ValueError, "n_sink must be an int >= 0"),
    (dict(halo="5"), TypeError, "halo must be an int"), (dict(max_cache_tokens=3), ValueError, "cannot hold the 4 protected tokens")])
def test_demo_options_checked_before_the_model(kw, exc, match):
    with pytest.raises(exc, match=match):
        demo(model=NoModel(), tokenizer=CharTokenizer(), verbose=False, **kw)


@pytest.mark.parametrize("n,want", [(1, [0.5]), (2, [0.1, 0.9]), (3, [0.1, 0.5, 0.9]), (5, [0.1, 0.3, 0.5, 0.7, 0.9])])
def test_depths_are_spread_evenly(n, want):
    assert _evenly(n) == want


@pytest.mark.slow
def test_demo_on_smollm2():
    "The README's command 1: the full cache finds every pass key; each compressed cache keeps its share of the tokens."
    res = demo(prompts=2, verbose=False)
    full = [c for (d, m, r), c in res["cells"].items() if m == "full"]
    assert len(full) == 2 and all(c["correct"] for c in full)
    n = res["costs"][("full", 0.0)]["kept"]
    for (m, r), c in res["costs"].items():
        if m != "full": assert c["kept"] == pytest.approx(int(n * (1 - r)), abs=1) and c["mib"] < (1 - r + 0.02) * res["costs"][("full", 0.0)]["mib"]


def test_demo_measured_budget_column():
    "A LayerBudget adds 'jacap+budget' columns equal to generate with that budget; 'shipped' adds none on a tiny model."
    from jacap_nb.allocation import LayerBudget
    from jacap_nb.demo import MEASURED
    model, tok = tiny_model("llama"), CharTokenizer()
    lb = LayerBudget((0.01, 0.5), ((0.9, 0.1), (0.5, 0.0)))
    kw = dict(prompts=1, tokens=128, ratios=(0.75,), methods=("knorm",), filler="repetitive", model=model, tokenizer=tok, verbose=False)
    res = demo(layer_budget=lb, **kw)
    ex = passkey_examples(lengths=[128], depths=_evenly(1), n=1, filler="repetitive", seed=0, count_tokens=token_counter(tok))[0]
    want = generate(model, tok, ex.context, ex.question, make_press("jacap", 0.75, budget=lb), 12, ex.answer_prefix, stop=number_complete)
    assert res["cells"][(ex.meta["depth"], MEASURED, 0.75)]["answer"] == want
    assert {m for _, m, _ in demo(**kw)["cells"]} == {"full", "knorm"}                 # "shipped": SmolLM2's only
    with pytest.raises(TypeError, match="layer_budget must be"): demo(layer_budget="mine", **kw)
