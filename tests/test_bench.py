"Fast tests of jacap_nb.bench on a tiny random-weight Llama with a character tokenizer."
import json
import pytest, torch
from transformers import DynamicCache
from jacap_nb.models import tiny_model, cache_kwarg
from jacap_nb.bench import (parse_method, bench_args, run_bench, ResultStore, row_key, capture_prefill, jacap_compress,
                            compress_prefill, prompt_ids, summarize, load_rows, MethodSpec)

class CharTokenizer:
    "Characters -> ids 3..122 (invertible for ASCII below 120); no chat template; eos = 2."
    chat_template, bos_token, eos_token_id, name_or_path = None, None, 2, "char-tokenizer"
    def __call__(self, text, add_special_tokens=False): return {"input_ids": [3 + ord(c) % 120 for c in text]}
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i - 3) for i in (ids.tolist() if hasattr(ids, "tolist") else ids) if 3 <= i < 123)

@pytest.fixture(scope="module")
def tiny(): return tiny_model("llama", seed=0), CharTokenizer()

OPTS = dict(lengths=[160], depths=[0.0, 1.0], n=1, filler="repetitive")

def test_parse_method_and_cli():
    m = parse_method("jacap:tau=5,noise_var=auto")
    assert (m.backend, m.name, m.options) == ("jacap_nb", "jacap", {"tau": 5, "noise_var": "auto"})
    assert parse_method("kvpress:SnapKV").name == "SnapKVPress" and parse_method("full").backend == "full"
    with pytest.raises(ValueError, match="unknown method"): parse_method("h2o")
    kw = bench_args(["passkey", "--methods", "full", "capkv:tau=2", "--ratios", "0.5", "0.9", "--out", "x",
                     "--lengths", "512", "--depths", "0", "1", "--n", "3", "--seed", "7", "--save-kept"])
    assert kw["methods"] == ["full", "capkv:tau=2"] and kw["ratios"] == [0.5, 0.9] and kw["lengths"] == [512]
    assert kw["depths"] == [0.0, 1.0] and kw["n"] == 3 and kw["seed"] == 7 and kw["save_kept"]
    with pytest.raises(SystemExit): bench_args(["passkey", "--out", "x"])            # --methods is required

