"Tests of jacap_nb.cache: physical eviction with logical positions, prefill compression, decoding eviction, batches."
import copy, random, warnings
import pytest, torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel
import jacap_nb.cache as jc
from jacap_nb.cache import (CompressedLayer, EvictionPress, make_press, generate, compress_context, answer, cache_bytes,
                            _forward)
from jacap_nb.models import tiny_model, cache_kwarg, load_smollm2
from jacap_nb.demo import passkey_prompt, QUESTION

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]


@pytest.fixture(scope="session")
def smollm2():
    return load_smollm2()


def _prefill(model, ids, am=None):
    cache = DynamicCache()
    am = torch.ones_like(ids) if am is None else am
    with torch.no_grad(): _forward(model, ids, am, cache)
    return cache


def _physical_lengths(cache):
    return [l.keys.shape[-2] for l in cache.layers]


# --- equivalences -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_ratio_zero_matches_plain_generate(arch):
    m = tiny_model(arch)
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(0))
    plain = m.generate(ids, max_new_tokens=12, do_sample=False)
    press = make_press("jacap", 0.0)
    with press(m): pressed = m.generate(ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(plain, pressed)
    assert press.records == []


@pytest.mark.parametrize("arch", ARCHS)
def test_eviction_equals_masking(arch):
    "Logits after physically evicting a fixed per-head kept set == full cache with the evicted tokens masked out."
    m = tiny_model(arch)
    g = torch.Generator().manual_seed(1)
    n, q = 30, 5
    ids, nxt = torch.randint(3, 128, (1, n), generator=g), torch.randint(3, 128, (1, q), generator=g)
    full = _prefill(m, ids)
    ev = copy.deepcopy(full)
    kept = torch.stack([torch.randperm(n, generator=g)[:12].sort().values for _ in range(2)])[None]  # (1, Hkv=2, 12)
    for i, layer in enumerate(ev.layers):
        ev.layers[i] = CompressedLayer.from_layer(layer); ev.layers[i].evict(kept)
    assert ev.get_seq_length() == n and _physical_lengths(ev) == [12, 12]
    assert cache_bytes(ev) * 30 == cache_bytes(full) * 12
    # all q new tokens at once (checks causality among them), then one more token
    mask = torch.zeros(1, 4, q, n + q, dtype=torch.bool)
    for h in range(4): mask[0, h, :, kept[0, h // 2]] = True
    mask[..., n:] = torch.tril(torch.ones(q, q, dtype=torch.bool))
    with torch.no_grad():
        ref = m(input_ids=nxt, attention_mask=mask, position_ids=torch.arange(n, n + q)[None], use_cache=True,
                **{cache_kwarg(m): full}).logits
        out = m(input_ids=nxt, attention_mask=torch.ones(1, n + q, dtype=torch.long),
                position_ids=torch.arange(n, n + q)[None], use_cache=True, **{cache_kwarg(m): ev}).logits
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        one = torch.tensor([[7]])
        mask1 = torch.cat([mask[:, :, -1:], torch.ones(1, 4, 1, 1, dtype=torch.bool)], -1)
        ref1 = m(input_ids=one, attention_mask=mask1, position_ids=torch.tensor([[n + q]]), use_cache=True, **{cache_kwarg(m): full}).logits
        out1 = _forward(m, one, torch.ones(1, n + q + 1, dtype=torch.long), ev)
        torch.testing.assert_close(out1, ref1[:, -1], atol=1e-5, rtol=1e-5)
    # sanity: the test can fail -- the unmasked full cache gives different logits
    assert (out1 - m(input_ids=one, use_cache=False).logits[:, -1]).abs().max() > 1e-3


# --- budgets, high-water mark, memory ----------------------------------------------------------------------------

def test_prefill_budget_and_high_water_mark():
    m = tiny_model("llama")
    ids = torch.randint(3, 128, (1, 60), generator=torch.Generator().manual_seed(2))
    press = make_press("jacap", 0.5, max_cache_tokens=40, interval=8, window=4)
    seen = []
    hd = m.register_forward_hook(lambda mod, a, out: seen.append(_physical_lengths(out.past_key_values if getattr(out, "cache", None) is None else out.cache)))
    try:
        with press(m): out = m.generate(ids, max_new_tokens=40, do_sample=False)
    finally: hd.remove()
    assert seen[0] == [30, 30]                          # exactly int(60 * 0.5) after the prefill
    assert max(max(s) for s in seen) <= 40              # never above the high-water mark
    dec = [r for r in press.records if r["phase"] == "decode"]
    assert dec and all(r["before"] == 40 and r["after"] == 32 for r in dec)
    steps = sorted({r["step"] for r in dec})
    assert all(b - a == 8 for a, b in zip(steps, steps[1:]))   # every `interval` steps, not every token
    assert out.shape[1] == 100
    assert all(r["bytes_after"] < r["bytes_before"] for r in press.records)


def test_positions_stay_logical():
    m = tiny_model("llama")
    ids = torch.randint(3, 128, (1, 50), generator=torch.Generator().manual_seed(3))
    press = make_press("knorm", 0.6)
    cache = DynamicCache()
    with press(m), torch.no_grad(): _forward(m, ids, torch.ones_like(ids), cache)
    assert cache.get_seq_length() == 50 and _physical_lengths(cache) == [20, 20]
    kept = press.kept_indices[0]
    assert kept.shape == (1, 2, 20) and kept.max() < 50 and (kept[..., :4] == torch.arange(4)).all()  # sinks kept
    assert torch.equal(cache.layers[0].positions, kept)


def test_records_and_dataframe():
    m = tiny_model("qwen2")
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(4))
    press = make_press("capkv", 0.5)
    with press(m): m.generate(ids, max_new_tokens=2, do_sample=False)
    assert len(press.records) == 2 and {r["layer"] for r in press.records} == {0, 1}
    r = press.records[0]
    assert r["before"] == 40 and r["after"] == 20 and r["seconds"] > 0 and 0 < r["entropy"] <= torch.log(torch.tensor(40.)).item() + 1e-4
    assert r["age_p10"] <= r["age_p50"] <= r["age_p90"]
    pd = pytest.importorskip("pandas")
    assert list(press.records_df()["after"]) == [20, 20]


@pytest.mark.parametrize("name", list(jc.SCORERS))
def test_every_scorer_runs(name):
    m = tiny_model("qwen3")
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(5))
    press = make_press(name, 0.5)
    with press(m): out = m.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape == (1, 43) and [r["after"] for r in press.records] == [20, 20] and press.fallbacks == 0


def _capture(model, ids):
    "A full prefill of ids, captured per layer (hidden_states, keys, values, position_embeddings) as bench does."
    got = {}
    def hook(mod, args, kw, out):
        lay = kw.get("past_key_values", kw.get("cache")).layers[mod.layer_idx]
        got[mod.layer_idx] = dict(hidden_states=kw["hidden_states"], keys=lay.keys, values=lay.values,
                                  position_embeddings=kw["position_embeddings"])
    hs = [a.self_attn.register_forward_hook(hook, with_kwargs=True) for a in model.model.layers]
    try:
        with torch.no_grad(): model.model(input_ids=ids, **{cache_kwarg(model): DynamicCache()})
    finally:
        for h in hs: h.remove()
    return [got[i] for i in sorted(got)]


@pytest.mark.parametrize("name,reduce", [("jacap", "group"), ("jacap", "layer"), ("knorm", "layer"), ("snapkv", "group")])
def test_compress_layers_equals_hooked_prefill(name, reduce):
    "The public replay of a captured prefill keeps exactly what a prefill with the press hooked in keeps."
    m = tiny_model("qwen2")
    ids = torch.randint(3, 128, (1, 64), generator=torch.Generator().manual_seed(11))
    press = make_press(name, 0.6, head_reduce=reduce, window=4)
    cache, kept = jc.compress_layers(press, m, _capture(m, ids))
    hooked = DynamicCache()
    with press(m), torch.no_grad(): m.model(input_ids=ids, **{cache_kwarg(m): hooked})
    assert kept.keys() == press.kept_indices.keys() and len(kept) == 2
    assert all(torch.equal(kept[l], press.kept_indices[l]) for l in kept)
    assert all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values) for a, b in zip(cache.layers, hooked.layers))
    assert cache.get_seq_length() == 64 and _physical_lengths(cache) == [25, 25]
    same = [torch.equal(k[0, 0], k[0, 1]) for k in kept.values()]
    assert all(same) if reduce == "layer" else not all(same)
    with pytest.raises(ValueError, match="one dict per attention layer"): jc.compress_layers(press, m, _capture(m, ids)[:1])


