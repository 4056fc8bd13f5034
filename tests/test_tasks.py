"""jacap_nb.tasks as grids: determinism, needle placement, answers present, the multi-question contexts, errors; the code task.
11_tasks checks one example of each generator, the scoring functions, token_fidelity and the Wilson interval."""
import math, random
import pytest, torch
from jacap_nb.tasks import (passkey_examples, multikey_examples, multiquestion_examples, document_examples, streaming_examples,
                            passkey_correct, number_complete, wilson_interval, get_task, MULTIKEY_FACT, MULTIQ_FACTS)
from jacap_nb.texts import haystack, source_text, approx_tokens
from jacap_nb.code_tasks import code_examples, code_correct, code_similarity, first_line_done, source_lines, DEF_LINE

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

@pytest.mark.parametrize("fn,match", [
    (lambda: haystack(200, -0.1, "x"), r"depth must be a finite number in \[0, 1\]"),
    (lambda: source_text("nope"), "source must be one of"),
    (lambda: passkey_examples(lengths=[]), "lengths must be a non-empty list"),
    (lambda: passkey_examples(lengths=[8]), "ints >= 16"),
    (lambda: passkey_examples(depths=[]), "depths must be a non-empty list"),
    (lambda: passkey_examples(n=0), "n must be an int >= 1"),
    (lambda: passkey_examples(needle="no key here"), "needle must contain"),
    (lambda: multiquestion_examples(n_facts=len(MULTIQ_FACTS) + 1), f"n_facts must be <= {len(MULTIQ_FACTS)}"),
    (lambda: multiquestion_examples(n_facts=0), "n_facts must be an int >= 1"),
    (lambda: document_examples(source="repetitive"), "real text"),
    (lambda: get_task("longbench"), "valid tasks")])
def test_generator_errors(fn, match):
    with pytest.raises(ValueError, match=match): fn()

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

@pytest.mark.parametrize("filler", ["britannica", "pydoc", "repetitive"])
@pytest.mark.parametrize("n_facts", [1, 3, 4])
@pytest.mark.parametrize("length", [256, 1024])
def test_multiquestion_contexts(filler, n_facts, length):
    "n_facts questions share one context (same text, same context_id); every answer is stated in it; deterministic."
    exs = multiquestion_examples(lengths=[length], n=2, filler=filler, n_facts=n_facts, seed=5, count_tokens=len)
    assert len(exs) == 2 * n_facts and len({e.uid for e in exs}) == len(exs)
    groups = {}
    for e in exs: groups.setdefault(e.meta["context_id"], []).append(e)
    assert len(groups) == 2
    for cid, g in groups.items():
        assert len(g) == n_facts and len({e.context for e in g}) == 1 and len({e.question for e in g}) == n_facts
        assert [e.meta["question_index"] for e in g] == list(range(n_facts))
        for e in g:
            assert e.task == "multiquestion" and e.uid.startswith(cid)
            name = next(n for n, _ in MULTIQ_FACTS if n in e.question)
            assert e.answer_prefix == f"The {name} is " and e.answer.isdigit() and len(e.answer) == 5
            tpl = dict(MULTIQ_FACTS)[name]
            assert tpl.format(v=e.answer) in e.context and e.context.count(e.answer) >= 2
            assert get_task("multiquestion").score(f"{e.answer}.", e.answer)
        assert len({next(n for n, _ in MULTIQ_FACTS if n in e.question) for e in g}) == n_facts   # different kinds of fact
    again = multiquestion_examples(lengths=[length], n=2, filler=filler, n_facts=n_facts, seed=5, count_tokens=len)
    assert [e.to_dict() for e in again] == [e.to_dict() for e in exs]
    other = multiquestion_examples(lengths=[length], n=2, filler=filler, n_facts=n_facts, seed=6, count_tokens=len)
    assert [e.answer for e in other] != [e.answer for e in exs]


@pytest.mark.parametrize("make", [passkey_examples, multikey_examples, multiquestion_examples], ids=lambda f: f.__name__)
@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
def test_an_empty_filler_list_is_refused(make, empty):
    "No filler means no examples: an error naming the argument, never a silent empty grid."
    with pytest.raises(ValueError, match="filler must name at least one text"): make(lengths=[512], filler=empty)


# --- the RULER-style tasks: a fact inside a paragraph, several values, variable chains, common words ------------------