def test_run_writes_rows_config_and_resumes(tiny, tmp_path):
    model, tok = tiny
    methods = ["full", "knorm", "jacap:tau=5"]
    summ = run_bench("passkey", methods, [0.5], tmp_path, model, tok, max_new_tokens=3, progress=False, **OPTS)
    rows = load_rows(tmp_path)
    assert len(rows) == 2 * 3                                   # 2 examples x (full + 2 methods at one ratio)
    assert {(r["method"], r["ratio"]) for r in rows} == {("full", 0.0), ("knorm", 0.5), ("jacap:tau=5", 0.5)}
    for r in rows:
        assert r["kept_tokens"] <= r["context_tokens"] and isinstance(r["correct"], bool)
        if r["method"] != "full": assert r["kept_tokens"] == int(r["context_tokens"] * 0.5)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for k in ("protocol", "decoding", "model", "versions", "prompt_template", "methods", "runs"):
        assert k in cfg, k
    assert cfg["decoding"]["greedy"] and cfg["decoding"]["max_new_tokens"] == 3
    assert cfg["model"]["n_layers"] == 2 and cfg["methods"]["jacap:tau=5"]["options"] == {"tau": 5}
    assert cfg["methods"]["jacap:tau=5"]["press"]["scorer_kwargs"] == {"noise_var": "auto", "tau": 5}  # resolved defaults recorded
    assert "torch" in cfg["versions"] and "transformers" in cfg["versions"]
    assert {(s["method"], s["n"]) for s in summ} == {("full", 2), ("knorm", 2), ("jacap:tau=5", 2)}
    assert (tmp_path / "summary.csv").exists() and (tmp_path / "summary.json").exists()
    # a rerun does nothing new; a lost (cut) last line is redone, and only that one
    run_bench("passkey", methods, [0.5], tmp_path, model, tok, max_new_tokens=3, progress=False, **OPTS)
    assert len(load_rows(tmp_path)) == 6
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    (tmp_path / "rows.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:10])
    run_bench("passkey", methods, [0.5], tmp_path, model, tok, max_new_tokens=3, progress=False, **OPTS)
    rows2 = load_rows(tmp_path)
    assert len(rows2) == 6 and len({row_key(r["uid"], r["method"], r["ratio"]) for r in rows2}) == 6
    assert len(json.loads((tmp_path / "config.json").read_text())["runs"]) == 3

def test_bad_ratio_and_task(tiny, tmp_path):
    model, tok = tiny
    with pytest.raises(ValueError, match="compression_ratio must be in"): run_bench("passkey", ["knorm"], [1.0], tmp_path, model, tok, **OPTS)
    with pytest.raises(ValueError, match="unknown task"): run_bench("longbench", ["knorm"], [0.5], tmp_path, model, tok)

@pytest.mark.parametrize("name", ["jacap", "capkv", "snapkv", "expected_attention", "keydiff"])
def test_replay_matches_hooked_prefill(tiny, name):
    "The shared-prefill replay gives the same compressed cache and kept positions as a prefill with the press hooked in."
    model, tok = tiny
    ids = torch.randint(3, 120, (1, 90), generator=torch.Generator().manual_seed(1))
    pre = capture_prefill(model, ids)
    cache, kept, press = jacap_compress(parse_method(name), 0.6, model, pre)
    from jacap_nb.cache import make_press
    ref, hooked = make_press(name, compression_ratio=0.6), DynamicCache()
    with ref(model): model.model(input_ids=ids, **{cache_kwarg(model): hooked})
    for a, b in zip(cache.layers, hooked.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert all(torch.equal(kept[l], ref.kept_indices[l]) for l in ref.kept_indices)

def test_fidelity_rows(tiny, tmp_path):
    model, tok = tiny
    run_bench("fidelity", ["full", "streaming"], [0.5], tmp_path, model, tok, progress=False,
              n=2, prefix_tokens=120, continuation_tokens=20)
    rows = load_rows(tmp_path)
    full = [r for r in rows if r["method"] == "full"]
    assert len(rows) == 4 and all(abs(r["kl"]) < 1e-6 and r["top1"] == 1.0 for r in full)
    assert all(r["kl"] >= -1e-6 and r["n_positions"] == 19 for r in rows)

def test_save_kept(tiny, tmp_path):
    model, tok = tiny
    run_bench("passkey", ["capkv"], [0.5], tmp_path, model, tok, max_new_tokens=2, progress=False, save_kept=True, **OPTS)
    files = sorted((tmp_path / "kept").glob("*.pt"))
    assert len(files) == 2
    kept = torch.load(files[0])
    assert set(kept) == {0, 1} and kept[0].shape[:2] == (1, 2)

def test_streaming_rows(tiny, tmp_path):
    "Decoding-time eviction under a fixed budget: full rows match the reference exactly; evictions happen."
    model, tok = tiny
    run_bench("streaming", ["full", "knorm", "jacap"], [0.5], tmp_path, model, tok, progress=False, interval=8,
              n=1, prefix_tokens=40, continuation_tokens=80)
    rows = {r["method"]: r for r in load_rows(tmp_path)}
    assert abs(rows["full"]["kl"]) < 1e-6 and rows["full"]["top1"] == 1.0
    n = rows["full"]["context_tokens"]
    assert rows["knorm"]["max_cache_tokens"] == int(n * 0.5) and rows["knorm"]["eviction_events"] > 0
    assert rows["jacap"]["kl"] > 0 and rows["jacap"]["n_positions"] == rows["full"]["n_positions"]
    # cache size is measured on the final cache: within the budget, and smaller than the full cache's
    assert rows["knorm"]["kept_tokens"] <= rows["knorm"]["max_cache_tokens"]
    assert rows["knorm"]["cache_bytes"] < rows["full"]["cache_bytes"]

def test_stream_chunks_equal_token_by_token(tiny):
    "Feeding high-water-aligned chunks gives the logits of feeding one token at a time."
    from jacap_nb.bench import _stream_logits, make_jacap_press
    model, _ = tiny
    ids = torch.randint(3, 120, (1, 70), generator=torch.Generator().manual_seed(2))
    press = make_jacap_press(parse_method("jacap"), 0.0, max_cache_tokens=40, interval=8)
    chunked, final = _stream_logits(model, press, ids, 20)
    assert final.layers[0].keys.shape[2] <= 40                      # the cache never outgrows the budget
    kw, cache, out = cache_kwarg(model), DynamicCache(), []
    with make_jacap_press(parse_method("jacap"), 0.0, max_cache_tokens=40, interval=8)(model):
        model(input_ids=ids[:, :20], **{kw: cache})
        for p in range(20, 70):
            out.append(model(input_ids=ids[:, p:p + 1], position_ids=torch.tensor([[p]]), **{kw: cache}).logits[0].float())
    torch.testing.assert_close(chunked, torch.cat(out), atol=1e-4, rtol=1e-4)

def test_head_shared_option(tiny):
    "The head_shared option (= head_reduce=\"layer\") keeps the same positions in every KV head of a layer; the default does not."
    model, _ = tiny
    ids = torch.randint(3, 120, (1, 80), generator=torch.Generator().manual_seed(3))
    pre = capture_prefill(model, ids)
    _, shared, _ = jacap_compress(parse_method("jacap:head_shared=true"), 0.5, model, pre)
    _, per_head, _ = jacap_compress(parse_method("jacap"), 0.5, model, pre)
    assert all(torch.equal(k[0, 0], k[0, 1]) for k in shared.values())
    assert not all(torch.equal(k[0, 0], k[0, 1]) for k in per_head.values())
    from jacap_nb.cache import make_press, compress_layers
    _, layer = compress_layers(make_press("jacap", 0.5, head_reduce="layer"), model, pre.layers)
    assert all(torch.equal(shared[l], layer[l]) for l in layer)        # head_shared=true is head_reduce="layer"
    with pytest.raises(ValueError, match="head_shared=true means"):
        jacap_compress(parse_method("jacap:head_shared=true,head_reduce=group"), 0.5, model, pre)