def test_head_reduce_normalises_heads():
    "head_reduce='layer': a head with 100x larger scores does not outvote the other; negative scores go by rank."
    s = torch.tensor([[[1., 2, 7], [300., 200, 100]]])
    shared = jc.share_layer_scores(s)
    assert torch.equal(shared[0, 0], shared[0, 1]) and shared[0, 0].argmax() == 2 and s.mean(1)[0].argmax() == 0
    torch.testing.assert_close(shared[0, 0].sum(), torch.tensor(1.0))
    r = jc.share_layer_scores(torch.tensor([[[-3., -1, -2], [-10., -30, -20]]]))
    torch.testing.assert_close(r[0, 0], torch.tensor([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match="head_reduce must be one of 'group', 'layer'"): make_press("jacap", head_reduce="heads")


def test_jacap_press_defaults_to_auto_noise_var():
    assert make_press("jacap").scorer_kwargs == {"noise_var": "auto"}
    assert make_press("jacap", noise_var=2.0).scorer_kwargs == {"noise_var": 2.0}
    assert EvictionPress("jacap", scorer_kwargs=dict(tau=3.0)).config()["scorer_kwargs"] == {"noise_var": "auto", "tau": 3.0}
    assert make_press("capkv").scorer_kwargs == {}
    import inspect
    from jacap_nb.scoring import jacap_scores
    assert inspect.signature(jacap_scores).parameters["noise_var"].default == 1.0   # the scorer keeps the paper's formula


def test_hooks_removed_after_exception():
    m = tiny_model("llama")
    press = make_press("jacap", 0.5)
    with pytest.raises(RuntimeError):
        with press(m): raise RuntimeError("boom")
    assert all(not a.self_attn._forward_hooks for a in m.model.layers) and not m.model._forward_pre_hooks


# --- fallback ------------------------------------------------------------------------------------------------------

def test_fallback_to_sliding_window(monkeypatch):
    press = EvictionPress("jacap", compression_ratio=0.5, n_sink=4)
    def broken(*a, **k): raise torch.linalg.LinAlgError("not positive definite")
    monkeypatch.setattr(jc, "_scorer_fn", lambda name: broken)
    m = tiny_model("llama")
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(6))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with press(m): m.generate(ids, max_new_tokens=2, do_sample=False)
    assert press.fallbacks == 2 and sum("falling back" in str(x.message) for x in w) == 1
    assert torch.equal(press.kept_indices[0][0, 0], torch.cat([torch.arange(4), torch.arange(24, 40)]))


def test_deadline_fallback():
    m = tiny_model("llama")
    ids = torch.randint(3, 128, (1, 40), generator=torch.Generator().manual_seed(7))
    press = make_press("jacap", 0.5, deadline=1e-9)
    with pytest.warns(UserWarning, match="deadline"):
        with press(m): m.generate(ids, max_new_tokens=1, do_sample=False)
    assert press.fallbacks == 2 and all(r["fallback"] for r in press.records)


# --- batches -------------------------------------------------------------------------------------------------------

def test_batch_with_left_padding_matches_single_rows():
    m = tiny_model("llama")
    g = torch.Generator().manual_seed(8)
    a, b = torch.randint(3, 128, (1, 48), generator=g), torch.randint(3, 128, (1, 30), generator=g)
    ids = torch.cat([a, torch.cat([torch.zeros(1, 18, dtype=torch.long), b], 1)])
    am = torch.cat([torch.ones(1, 48), torch.cat([torch.zeros(1, 18), torch.ones(1, 30)], 1)]).long()
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    def run(x, mask):
        press = make_press("jacap", 0.5, window=2, max_cache_tokens=30, interval=4)
        with press(m): return m.generate(x, attention_mask=mask, **kw), press
    both, pb = run(ids, am)
    alone_a, _ = run(a, torch.ones_like(a))
    alone_b, pa = run(b, torch.ones_like(b))
    assert torch.equal(both[0, 48:], alone_a[0, 48:]) and torch.equal(both[1, 48:], alone_b[0, 30:])
    assert pb.records[0]["after"] == 24   # max(int(48*.5), int(30*.5)): row 1 fills 9 slots with (masked) padding
    # padding never feeds the statistics: row 1's query statistics equal the row's alone (after the same decoding)
    for l in pb.stats:
        torch.testing.assert_close(pb.stats[l].mean[1:], pa.stats[l].mean, rtol=1e-4, atol=1e-5)


def test_window_query_scorers_on_padded_rows_shorter_than_the_window():
    "SnapKV-style scorers score each padded row with the recent queries of its own real tokens only."
    m = tiny_model("llama")
    g = torch.Generator().manual_seed(10)
    a, b = torch.randint(3, 128, (1, 40), generator=g), torch.randint(3, 128, (1, 10), generator=g)
    ids = torch.cat([a, torch.cat([torch.zeros(1, 30, dtype=torch.long), b], 1)])
    am = torch.cat([torch.ones(1, 40), torch.cat([torch.zeros(1, 30), torch.ones(1, 10)], 1)]).long()
    for name in ("snapkv", "jacap_mix"):
        press = make_press(name, 0.5, n_sink=2, snap_window=32)
        with press(m): m.generate(ids, attention_mask=am, max_new_tokens=2, do_sample=False, pad_token_id=0)
        assert press.fallbacks == 0 and press.records[0]["after"] == 20


def test_padding_is_never_kept_before_real_tokens():
    m = tiny_model("llama")
    g = torch.Generator().manual_seed(9)
    ids = torch.randint(3, 128, (2, 40), generator=g)
    am = torch.ones(2, 40, dtype=torch.long); am[1, :10] = 0
    press = make_press("jacap", 0.0, max_cache_tokens=36, target_cache_tokens=20)
    with press(m): m.generate(ids, attention_mask=am, max_new_tokens=1, do_sample=False, pad_token_id=0)
    kept = press.kept_indices[0]
    assert kept.shape == (2, 2, 20) and (kept[1] >= 10).all()   # row 1 has 30 real tokens > 20: no padding slot kept


# --- validation ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio", [1.0, 1.2, -0.1, True, "0.5"])
def test_bad_ratio(ratio):
    with pytest.raises(ValueError, match=r"compression_ratio must be in \[0, 1\)"): make_press("jacap", ratio)


def test_bad_configuration_errors():
    with pytest.raises(ValueError, match="scorer must be one of"): make_press("nope")
    with pytest.raises(ValueError, match="below the 12 protected tokens"): make_press("jacap", 0.5, n_sink=4, window=8, max_cache_tokens=12, target_cache_tokens=10)
    with pytest.raises(ValueError, match="target_cache_tokens must be <"): make_press("jacap", 0.5, max_cache_tokens=10, target_cache_tokens=10)
    with pytest.raises(ValueError, match="tau must be"): make_press("jacap", 0.5, tau=-1.0)
    with pytest.raises(ValueError, match="invalid scorer_kwargs"): make_press("knorm", 0.5, tau=1.0)
    with pytest.raises(ValueError, match="protect must be"): make_press("jacap", 0.5, protect=[(5, 2)])


def _count_attention_calls(model):
    calls = []
    hds = [l.self_attn.register_forward_pre_hook(lambda *a: calls.append(1)) for l in model.model.layers]
    return calls, hds


@pytest.mark.parametrize("kw,match", [(dict(window=64), "window=64 is larger than the prompt"),
                                      (dict(n_sink=20, window=10), "below the 30 protected tokens")])
def test_prompt_dependent_errors_before_any_layer(kw, match):
    m = tiny_model("llama")
    calls, hds = _count_attention_calls(m)
    press = make_press("jacap", 0.5, **kw)
    try:
        with pytest.raises(ValueError, match=match):
            with press(m): m.generate(torch.randint(3, 128, (1, 40)), max_new_tokens=1, do_sample=False)
    finally:
        for h in hds: h.remove()
    assert calls == []


def test_unsupported_models():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    with pytest.raises(ValueError, match="LlamaAttention, MistralAttention, Qwen2Attention, Qwen3Attention"):
        with make_press("jacap")(gpt2): pass
    with pytest.raises(ValueError, match="sliding-window"):
        with make_press("jacap")(tiny_model("mistral", sliding_window=16)): pass


# --- SmolLM2 ----------------------------------------------------------------------------------------------------------

_passkey = passkey_prompt          # the demo's prompt: instruction + pydoc prose + the passkey sentence at `depth`


def test_smollm2_ratio_zero_and_shared_prefill(smollm2):
    m, tok = smollm2
    ctx = _passkey(tok, 200, "48213", 0.5)
    full = generate(m, tok, ctx, QUESTION, max_new_tokens=6)
    assert generate(m, tok, ctx, QUESTION, press=make_press("jacap", 0.0), max_new_tokens=6) == full
    press = make_press("jacap", 0.5)
    c = compress_context(m, tok, ctx, press=press)
    assert set(_physical_lengths(c.cache)) == {c.logical_length // 2} and c.cache.get_seq_length() == c.logical_length
    before = c.nbytes
    a1, a2 = answer(m, tok, c, QUESTION, max_new_tokens=6), answer(m, tok, c, QUESTION, max_new_tokens=6)
    assert a1 == a2 and c.nbytes == before    # the compressed cache is reused, not modified


@pytest.mark.slow
def test_smollm2_batch_matches_single(smollm2):
    m, tok = smollm2
    ctxs = [_passkey(tok, 500, "60494", 0.2, seed=0), _passkey(tok, 300, "27611", 0.6, seed=1)]
    press = make_press("jacap", 0.5)
    both = generate(m, tok, ctxs, [QUESTION] * 2, press=press, max_new_tokens=8)
    alone = [generate(m, tok, c, QUESTION, press=press, max_new_tokens=8) for c in ctxs]
    assert both == alone


@pytest.mark.slow
def test_smollm2_passkey_capkv_half(smollm2):
    "The machinery keeps a passkey under compression: CapKV at 0.5 on five 1K-token prompts (measured 4/5)."
    m, tok = smollm2
    cases = [(str(random.Random(i).randrange(10000, 99999)), d, i) for i, d in enumerate([0.1, 0.3, 0.5, 0.7, 0.9])]
    ok = sum(k in generate(m, tok, _passkey(tok, 1000, k, d, seed=i), QUESTION, press=make_press("capkv", 0.5), max_new_tokens=7)
             for k, d, i in cases)
    assert ok >= 3