NEW_TASKS = ["qa", "multivalue", "vartrack", "commonwords"]


@pytest.mark.parametrize("name", NEW_TASKS)
def test_new_tasks_are_seeded_answerable_and_prefix_optional(name):
    t = get_task(name)
    a = t.make(lengths=[400], n=5, filler="pydoc", seed=3)
    assert [e.context for e in a] == [e.context for e in t.make(lengths=[400], n=5, filler="pydoc", seed=3)]
    assert [e.context for e in a] != [e.context for e in t.make(lengths=[400], n=5, filler="pydoc", seed=4)]
    for e in a:
        assert e.answer_prefix == "" and e.task == name
        assert all(x in e.context for x in e.answer.split(", "))          # every part of the answer is in the context
        assert t.score(" and ".join(e.answer.split(", ")), e.answer)      # a reply naming them all is right ...
        assert not t.score(e.answer.split(", ")[0][:-1] + "#", e.answer)  # ... a reply missing one is not
    b = t.make(lengths=[400], n=5, filler="pydoc", seed=3, answer_prefix=True)
    assert [e.context for e in b] == [e.context for e in a] and all(e.answer_prefix.endswith(" ") for e in b)


def test_bench_cli_passes_the_prefix_both_ways():
    from jacap_nb.bench import bench_args
    base = ["multikey", "--methods", "full", "--out", "x"]
    assert bench_args(base + ["--no-answer-prefix"])["answer_prefix"] is False
    assert bench_args(base + ["--answer-prefix"])["answer_prefix"] is True
    assert "answer_prefix" not in bench_args(base)
    assert bench_args(["vartrack", "--methods", "full", "--out", "x", "--n-hops", "2"])["n_hops"] == 2


# --- the code task: a def line far above (10c_code_tasks) -----------------------------------------------------------


@pytest.mark.parametrize("length,count", [(512, approx_tokens), (1500, char_count)])
def test_code_examples_ask_for_one_def_at_its_depth(length, count):
    ex = code_examples(lengths=[length], depths=[0.1, 0.5, 0.9], n=3, seed=5, count_tokens=count)
    assert len({e.uid for e in ex}) == len(ex) == 9
    assert [e.to_dict() for e in ex] == [e.to_dict() for e in code_examples(lengths=[length], depths=[0.1, 0.5, 0.9], n=3,
                                                                             seed=5, count_tokens=count)]
    for e in ex:
        m = e.meta
        src = source_lines(m["source"])[m["line"] - 1]                 # the asked line, in the module on disk
        assert DEF_LINE.match(src).group(2) == m["name"] and DEF_LINE.match(src).group(3).strip() == e.answer
        defs = [l for l in e.context.splitlines() if DEF_LINE.match(l) and DEF_LINE.match(l).group(2) == m["name"]]
        assert defs == [src]                                           # defined once in the window: one right answer
        assert f"`{m['name']}`" in e.question
        assert abs(m["measured_depth"] - m["depth"]) <= 0.1 and 0.9 * length <= count(e.context) <= 1.3 * length
        assert code_correct("```python\n" + src.strip() + "\n```", e.answer)            # copying the line is right
        assert code_similarity(src.strip(), e.answer) == 1.0
    held = code_examples(lengths=[length], depths=[0.1, 0.5, 0.9], n=3, seed=6, count_tokens=count)
    assert [e.context for e in held] != [e.context for e in ex]


def test_code_answer_prefix_and_early_stop_keep_the_score():
    plain = code_examples(lengths=[512], depths=[0.3, 0.7], n=2)
    for e, p in zip(plain, code_examples(lengths=[512], depths=[0.3, 0.7], n=2, answer_prefix=True)):
        assert p.answer_prefix == "```python\n" and (p.context, p.question, p.answer) == (e.context, e.question, e.answer)
        src = source_lines(e.meta["source"])[e.meta["line"] - 1]
        reply = src + "\n        return None\n```"                       # what follows the fence
        assert code_correct(reply, e.answer) and not code_correct(reply.replace(e.meta["name"] + "(", e.meta["name"] + "(x, "), e.answer)
        cut = next(i for i in range(1, len(reply) + 1) if first_line_done(reply[:i]))
        assert cut == len(src) + 1 and code_correct(reply[:cut], e.answer)  # stopping there changes nothing
    t = get_task("code")
    assert (t.score, t.similarity, t.done) == (code_correct, code_similarity, first_line_done)
