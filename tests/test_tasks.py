"Fast tests of jacap_nb.tasks: determinism, needle placement, answers present, metrics."
import math, random
import pytest, torch
from jacap_nb.tasks import (passkey_examples, multikey_examples, document_examples, streaming_examples, haystack,
                            passkey_correct, number_complete, token_fidelity, wilson_interval, get_task, source_text,
                            MULTIKEY_FACT, approx_tokens)

def char_count(text): return len(text)

@pytest.mark.parametrize("filler", ["britannica", "pydoc", "repetitive"])
def test_passkey_deterministic(filler):
    a = passkey_examples(lengths=[300, 600], depths=[0.0, 0.5, 1.0], n=2, filler=filler, seed=3)
    b = passkey_examples(lengths=[300, 600], depths=[0.0, 0.5, 1.0], n=2, filler=filler, seed=3)
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    c = passkey_examples(lengths=[300, 600], depths=[0.0, 0.5, 1.0], n=2, filler=filler, seed=4)
    assert [e.answer for e in a] != [e.answer for e in c]
    assert len({e.uid for e in a}) == len(a) == 12

NEEDLE = "The pass key is {k}. Remember it. {k} is the pass key."

def _actual_depth(e):
    "Needle start / filler length, in characters (= tokens under char_count)."
    return e.context.index(f"The pass key is {e.answer}") / (len(e.context) - len(NEEDLE.format(k=e.answer)) - 1)

@pytest.mark.parametrize("depth", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
def test_needle_at_requested_depth(depth):
    "Short repetitive sentences: the needle lands within 2% of the requested depth."
    for e in passkey_examples(lengths=[2000], depths=[depth], n=3, filler="repetitive", count_tokens=char_count):
        assert abs(_actual_depth(e) - depth) < 0.02, (depth, _actual_depth(e))
        assert abs(e.meta["measured_depth"] - _actual_depth(e)) < 0.01
        assert e.context.count(e.answer) == 2 and abs(e.meta["n_tokens"] - 2000) < 100

@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_needle_depth_prose(depth):
    "Prose: the needle sits at the sentence boundary nearest the depth; meta records where it really is."
    for e in passkey_examples(lengths=[4000], depths=[depth], n=3, count_tokens=char_count):
        assert abs(e.meta["measured_depth"] - _actual_depth(e)) < 0.01
        assert abs(_actual_depth(e) - depth) < 0.15, (depth, _actual_depth(e))

def test_haystack_edges_and_errors():
    ctx, d = haystack(200, 0.0, "NEEDLE.", "repetitive")
    assert ctx.startswith("NEEDLE.") and d == 0.0
    ctx, d = haystack(200, 1.0, "NEEDLE.", "repetitive")
    assert ctx.endswith("NEEDLE.") and d == 1.0
    with pytest.raises(ValueError, match="depth must be in"): haystack(200, -0.1, "x")
    with pytest.raises(ValueError, match="source must be one of"): source_text("nope")
    with pytest.raises(ValueError, match="lengths must be"): passkey_examples(lengths=[])
    with pytest.raises(ValueError, match="needle must contain"): passkey_examples(needle="no key here")

def test_multikey_facts():
    exs = multikey_examples(lengths=[800], n_keys=7, n=4, seed=1)
    for e in exs:
        assert e.context.count("The value of key ") == 7
        assert MULTIKEY_FACT.format(key=e.meta["key"], value=e.answer) in e.context
        assert e.meta["key"] in e.question and e.meta["key"] in e.answer_prefix
    assert [e.context for e in exs] == [e.context for e in multikey_examples(lengths=[800], n_keys=7, n=4, seed=1)]

def test_documents_lengths():
    for e in document_examples(n=3, prefix_tokens=300, continuation_tokens=50, count_tokens=char_count):
        assert len(e.context) >= 300 and len(e.answer) >= 50 and e.question == ""
    assert streaming_examples(n=1)[0].task == "streaming"
    with pytest.raises(ValueError, match="real text"): document_examples(source="repetitive")

def test_scoring():
    assert passkey_correct("71432.", "71432") and passkey_correct("The pass key is 71432", "71432")
    assert not passkey_correct("1616 and 71432", "71432") and not passkey_correct("no digits", "71432")
    assert [number_complete(t) for t in ("7", "71432", "71432.")] == [False, False, True]
    assert get_task("passkey").score is passkey_correct
    lo, hi = wilson_interval(19, 20)
    assert abs(lo - 0.7639) < 1e-3 and abs(hi - 0.9911) < 1e-3
    assert wilson_interval(0, 0) == (0.0, 1.0)

def test_token_fidelity():
    a, b = torch.randn(5, 9), torch.randn(5, 9)
    f = token_fidelity(a, a, torch.zeros(5, dtype=torch.long))
    assert abs(f["kl"]) < 1e-6 and f["top1"] == 1.0 and f["ppl_full"] == f["ppl_comp"]
    p, q = a.softmax(-1), b.softmax(-1)
    assert abs(token_fidelity(a, b)["kl"] - float((p * (p / q).log()).sum(-1).mean())) < 1e-5
