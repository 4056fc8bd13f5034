"""The cache mechanism (jacap_nb.cache) driven by real presses (jacap_nb.presses) on tiny models: the guarantees that
the notebooks state once and these grids check over architectures, scorers and wrappers.

06_cache / 07_presses already check, cell by cell: CompressedLayer bookkeeping, select_slots / rank_protect on a hand
example, a minimal press hooked on llama, replay == hooked prefill for every scorer on llama, keys_pre, nested presses
refused, share_layer_scores, DecodingEviction targets. Not repeated here."""
import copy, inspect, warnings
import pytest, torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel
from jacap_nb import scoring, scorers, baselines
from jacap_nb.allocation import LayerBudget
from jacap_nb.cache import compress_layers, active_run
from jacap_nb.allocation import layer_counts
from jacap_nb.capture import capture_prefill
from jacap_nb.cache_layer import head_masks
from jacap_nb.cache_layer import CompressedLayer, cache_bytes
from jacap_nb.models import tiny_model, cache_kwarg, model_adapters
from jacap_nb.presses import make_press, EvictionPress
from jacap_nb.scorers import SCORERS, Scorer, KNorm
from tinytools import count_attention_calls, rand_ids, physical, held

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]
NAMES = list(SCORERS)
ONE_PASS = [n for n in NAMES if not SCORERS[n].replay]   # a replay scorer compresses one prompt, once: its own tests below


@pytest.fixture(scope="module")
def models():
    "One tiny model per architecture (built once: each test leaves no hook behind, which the tests check)."
    return {a: tiny_model(a) for a in ARCHS}


def _no_hooks(m):
    return all(not l.self_attn._forward_hooks and not l.self_attn._forward_pre_hooks for l in m.model.layers) \
        and not m.model._forward_pre_hooks and active_run(m) is None


# --- eviction == masking ----------------------------------------------------------------------------------------------

def _prefilled(m, seed:int, n:int=30, q:int=5) -> tuple:
    "(generator, n, q, q next ids, cache kwarg, full cache of n random tokens) for the eviction == masking tests."
    g = torch.Generator().manual_seed(seed)
    ids, nxt = torch.randint(3, 128, (1, n), generator=g), torch.randint(3, 128, (1, q), generator=g)
    kw, full = cache_kwarg(m), DynamicCache()
    with torch.no_grad(): m(input_ids=ids, **{kw: full})
    return g, n, q, nxt, kw, full


