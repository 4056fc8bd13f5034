"""Passkey retrieval rates on SmolLM2 under the evaluation protocol (chat prompt split at the question, context compressed,
question not), through the harness (`run_bench`: one prefill per prompt replayed for every method): the acceptance check
of the presses at compression 0.5, as a rate over fixed prompts rather than one hand-picked prompt."""
import pytest
from jacap_nb.bench import run_bench
from jacap_nb.report import load_rows, summarize


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["blank", "kvpress"])
def test_half_compression_1k_passkey(fmt, tmp_path):
    run_bench("passkey", ["full", "jacap", "capkv"], [0.5], tmp_path, formats=[fmt], lengths=[1024], n=2, seed=0, progress=False)
    acc = {s["method"]: (s["correct"], s["n"]) for s in summarize(load_rows(tmp_path))}
    assert acc["full"] == (10, 10), acc                  # the ceiling: every prompt is answerable uncompressed
    assert acc["jacap"][1] == 10 and acc["jacap"][0] >= 5, acc
    assert acc["capkv"][1] == 10 and acc["capkv"][0] >= 5, acc
