"""Passkey retrieval rates on SmolLM2 under the evaluation protocol (chat prompt split at the question, context
compressed, question not): the acceptance check of the cache hook at compression 0.5, as a rate over fixed prompts
rather than one hand-picked prompt. Measured when written: full 10/10, Jacap 6/10, CapKV 7/10."""
import pytest
from jacap_nb.bench import run_bench, load_rows, summarize

@pytest.mark.slow
def test_jacap_half_compression_1k_passkey(tmp_path):
    run_bench("passkey", ["full", "jacap", "capkv"], [0.5], tmp_path, lengths=[1024], n=2, seed=0, progress=False)
    acc = {s["method"]: (s["correct"], s["n"]) for s in summarize(load_rows(tmp_path))}
    assert acc["full"] == (10, 10)                   # the ceiling: every prompt is answerable uncompressed
    assert acc["jacap"][1] == 10 and acc["jacap"][0] >= 5, acc   # Jacap (press default noise_var="auto") at 0.5
    assert acc["capkv"][0] >= 5, acc