@pytest.mark.parametrize("arch", ARCHS)
def test_eviction_equals_masking(arch, models):
    "Logits after physically evicting a per-head kept set == the full cache with the evicted positions masked out."
    m = models[arch]
    g, n, q, nxt, kw, full = _prefilled(m, seed=1)
    ev = copy.deepcopy(full)
    kept = torch.stack([torch.randperm(n, generator=g)[:12].sort().values for _ in range(2)])[None]   # (1, Hkv=2, 12)
    assert not torch.equal(kept[0, 0], kept[0, 1])                  # the two KV heads keep different positions
    for i, layer in enumerate(ev.layers):
        ev.layers[i] = CompressedLayer.from_layer(layer); ev.layers[i].evict(kept)
    assert ev.get_seq_length() == n and physical(ev) == [12, 12]
    assert cache_bytes(ev) * n == cache_bytes(full) * 12
    mask = torch.zeros(1, 4, q, n + q, dtype=torch.bool)           # query head h reads KV head h // 2 (GQA group 2)
    for h in range(4): mask[0, h, :, kept[0, h // 2]] = True
    mask[..., n:] = torch.tril(torch.ones(q, q, dtype=torch.bool))
    with torch.no_grad():
        # q new tokens at once (causality among them), then one more token
        ref = m(input_ids=nxt, attention_mask=mask, position_ids=torch.arange(n, n + q)[None], **{kw: full}).logits
        out = m(input_ids=nxt, attention_mask=torch.ones(1, n + q, dtype=torch.long),
                position_ids=torch.arange(n, n + q)[None], **{kw: ev}).logits
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        one = torch.tensor([[7]])
        mask1 = torch.cat([mask[:, :, -1:], torch.ones(1, 4, 1, 1, dtype=torch.bool)], -1)
        ref1 = m(input_ids=one, attention_mask=mask1, position_ids=torch.tensor([[n + q]]), **{kw: full}).logits
        out1 = m(input_ids=one, attention_mask=torch.ones(1, n + q + 1, dtype=torch.long),
                 position_ids=torch.tensor([[n + q]]), **{kw: ev}).logits
        torch.testing.assert_close(out1, ref1, atol=1e-5, rtol=1e-5)
        # the comparison can fail: without the mask the full cache gives other logits
        unmasked = m(input_ids=one, position_ids=torch.tensor([[n + q]]), **{kw: copy.deepcopy(full)}).logits
    assert (out1 - unmasked).abs().max() > 1e-3


# --- ratio 0 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("padded", [False, True], ids=["one-row", "left-padded-batch"])
def test_ratio_zero_is_token_identical_to_generate(arch, padded, models):
    m = models[arch]
    ids = rand_ids(40, seed=0, b=2 if padded else 1)
    am = torch.ones_like(ids)
    if padded: ids[1, :13], am[1, :13] = 0, 0
    kw = dict(attention_mask=am, max_new_tokens=12, do_sample=False, pad_token_id=0)
    plain = m.generate(ids, **kw)
    press = make_press("jacap", 0.0)
    with press(m) as run: pressed = m.generate(ids, **kw)
    assert torch.equal(plain, pressed)
    assert run.records == [] and run.fallbacks == 0
    assert _no_hooks(m)


# --- replay == hooked prefill -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])        # llama: 07_presses (every scorer, both variants)
@pytest.mark.parametrize("shared", [False, True], ids=["EvictionPress", "SharedKeep"])
@pytest.mark.parametrize("name", NAMES)
def test_replay_equals_hooked_prefill(name, shared, arch, models):
    "compress_layers on a captured prefill keeps exactly the tokens (and the same key/value tensors) of a hooked prefill."
    m = models[arch]
    ids = rand_ids(67, seed=11)
    press = make_press(name, 0.6, window=3, head_reduce="layer" if shared else "group")
    assert type(press).__name__ == ("SharedKeep" if shared else "EvictionPress")
    replay, rrun = compress_layers(press, m, capture_prefill(m, ids))
    hooked = DynamicCache()
    with press(m) as run, torch.no_grad(): m.model(input_ids=ids, **{cache_kwarg(m): hooked})
    assert sorted(rrun.kept_indices) == sorted(run.kept_indices) == [0, 1]
    for l in run.kept_indices: assert torch.equal(rrun.kept_indices[l], run.kept_indices[l]), l
    for a, b in zip(replay.layers, hooked.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert replay.get_seq_length() == hooked.get_seq_length() == 67
    if press.budget == "heads": assert held(replay) == 26 * 2 * m.config.num_key_value_heads   # the replay default: one
    elif press.budget == "layers": assert sum(physical(replay)) <= 2 * 26   # ranking over heads; per layer: the uniform memory
    else: assert physical(replay) == [26, 26]                                # int(67 * 0.4)
    if shared: assert all(torch.equal(k[0, 0], k[0, 1]) for k in run.kept_indices.values())
    assert rrun.fallbacks == run.fallbacks == 0


def test_replay_refuses_a_prefill_of_another_model(models):
    pre = capture_prefill(models["llama"], rand_ids(20))
    pre.layers = pre.layers[:1]
    with pytest.raises(ValueError, match="the prefill holds 1 layers; the model has 2"):
        compress_layers(make_press("knorm", 0.5), models["llama"], pre)


@pytest.mark.parametrize("name", ONE_PASS)
def test_one_press_serves_two_runs(name, models):
    "A press is configuration only: applying it twice gives the same kept sets, and the press object is unchanged."
    m = models["llama"]
    press = make_press(name, 0.5, max_cache_tokens=34, interval=4)
    before = copy.deepcopy(press)
    runs = []
    for _ in range(2):
        with press(m) as run: m.generate(rand_ids(50, seed=3), max_new_tokens=14, do_sample=False)
        runs.append(run)
    a, b = runs
    assert a is not b and len(a.records) == len(b.records) > 2
    assert all(torch.equal(a.kept_indices[l], b.kept_indices[l]) for l in a.kept_indices)
    assert press == before


# --- budgets, high-water mark, records --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ONE_PASS)
def test_prefill_budget_and_high_water_mark(name, models):
    """Prefill keeps exactly int(n (1 - c)); while decoding no layer ever holds more than max_cache_tokens, and evictions
    come every `interval` tokens (Algorithm 2), not at every token."""
    m = models["llama"]
    ids = rand_ids(60, seed=2)
    press = make_press(name, 0.5, max_cache_tokens=40, interval=8, window=4)
    assert press.decoding == (40, 32)
    seen, kw = [], cache_kwarg(m)
    def after(mod, args, kwargs, out): seen.append(physical(kwargs[kw]))
    hd = m.model.register_forward_hook(after, with_kwargs=True)
    try:
        with press(m) as run: out = m.generate(ids, max_new_tokens=40, do_sample=False)
    finally: hd.remove()
    assert seen[0] == [30, 30]                                      # exactly int(60 * 0.5) after the prefill
    assert max(max(s) for s in seen) <= 40                          # never above the high-water mark
    dec = [r for r in run.records if r["phase"] == "decode"]
    assert dec and all(r["before"] == 40 and r["after"] == 32 for r in dec)
    steps = sorted({r["step"] for r in dec})
    assert len(steps) >= 3 and all(b - a == 8 for a, b in zip(steps, steps[1:]))
    assert out.shape[1] == 100 and run.fallbacks == 0
    assert all(r["bytes_after"] < r["bytes_before"] for r in run.records)


@pytest.mark.parametrize("name,stats", [("capkv", True), ("knorm", False)])
def test_eviction_records(name, stats, models):
    m = models["qwen2"]
    with make_press(name, 0.5)(m) as run: m.generate(rand_ids(40, seed=4), max_new_tokens=2, do_sample=False)
    assert [(r["layer"], r["phase"], r["before"], r["after"]) for r in run.records] == [(0, "prefill", 40, 20), (1, "prefill", 40, 20)]
    for r in run.records:
        assert r["seconds"] > 0 and r["logical"] == 40 and not r["fallback"]
        assert 0 <= r["age_p10"] <= r["age_p50"] <= r["age_p90"] <= 39
        if stats: assert 0 < r["entropy"] <= torch.log(torch.tensor(40.)).item() + 1e-4
        else: assert r["entropy"] is None                          # no query statistics, no attention entropy
    assert run.eviction_seconds == pytest.approx(sum(r["seconds"] for r in run.records))
    pytest.importorskip("pandas")
    assert list(run.records_df()["after"]) == [20, 20]


# --- batches ---------------------------------------------------------------------------------------------------------

def _until_eos(row, eos=2) -> list:
    "Generated ids up to and including the first eos (a finished row of a batch is then padded)."
    out = row.tolist()
    return out[:out.index(eos) + 1] if eos in out else out


@pytest.mark.parametrize("name", ONE_PASS)
def test_left_padded_batch_equals_each_row_alone(name, models):
    "Prefill and decoding-time eviction on a left-padded batch: each row generates what it generates alone."
    m = models["llama"]
    a, b, ids, am = _padded_pair()
    def go(x, mask):
        press = make_press(name, 0.5, window=2, max_cache_tokens=36, interval=4)
        with press(m) as run: return m.generate(x, attention_mask=mask, max_new_tokens=20, do_sample=False, pad_token_id=0), run
    both, rb = go(ids, am)
    alone_a, _ = go(a, torch.ones_like(a))
    alone_b, ra = go(b, torch.ones_like(b))
    assert _until_eos(both[0, 48:]) == _until_eos(alone_a[0, 48:]) and _until_eos(both[1, 48:]) == _until_eos(alone_b[0, 30:])
    assert rb.records[0]["after"] == 24        # max(int(48 * .5), int(30 * .5)): row 1 fills 9 slots with masked padding
    assert any(r["phase"] == "decode" for r in rb.records) and rb.fallbacks == 0
    moments = [l for l in rb.stats if rb.stats[l].mean is not None]   # Jacap's context mode keeps only recent queries
    if name == "jacap": assert len(rb.stats) == 2 and not moments   # two layers' recent queries, no moments
    else: assert len(moments) == len(rb.stats)
    for l in moments:                           # padding never feeds the statistics: row 1's equal the row's alone
        torch.testing.assert_close(rb.stats[l].mean[1:], ra.stats[l].mean, rtol=1e-4, atol=1e-5)


def _padded_pair(n_a=48, n_b=30, seed=8):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randint(3, 120, (1, n_a), generator=g), torch.randint(3, 120, (1, n_b), generator=g)
    ids = torch.cat([a, torch.cat([torch.zeros(1, n_a - n_b, dtype=torch.long), b], 1)])
    am = torch.cat([torch.ones(1, n_a), torch.cat([torch.zeros(1, n_a - n_b), torch.ones(1, n_b)], 1)]).long()
    return a, b, ids, am


def test_padded_batch_decoding_eviction_jacap_tight_budget(models):
    m = models["llama"]
    a, b, ids, am = _padded_pair()
    def go(x, mask):
        with make_press("jacap", 0.5, window=2, max_cache_tokens=30, interval=4)(m):
            return m.generate(x, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0)
    both, alone_a, alone_b = go(ids, am), go(a, torch.ones_like(a)), go(b, torch.ones_like(b))
    assert _until_eos(both[0, 48:]) == _until_eos(alone_a[0, 48:])
    assert _until_eos(both[1, 48:]) == _until_eos(alone_b[0, 30:])


def _spy_context_attention(monkeypatch, record):
    "Call record(arguments) on every context-attention call (both Jacap scores read the band through it)."
    real = scoring._context_attention
    sig = inspect.signature(real)
    def spy(*a, **kw):
        b = sig.bind(*a, **kw); b.apply_defaults(); record(b.arguments)
        return real(*a, **kw)
    monkeypatch.setattr(scoring, "_context_attention", spy)


@pytest.mark.parametrize("score", ["cooccurrence", "capacity"])
def test_jacap_decoding_queries_and_keys_share_a_frame(score, monkeypatch, models):
    m = models["llama"]
    _, _, ids, am = _padded_pair()
    seen = []
    def record(a):
        if a["queries"].shape[-2] < 40: seen.append((int(a["key_positions"].max()), int(a["query_positions"].max())))
    _spy_context_attention(monkeypatch, record)
    with make_press("jacap", 0.5, score=score, window=2, max_cache_tokens=30, interval=4)(m):
        m.generate(ids, attention_mask=am, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert seen
    for kmax, qmax in seen: assert qmax == kmax         # the newest query is the newest token, which is also the newest key


def test_snapkv_decoding_budget_below_its_window(models, monkeypatch):
    "SnapKV with a high-water mark below its query window (32) runs: it scores with at most one recent query per cached slot."
    m = models["llama"]
    shapes, real = [], baselines.snapkv_scores
    def spy(keys, values, queries, *a, **kw):
        shapes.append((queries.shape[-2], keys.shape[-2])); return real(keys, values, queries, *a, **kw)
    monkeypatch.setattr(baselines, "snapkv_scores", spy)
    press = make_press("snapkv", 0.5, max_cache_tokens=30)
    with press(m) as run: m.generate(rand_ids(48), max_new_tokens=12, do_sample=False)
    decode = [r for r in run.records if r["phase"] == "decode"]
    assert decode and all(r["after"] < r["before"] <= 30 for r in decode) and not run.fallbacks
    assert len(shapes) > len(m.model.layers) and all(nq <= nk for nq, nk in shapes), shapes   # prefill + decode scorings


@pytest.mark.parametrize("name", ONE_PASS)
def test_padding_is_never_kept_before_real_tokens(name, models):
    m = models["llama"]
    ids = rand_ids(40, seed=9, b=2)
    am = torch.ones(2, 40, dtype=torch.long); am[1, :10] = 0
    press = make_press(name, 0.0, max_cache_tokens=36, target_cache_tokens=20)
    with press(m) as run: m.generate(ids, attention_mask=am, max_new_tokens=1, do_sample=False, pad_token_id=0)
    kept = run.kept_indices[0]
    assert kept.shape == (2, 2, 20) and (kept[1] >= 10).all()     # row 1 has 30 real tokens > 20: no padding slot kept
    assert (kept[1, :, :4] == torch.arange(10, 14)).all()          # its sinks are its first real tokens, not the padding


@pytest.mark.parametrize("name", ["jacap", "snapkv"])
def test_rows_shorter_than_the_query_window(name, models):
    """Scorers that read the recent queries score a padded row with its own real tokens only, even when it has fewer of
    them than the window."""
    m = models["llama"]
    g = torch.Generator().manual_seed(10)
    a, b = torch.randint(3, 120, (1, 40), generator=g), torch.randint(3, 120, (1, 10), generator=g)
    ids = torch.cat([a, torch.cat([torch.zeros(1, 30, dtype=torch.long), b], 1)])
    am = torch.cat([torch.ones(1, 40), torch.cat([torch.zeros(1, 30), torch.ones(1, 10)], 1)]).long()
    with make_press(name, 0.5, n_sink=2, window=0)(m) as run:
        m.generate(ids, attention_mask=am, max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert run.fallbacks == 0 and run.records[0]["after"] == 20


# --- fallback ----------------------------------------------------------------------------------------------------------

def _broken_jacap(kind):
    "A stand-in for the default score's factorisation step (`cooccurrence_leverage` of the weights (B, H, N)) that fails."
    def f(*a, **k):
        if kind == "linalg": raise torch.linalg.LinAlgError("linalg.cholesky: The factorization could not be completed")
        return torch.full(a[0].shape, float("nan"))
    return f


@pytest.mark.parametrize("kind", ["linalg", "nonfinite", "deadline"])
def test_fallback_to_sliding_window(kind, monkeypatch, models):
    """A failed scoring (factorisation error, non-finite scores, deadline) keeps sinks + the most recent tokens; the run
    warns once and counts every fallback, at prefill and while decoding."""
    m = models["llama"]
    opts = dict(deadline=1e-12) if kind == "deadline" else {}
    if kind != "deadline": monkeypatch.setattr(scorers, "cooccurrence_leverage", _broken_jacap(kind))
    press = make_press("jacap", 0.5, max_cache_tokens=24, interval=4, **opts)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with press(m) as run: m.generate(rand_ids(40, seed=6), max_new_tokens=8, do_sample=False)
    msgs = [str(x.message) for x in w if "falling back to a sliding window" in str(x.message)]
    assert len(msgs) == 1
    assert {"linalg": "factorisation failed", "nonfinite": "non-finite", "deadline": "deadline"}[kind] in msgs[0]
    assert run.fallbacks == len(run.records) > 2 and all(r["fallback"] for r in run.records)
    assert any(r["phase"] == "decode" for r in run.records)
    assert [r["after"] for r in run.records if r["phase"] == "prefill"] == [20, 20]


def test_fallback_keeps_what_streaming_keeps(monkeypatch, models):
    "The fallback is StreamingLLM's selection: same kept positions as the `streaming` scorer."
    m = models["llama"]
    monkeypatch.setattr(scorers, "cooccurrence_leverage", _broken_jacap("linalg"))
    ids = rand_ids(40, seed=6)
    with pytest.warns(UserWarning, match="falling back"):
        _, broken = compress_layers(make_press("jacap", 0.5), m, capture_prefill(m, ids))
    _, stream = compress_layers(make_press("streaming", 0.5), m, capture_prefill(m, ids))
    assert all(torch.equal(broken.kept_indices[l], stream.kept_indices[l]) for l in stream.kept_indices)
    assert torch.equal(stream.kept_indices[0][0, 0], torch.cat([torch.arange(4), torch.arange(24, 40)]))


# --- hooks, refusals ----------------------------------------------------------------------------------------------------

class _Raises(Scorer):
    "A scorer that fails with an error the hook must not swallow."
    name = "raises"
    def __call__(self, view): raise RuntimeError("scorer exploded")


@pytest.mark.parametrize("where", ["with-body", "prefill-check", "scorer"])
def test_hooks_removed_after_an_exception(where, models):
    m = models["llama"]
    ids = rand_ids(40, seed=12)
    plain = m.generate(ids, max_new_tokens=4, do_sample=False)
    press = {"with-body": make_press("jacap", 0.5), "prefill-check": make_press("jacap", 0.5, window=64),
             "scorer": EvictionPress(_Raises(), 0.5)}[where]
    err = {"with-body": "boom", "prefill-check": "window=64 is larger than the prompt", "scorer": "scorer exploded"}[where]
    with pytest.raises((RuntimeError, ValueError), match=err):
        with press(m):
            if where == "with-body": raise RuntimeError("boom")
            m.generate(ids, max_new_tokens=4, do_sample=False)
    assert _no_hooks(m)
    assert torch.equal(m.generate(ids, max_new_tokens=4, do_sample=False), plain)      # the model is as before
    with make_press("knorm", 0.5)(m) as run: m.generate(ids, max_new_tokens=1, do_sample=False)
    assert len(run.records) == 2                                                      # and takes a press again


@pytest.mark.parametrize("kw,match", [(dict(window=64), "window=64 is larger than the prompt"),
                                      (dict(n_sink=20, window=10), "below the 30 protected tokens"),
                                      (dict(protect=[(0, 25)]), "below the 33 protected tokens")])
def test_prompt_dependent_errors_before_any_layer(kw, match, models):
    m = models["llama"]
    calls, hds = count_attention_calls(m)
    try:
        with pytest.raises(ValueError, match=match):
            with make_press("jacap", 0.5, **kw)(m): m.generate(rand_ids(40), max_new_tokens=1, do_sample=False)
    finally:
        for h in hds: h.remove()
    assert calls == []


@pytest.mark.parametrize("case,match", [
    ("gpt2", "LlamaAttention, MistralAttention, Qwen2Attention, Qwen3Attention"),
    ("mistral-sliding", r"every layer of MistralForCausalLM uses sliding-window attention")])
def test_unsupported_models_are_refused(case, match):
    model = {"gpt2": lambda: GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)),
             "mistral-sliding": lambda: tiny_model("mistral", sliding_window=16)}[case]()
    with pytest.raises(ValueError, match=match):
        with make_press("jacap", 0.5)(model): pass
    assert active_run(model) is None


def test_replay_on_sliding_window_models():
    "All layers windows: nothing to compress (refused); one window layer: a replay press leaves it as the prefill did."
    with pytest.raises(ValueError, match="sliding-window"):
        m = tiny_model("mistral", sliding_window=16)
        compress_layers(make_press("jacap_replay", 0.5), m, capture_prefill(m, rand_ids(40)))
    m = tiny_model("qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1)
    ids, full = rand_ids(40), DynamicCache(config=m.config)
    with torch.no_grad(): m(input_ids=ids, **{cache_kwarg(m): full})
    cache, run = compress_layers(make_press("jacap_replay", 0.5), m, capture_prefill(m, ids))   # one ranking over layer 0's heads
    assert run.window_layers == [1] and int(cache.layers[0].slot_valid.sum()) == 20 * m.config.num_key_value_heads
    assert cache.layers[1].keys.shape[2] == 7
    torch.testing.assert_close(cache.layers[1].keys, full.layers[1].keys)
    assert cache.layers[1].get_seq_length() == full.layers[1].get_seq_length() == 40


def test_press_needs_a_2d_mask(models):
    m = models["llama"]
    ids = rand_ids(10)
    with pytest.raises(ValueError, match="2-D attention_mask"):
        with make_press("knorm", 0.5)(m): m.model(input_ids=ids, attention_mask=torch.ones(1, 1, 10, 10, dtype=torch.bool))
    assert _no_hooks(m)


# --- global budgets: per-head counts, padded slots masked ---------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_head_budget_eviction_equals_masking(arch, attn):
    "Heads keeping different numbers of tokens (padded, masked by the head-mask hook) == the full cache with a per-head mask."
    from jacap_nb.allocation import head_slots
    from jacap_nb.cache_layer import head_masks
    m = tiny_model(arch); m.set_attn_implementation(attn)
    assert m.config._attn_implementation == attn
    g, n, q, nxt, kw, full = _prefilled(m, seed=2)
    ev = copy.deepcopy(full)
    counts = [torch.tensor([6, 17]), torch.tensor([11, 3])]        # per layer, per KV head: different everywhere
    kept = []
    for i, layer in enumerate(ev.layers):
        idx, valid = head_slots(torch.rand(1, 2, n, generator=g), counts[i])
        ev.layers[i] = CompressedLayer.from_layer(layer); ev.layers[i].evict(idx, valid)
        kept.append([idx[0, h][valid[0, h]] for h in range(2)])
        assert ev.layers[i].kept_tokens == float(counts[i].float().mean())
    assert physical(ev) == [17, 11]                                 # each layer stores its largest head's count
    masks = []                                                      # the reference: full cache, per-layer per-head masks
    for i in range(2):
        mk = torch.zeros(1, 4, q, n + q, dtype=torch.bool)
        for h in range(4): mk[0, h, :, kept[i][h // 2]] = True
        mk[..., n:] = torch.tril(torch.ones(q, q, dtype=torch.bool))
        masks.append(mk)
    def with_layer_masks(model, ms):                                # the full-cache reference needs one mask per layer too
        hs = [a.module.register_forward_pre_hook(lambda mod, a_, k, mk=mk: (a_, {**k, "attention_mask": mk if attn == "sdpa"
                  else torch.zeros(mk.shape).masked_fill(~mk, torch.finfo(torch.float32).min)}), with_kwargs=True)
              for a, mk in zip(model_adapters(model), ms)]
        return hs
    with pytest.raises(RuntimeError, match="head_masks"):          # outside the masks' block the cache refuses to grow
        with torch.no_grad(): m(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: copy.deepcopy(ev)})
    with torch.no_grad(), head_masks(m):
        ref_model = tiny_model(arch); ref_model.set_attn_implementation(attn)
        hs = with_layer_masks(ref_model, masks)
        ref = ref_model(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: copy.deepcopy(full)}).logits
        for h in hs: h.remove()
        out = m(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: copy.deepcopy(ev)}).logits
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        # one token at a time (the decoding path, q = 1) gives the same logits
        step, one = copy.deepcopy(ev), []
        for j in range(q): one.append(m(input_ids=nxt[:, j:j + 1], position_ids=torch.tensor([[n + j]]), **{kw: step}).logits)
        torch.testing.assert_close(torch.cat(one, 1), ref, atol=1e-5, rtol=1e-5)
        # a left-padded question: the padding stays invisible (the caller's mask of the new tokens is kept)
        pad_ids = torch.cat([torch.zeros(1, 2, dtype=torch.long), nxt], 1)
        am = torch.cat([torch.ones(1, n), torch.zeros(1, 2), torch.ones(1, q)], 1).long()
        padded = m(input_ids=pad_ids, attention_mask=am, position_ids=torch.cat([torch.zeros(1, 2, dtype=torch.long),
                   torch.arange(n, n + q)[None]], 1), **{kw: copy.deepcopy(ev)}).logits[:, 2:]
        torch.testing.assert_close(padded, ref, atol=1e-5, rtol=1e-5)
        # and the comparison can fail: the padding slots, if seen, change the logits
        seen = copy.deepcopy(ev)
        for l in seen.layers: l.slot_valid = torch.ones_like(l.slot_valid)     # per-layer masks, padding visible
        blind = m(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: seen}).logits
    assert (out - blind).abs().max() > 1e-3
    assert _no_hooks(m)                                             # the block took its hooks away


def _heads_compressed() -> tuple:
    "(tiny llama, its cache of 40 random tokens compressed by KNorm at 0.5 under budget='heads': padded heads)."
    m, cache = tiny_model("llama"), DynamicCache()
    with torch.no_grad(), make_press("knorm", 0.5, budget="heads")(m): m(input_ids=rand_ids(40), **{cache_kwarg(m): cache})
    assert any(not l.slot_valid.all() for l in cache.layers)            # some head really pads
    return m, cache


def test_head_budget_cache_refuses_an_unmasked_forward():
    "A cache with padding slots raises in a model without the head-mask hook instead of attending to the padding."
    m, cache = _heads_compressed()
    with pytest.raises(RuntimeError, match="without those masks"):
        with torch.no_grad(): tiny_model("llama")(input_ids=torch.tensor([[5]]), position_ids=torch.tensor([[40]]), **{cache_kwarg(m): cache})


@pytest.mark.parametrize("budget", ["heads", "layers"])
@pytest.mark.parametrize("arch", ARCHS)
def test_global_budget_totals(budget, arch):
    "'heads' keeps exactly the uniform budget's (token, head) pairs; 'layers' stores at most the uniform budget's slots, unpadded."
    m = tiny_model(arch)
    ids = rand_ids(60)
    for name in ("knorm", "jacap"):
        p = make_press(name, 0.75, budget=budget, **({"score": "attention"} if name == "jacap" else {}))
        cache = DynamicCache()
        with torch.no_grad(), p(m) as run: m(input_ids=ids, **{cache_kwarg(m): cache})
        keep = p.prefill_keep(60)
        held = sum(int(l.slot_valid.sum()) for l in cache.layers)
        slots = sum(l.keys.shape[2] for l in cache.layers) * 2
        if budget == "heads": assert held == keep * 2 * 2, (name, held)
        else: assert held == slots <= keep * 2 * 2, (name, held, slots)
        assert cache.get_seq_length() == 60 and len(run.records) == 2


def test_global_budget_cache_refuses_a_second_uniform_eviction():
    "A padded cache is not evicted again by a uniform press (it would keep padding as tokens): a clear error instead."
    m, cache = _heads_compressed()
    with pytest.raises(ValueError, match="budgets that differ between layers or heads"):
        with torch.no_grad(), make_press("knorm", 0.0, max_cache_tokens=8)(m):
            m(input_ids=torch.tensor([[5, 6]]), position_ids=torch.tensor([[40, 41]]), **{cache_kwarg(m): cache})


def _layer_views(n:int=50) -> list:
    "The LayerView of every layer of a tiny Llama's prefill of `n` random tokens, as a scorer sees it."
    views = []
    class Capture(KNorm):
        def __call__(self, view): views.append(view); return super().__call__(view)
    m = tiny_model("llama")
    with torch.no_grad(): compress_layers(EvictionPress(Capture(), 0.5), m, capture_prefill(m, rand_ids(n)))
    return views


def test_jacap_prior_alone_equals_the_mixture_at_weight_one():
    "prior_weight=1 returns before reading any query; its scores are the mixture's at pi = 1 on the same layer."
    from jacap_nb.scorers import Jacap
    with torch.no_grad():
        for v in _layer_views():
            b, hkv, p, d = v.keys.shape
            q = v.queries[:, :, 4:].reshape(b, hkv, v.group, -1, d)
            want = scoring.jacap_context_scores(v.keys, v.values, q, v.keys_pre, 1.0, 1.0, "auto")
            torch.testing.assert_close(Jacap(prior_weight=1, score="capacity")(v), want)
            assert not torch.allclose(Jacap(score="capacity")(v), want)          # pi = 0.5 is another score


def test_jacap_union_keeps_the_top_of_both_rankings():
    "score='union': any k kept tokens hold the top k/2 of the capacity's ranking and of the prior alone's, per head."
    from jacap_nb.scorers import Jacap
    with torch.no_grad():
        for v in _layer_views():
            cap, prior, union = Jacap(score="capacity")(v), Jacap(prior_weight=1, score="attention")(v), Jacap(score="union")(v)
            assert union.shape == cap.shape and ((union >= 0) & (union <= 1)).all()
            for k in (2, 10, 24):
                kept = union.topk(k, -1).indices
                for ranking in (cap, prior):
                    top = ranking.topk(k // 2, -1).indices
                    assert all(set(t.tolist()) <= set(s.tolist()) for t, s in zip(top.flatten(0, 1), kept.flatten(0, 1)))
            assert not torch.equal(union.topk(10, -1).indices.sort(-1).values, cap.topk(10, -1).indices.sort(-1).values)


def test_jacap_replay_union_reads_the_replayed_queries():
    "JacapReplay(score='union') ranks by the replay's capacity and the prior; without a replay, by Jacap's union."
    from jacap_nb.scorers import Jacap, JacapReplay
    with torch.no_grad():
        for v in _layer_views():
            vr = v.with_changes(replay_attention=torch.rand(v.keys.shape[:3], generator=torch.Generator().manual_seed(0)))
            want = scoring.rank_union(JacapReplay(score="capacity", prior_weight=0.5)(vr), Jacap(prior_weight=1, score="attention")(vr))
            torch.testing.assert_close(JacapReplay(score="union", prior_weight=0.5)(vr), want)
            assert not torch.equal(want, Jacap(score="union")(v))                     # the replay changed the ranking
            torch.testing.assert_close(JacapReplay(score="union", prior_weight=0.5)(v), Jacap(score="union")(v))


def test_jacap_cooccurrence_wires_the_weights_of_each_path():
    "score='cooccurrence' (log r) at a vanishing lookup breadth is the capacity's value step, on the band, prior-only and replay paths."
    from jacap_nb.scorers import Jacap, JacapReplay
    tiny, cap = dict(score="cooccurrence", lookup_breadth=1e-9, pivots=None), dict(score="capacity")
    with torch.no_grad():
        for v in _layer_views():
            vr = v.with_changes(replay_attention=torch.rand(v.keys.shape[:3], generator=torch.Generator().manual_seed(0)))
            for a, b in ((Jacap(**tiny)(v), Jacap(**cap)(v)), (Jacap(prior_weight=1, **tiny)(v), Jacap(prior_weight=1, **cap)(v)),
                         (JacapReplay(prior_weight=0.5, **tiny)(vr), JacapReplay(score="capacity", prior_weight=0.5)(vr))):
                torch.testing.assert_close(a.exp(), b, rtol=1e-3, atol=1e-4)
            co = Jacap()(v)                                     # the default: the lookup prior changes the capacity's ranking
            assert co.shape == Jacap(**cap)(v).shape and (co < 0).all() and co.isfinite().all()
            assert not torch.equal(co.topk(10, -1).indices.sort(-1).values, Jacap(**cap)(v).topk(10, -1).indices.sort(-1).values)
    with pytest.raises(ValueError, match="lookup_breadth"): Jacap(score="cooccurrence", lookup_breadth=0)

def test_jacap_cooccurrence_pivots_reach_the_exact_score():
    "pivots=m: as many pivots as tokens give the exact co-occurrence score on each path; a few pivots, another ranking close to it."
    from jacap_nb.scorers import Jacap, JacapReplay
    with torch.no_grad():
        for v in _layer_views():
            n = v.keys.shape[2]
            vr = v.with_changes(replay_attention=torch.rand(v.keys.shape[:3], generator=torch.Generator().manual_seed(0)))
            for cls, view, kw in ((Jacap, v, {}), (Jacap, v, dict(prior_weight=1)), (JacapReplay, vr, dict(prior_weight=0.5))):
                exact = cls(score="cooccurrence", lookup_breadth=4, pivots=None, **kw)(view)
                torch.testing.assert_close(cls(score="cooccurrence", lookup_breadth=4, pivots=n, **kw)(view), exact, rtol=1e-4, atol=1e-4)
                few = cls(score="cooccurrence", lookup_breadth=4, pivots=2, **kw)(view)
                assert few.shape == exact.shape and few.isfinite().all()
                k = n // 4                                                   # two pivots keep the exact top quarter (1.0 here)
                top, top_few = exact.topk(k, -1).indices, few.topk(k, -1).indices
                assert all(torch.isin(a, b).float().mean() >= 0.9 for a, b in zip(top.flatten(0, 1), top_few.flatten(0, 1)))
    with pytest.raises(ValueError, match="pivots"): Jacap(score="cooccurrence", pivots=-1)
    with pytest.raises(TypeError, match="pivots"): Jacap(score="cooccurrence", pivots=2.5)

# --- a LayerBudget: layers of different lengths, each with its own mask ---------------------------------------------------

_LB = LayerBudget((0.01, 0.5), ((0.9, 0.1), (0.5, 0.0)), "test")      # layer 0 keeps about twice layer 1's share


def _per_layer_masks(kept:list, n:int, q:int, group:int) -> list:
    "Per layer (1, H, q, n + q) bool masks: each head sees its KV head's kept positions and the causal new tokens."
    out = []
    for k in kept:
        mk = torch.zeros(1, k.shape[1] * group, q, n + q, dtype=torch.bool)
        for h in range(k.shape[1] * group): mk[0, h, :, k[0, h // group]] = True
        mk[..., n:] = torch.tril(torch.ones(q, q, dtype=torch.bool))
        out.append(mk)
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_layer_budget_eviction_equals_masking(arch, attn):
    "Layers keeping different numbers of tokens (a LayerBudget) == the full cache with each layer's kept positions masked."
    m = tiny_model(arch); m.set_attn_implementation(attn)
    g, n, q, nxt, kw, full = _prefilled(m, seed=3, n=60)
    ids = torch.randint(3, 128, (1, n), generator=torch.Generator().manual_seed(3))
    press = make_press("jacap", 0.5, budget=_LB)
    ev, run = compress_layers(press, m, capture_prefill(m, ids))
    assert physical(ev) == layer_counts(press, n) and physical(ev)[0] > 30 > physical(ev)[1]
    assert sum(physical(ev)) == 2 * press.prefill_keep(n)                      # the uniform budget's memory
    masks = _per_layer_masks([run.kept_indices[i] for i in range(2)], n, q, model_adapters(m)[0].group)
    ref_model = tiny_model(arch); ref_model.set_attn_implementation(attn)
    hs = [a.module.register_forward_pre_hook(lambda mod, a_, k, mk=mk: (a_, {**k, "attention_mask": mk if attn == "sdpa"
              else torch.zeros(mk.shape).masked_fill(~mk, torch.finfo(torch.float32).min)}), with_kwargs=True)
          for a, mk in zip(model_adapters(ref_model), masks)]
    with torch.no_grad(), head_masks(m, ev):                                 # compressed outside a run: decode in the masks' block
        ref = ref_model(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: copy.deepcopy(full)}).logits
        for h in hs: h.remove()
        out = m(input_ids=nxt, position_ids=torch.arange(n, n + q)[None], **{kw: copy.deepcopy(ev)}).logits
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        step, one = copy.deepcopy(ev), []                                    # token by token (decoding) too
        for j in range(q): one.append(m(input_ids=nxt[:, j:j + 1], position_ids=torch.tensor([[n + j]]), **{kw: step}).logits)
        torch.testing.assert_close(torch.cat(one, 1), ref, atol=1e-5, rtol=1e-5)


def test_layer_budget_left_padded_batch_equals_each_row_alone(models):
    "A LayerBudget on a left-padded batch: each row generates what it generates alone (its padding stays masked)."
    m = models["llama"]
    a, b, ids, am = _padded_pair()
    def go(x, mask):
        with make_press("knorm", 0.5, budget=_LB)(m):
            return m.generate(x, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0)
    both, alone_a, alone_b = go(ids, am), go(a, torch.ones_like(a)), go(b, torch.ones_like(b))
    assert _until_eos(both[0, 48:]) == _until_eos(alone_a[0, 48:]) and _until_eos(both[1, 48:]) == _until_eos(alone_b[0, 30:])


def test_layer_budget_refuses_a_model_of_another_depth():
    with pytest.raises(ValueError, match="measured on a model with 3 layers"):
        with make_press("knorm", 0.5, budget=LayerBudget((0.1, 0.2), ((0.5, 0.1),) * 3))(tiny_model("llama")): pass


def test_layer_budget_with_a_layer_that_keeps_everything():
    "A later layer keeping all its tokens while layer 0 is compressed still gets its own mask (and its kept positions)."
    from tinytools import CharTokenizer
    from jacap_nb.pipeline import compress_context, answer
    m, tok = tiny_model("llama"), CharTokenizer()
    press = make_press("knorm", 0.1, budget=LayerBudget((0.01, 0.5), ((0.5, 0.0), (0.9, 0.1))))
    ctx = compress_context(m, tok, "x" * 80, press)
    assert physical(ctx.cache)[1] == ctx.n_tokens > physical(ctx.cache)[0]              # layer 1 keeps every token
    assert sorted(ctx.run.kept_indices) == [0, 1]
    assert isinstance(answer(m, tok, ctx, "what?", 4), str)                               # the question runs


def test_layer_budget_counts_are_what_the_cache_holds():
    "layer_counts(press, n) is what each layer keeps: with protected spans, through a replay press, hooked or replayed."
    m, ids = tiny_model("llama"), rand_ids(60)
    for press in (make_press("jacap", 0.5, budget=_LB, protect=[(10, 30)]),
                  make_press("jacap_replay", 0.5, budget=_LB, score="attention", prior_weight=0),
                  make_press("knorm", 0.75, budget=_LB, head_reduce="layer")):
        replayed = compress_layers(press, m, capture_prefill(m, ids))[0]
        hooked = DynamicCache()
        with torch.no_grad(), press(m): m.model(input_ids=ids, **{cache_kwarg(m): hooked})
        assert physical(replayed) == physical(hooked) == layer_counts(press, 60), press
        assert sum(layer_counts(press, 60)) == 2 * press.prefill_keep(60)


def test_calibrate_layer_budget_on_a_tiny_model():
    "Two texts, a tiny model: one non-increasing row of kept fractions per layer, usable by a press of that model."
    from tinytools import CharTokenizer
    from jacap_nb.pipeline import calibrate_layer_budget, compress_context
    m, tok = tiny_model("llama"), CharTokenizer()
    lb = calibrate_layer_budget(m, tok, ["abcdefgh " * 8, "hello world, " * 6], progress=False)
    k = torch.tensor(lb.kept)
    assert lb.n_layers == 2 and k.shape[1] == len(lb.thresholds) and (k.diff(dim=1) <= 0).all() and k[:, 0].max() > 0
    ctx = compress_context(m, tok, "a quick brown fox " * 4, make_press("knorm", 0.5, budget=lb))
    assert sum(physical(ctx.cache)) == 2 * make_press("knorm", 0.5).prefill_keep(ctx.n_tokens)


# --- the press contract kvpress's tests hold presses to: autograd on, one token, a batch --------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_press_runs_with_autograd_on(name):
    "kvpress's test idiom `with press(model): model(ids)` outside torch.no_grad(), on weights that require grad."
    m = tiny_model("llama", seed=3)
    assert torch.is_grad_enabled() and all(p.requires_grad for p in m.parameters())
    cache = DynamicCache()
    with make_press(name, 0.5)(m): m(input_ids=rand_ids(40), **{cache_kwarg(m): cache})
    assert held(cache) == 20 * 2 * m.config.num_key_value_heads       # 20 per head (on average, under one ranking over heads)
    assert _no_hooks(m)


@pytest.mark.parametrize("name", NAMES)
def test_press_on_a_one_token_prompt(name, models):
    "One token: kept at ratio 0; refused, with what to change, where the budget would evict the sink."
    m, cache = models["llama"], DynamicCache()
    with torch.no_grad(), make_press(name, 0.0)(m): m(input_ids=rand_ids(1), **{cache_kwarg(m): cache})
    assert physical(cache) == [1, 1]
    before = _hook_count(m)
    with pytest.raises(ValueError, match=r"below the 4 protected tokens.*lower compression_ratio, n_sink or window|window=4 is larger than the prompt \(1 tokens\); lower window"):
        with torch.no_grad(), make_press(name, 0.9)(m): m(input_ids=rand_ids(1), **{cache_kwarg(m): DynamicCache()})
    assert _hook_count(m) == before and active_run(m) is None   # the refusal leaves nothing behind


def _hook_count(m) -> int:
    return sum(len(x._forward_hooks) + len(x._forward_pre_hooks) for x in m.modules())


@pytest.mark.parametrize("name", [n for n in ONE_PASS if n != "random"])   # random draws one tensor for the batch
def test_press_on_a_batch_of_three(name, models):
    "Three rows compress like three prompts of their own (same length, no padding)."
    m = models["llama"]
    ids = rand_ids(48, b=3)
    batched = compress_layers(make_press(name, 0.5), m, capture_prefill(m, ids))[1].kept_indices
    for r in range(3):
        alone = compress_layers(make_press(name, 0.5), m, capture_prefill(m, ids[r:r + 1]))[1].kept_indices
        for layer in alone: assert torch.equal(batched[layer][r:r + 1], alone[layer]), (name, r, layer)


# --- a press leaves the model as it found it ---------------------------------------------------------------------------

def _attached(m) -> tuple:
    "Every forward (pre-)hook on the model's modules, transformers' registered attention functions, the model's attributes."
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as reg
    return (sum(len(x._forward_hooks) + len(x._forward_pre_hooks) for x in m.modules()),
            {k: reg[k] for k in reg.keys()}, sorted(vars(m)), active_run(m))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("budget", ["uniform", "layers", "measured"])
def test_press_leaves_the_model_as_it_was(name, budget):
    "Hooks, head masks, the attention-function wrap and the active run: all gone when the block ends, even on an error."
    m = tiny_model("llama", seed=4)
    b = LayerBudget((0.5, 1.0), ((0.9, 0.6), (0.5, 0.1)), "test") if budget == "measured" else budget
    press = make_press(name, 0.5, budget=b)
    before, cache = _attached(m), DynamicCache()
    with press(m):                                                  # autograd on, as kvpress's tests run presses
        m(input_ids=rand_ids(40), **{cache_kwarg(m): cache})
        m(input_ids=rand_ids(1), **{cache_kwarg(m): cache})          # a decoding step inside the block
    assert _attached(m) == before
    with pytest.raises(KeyboardInterrupt):
        with press(m): raise KeyboardInterrupt
    assert _attached(m) == before


# --- hybrid attention: a press compresses the full-attention layers, the sliding windows stay as they are ---------------

@pytest.mark.parametrize("name", ["jacap", "knorm", "snapkv", "jacap_replay"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("budget", ["uniform", "measured"])
def test_hybrid_model_compresses_its_full_layers_only(name, attn, budget):
    """Gemma 3 (layer 0: a window of 8, layer 1: full): the window is untouched, and eviction == masking on the full layer.
    A replay press re-reads the context through the window too; the window it leaves must be the prefill's."""
    m = tiny_model("gemma3", seed=5); m.set_attn_implementation(attn)
    n, q, kw = 40, 3, cache_kwarg(m)
    b = LayerBudget((0.5, 1.0), ((0.9, 0.6),), "one full layer") if budget == "measured" else "uniform"   # row 0 = layer 1
    ids, nxt, pos = rand_ids(n), rand_ids(q), torch.arange(n, n + q)[None]
    full, cache = DynamicCache(config=m.config), DynamicCache(config=m.config)
    with torch.no_grad():
        m(input_ids=ids, **{kw: full})
        with make_press(name, 0.5, budget=b)(m) as run: m(input_ids=ids, **{kw: cache})
    assert type(cache.layers[0]).__name__ == "DynamicSlidingWindowLayer" and physical(cache) == [7, 20]
    torch.testing.assert_close(cache.layers[0].keys, full.layers[0].keys)                   # the window as it was
    assert [r["layer"] for r in run.records] == [1] and run.window_layers == [0] and "[0] kept as they are" in repr(run)
    mk = torch.zeros(1, 4, q, n + q, dtype=torch.bool)                                       # the full layer's kept positions
    for h in range(4): mk[0, h, :, run.kept_indices[1][0, h // 2]] = True
    mk[..., n:] = torch.tril(torch.ones(q, q, dtype=torch.bool))
    add = torch.zeros(mk.shape).masked_fill(~mk, torch.finfo(torch.float32).min)
    ref_model = tiny_model("gemma3", seed=5); ref_model.set_attn_implementation(attn)
    hd = ref_model.model.layers[1].self_attn.register_forward_pre_hook(
        lambda mod, a, k: (a, {**k, "attention_mask": mk if attn == "sdpa" else add}), with_kwargs=True)
    with torch.no_grad():
        ref = ref_model(input_ids=nxt, position_ids=pos, **{kw: copy.deepcopy(full)}).logits
        hd.remove()
        with head_masks(m, cache): out = m(input_ids=nxt, position_ids=pos, **{kw: copy.deepcopy(cache)}).logits
        unmasked = ref_model(input_ids=nxt, position_ids=pos, **{kw: copy.deepcopy(full)}).logits
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert (out - unmasked).abs().max() > 1e-4                                               # the eviction did change something
    pre = capture_prefill(m, ids)                                                            # hooked == replayed
    replayed, run2 = compress_layers(make_press(name, 0.5, budget=b), m, pre)
    assert torch.equal(run2.kept_indices[1], run.kept_indices[1]) and physical(replayed) == [7, 20]
    assert _no_hooks(m)


def test_qwen2_with_one_window_layer_compresses_the_other():
    m = tiny_model("qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1)
    cache = DynamicCache(config=m.config)
    with torch.no_grad(), make_press("knorm", 0.5)(m) as run: m(input_ids=rand_ids(40), **{cache_kwarg(m): cache})
    assert run.window_layers == [1] and [r["layer"] for r in run.records] == [0]
    assert physical(cache) == [20, 7]                                # layer 0 compressed, layer 1 its window of 8 - 1

@pytest.mark.parametrize("score", ["cooccurrence", "capacity"])
def test_jacap_band_takes_the_press_sinks(score, monkeypatch):
    "The band's sinks are the press's n_sink (PressPlan -> LayerView.n_sink), not a hard-coded 4; the default is unchanged."
    seen = []
    _spy_context_attention(monkeypatch, lambda a: seen.append(a["n_sink"]))
    tm, ids = tiny_model("llama"), rand_ids(48)
    for ns in (2, 4, 6):
        seen.clear()
        with torch.no_grad(), make_press("jacap", 0.5, score=score, n_sink=ns, budget="uniform", window=0)(tm): tm(ids)
        assert seen and set(seen) == {ns}, (ns, seen)
