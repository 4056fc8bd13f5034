"""jacap_nb.scoring (and jacap_nb.baselines) against independent float64 implementations (Python loops, explicit inverses), as grids over
shapes, dtypes and arguments. 01_scoring checks the hand examples, the trace identity, the Monte Carlo closed form,
the Jacap/CapKV special case and one shape of each reference; they are not repeated here."""
import math
import pytest
import torch
from jacap_nb import scoring
from jacap_nb.scoring import (jacap_scores, jacap_weights, capkv_scores, capkv_weights, leverage_scores, select_tokens,
                              key_leverage, prior_attention, context_attention, jacap_context_weights, centred_leverage,
                              jacap_context_scores)
from jacap_nb.baselines import knorm_scores, keydiff_scores, snapkv_scores, expected_attention_scores

torch.set_num_threads(1)
f64 = torch.float64


# ---------------------------------------------------------------- independent float64 references (loops, explicit inverse)
def _rows(*xs_and_core_dims):
    "Broadcast the leading dims of several tensors and flatten them; returns (lead shape, per-row tensors)."
    lead = torch.broadcast_shapes(*[x.shape[:x.ndim - c] for x, c in xs_and_core_dims])
    out = [x.expand(*lead, *x.shape[x.ndim - c:]).reshape(-1, *x.shape[x.ndim - c:]) for x, c in xs_and_core_dims]
    return lead, out


def ref_leverage_row(w, v, s2):
    a = torch.eye(v.shape[1], dtype=f64)
    for j in range(v.shape[0]): a = a + w[j] / s2 * torch.outer(v[j], v[j])
    ainv = torch.linalg.inv(a)
    return torch.stack([w[i] / s2 * v[i] @ ainv @ v[i] for i in range(v.shape[0])])


def ref_auto_noise(w, v):
    return max(float(sum(w[i] * (v[i] ** 2).sum() for i in range(v.shape[0]))) / v.shape[1], torch.finfo(f64).tiny)


def ref_jacap(k, v, mu, var, tau, noise_var):
    lead, (k, v, mu, var) = _rows((k.double(), 2), (v.double(), 2), (mu.double(), 1), (var.double(), 1))
    out = []
    for kr, vr, m, s in zip(k, v, mu, var):
        d = kr.shape[1]
        z = torch.tensor([float(kr[i] @ m) / (tau * math.sqrt(d)) for i in range(kr.shape[0])], dtype=f64)
        alpha = torch.exp(z - z.max()) / torch.exp(z - z.max()).sum()
        kappa = torch.stack([(kr[i] ** 2 * s).sum() for i in range(kr.shape[0])])
        w = (alpha * (1 - alpha)) ** 2 * kappa / d
        out.append(ref_leverage_row(w, vr, ref_auto_noise(w, vr) if noise_var == "auto" else noise_var))
    return torch.stack(out).reshape(*lead, -1)


def ref_capkv(k, v, mu, tau):
    lead, (k, v, mu) = _rows((k.double(), 2), (v.double(), 2), (mu.double(), 1))
    out = []
    for kr, vr, m in zip(k, v, mu):
        c = torch.stack([torch.clamp(kr[i] @ m / (kr[i].norm() * m.norm()), -1, 1) for i in range(kr.shape[0])])
        out.append(ref_leverage_row(torch.exp(tau * (c - c.max())), vr, 1.0))
    return torch.stack(out).reshape(*lead, -1)


def ref_context_attention_row(k, q, causal, kpos, qpos):
    "max over queries t of softmax_t over the keys t sees (keys at or before its position when causal); 0 if unseen."
    n, d = k.shape
    out = [0.0] * n
    for t in range(q.shape[0]):
        vis = [i for i in range(n) if not causal or int(kpos[i]) <= int(qpos[t])]
        if not vis: continue
        logits = [float(q[t] @ k[i]) / math.sqrt(d) for i in vis]
        mx = max(logits); e = [math.exp(x - mx) for x in logits]; s = sum(e)
        for i, ei in zip(vis, e): out[i] = max(out[i], ei / s)
    return torch.tensor(out, dtype=f64)


def ref_context_attention(k, q, causal=True, key_positions=None, query_positions=None):
    n, t = k.shape[-2], q.shape[-2]
    kp = torch.arange(n) if key_positions is None else key_positions
    qp = torch.arange(n - t, n) if query_positions is None else query_positions
    lead, (kr, qr, kpr) = _rows((k.double(), 2), (q.double(), 2), (kp.expand(*k.shape[:-2], n) if kp.ndim else kp, 1))
    return torch.stack([ref_context_attention_row(a, b, causal, p, qp) for a, b, p in zip(kr, qr, kpr)]).reshape(*lead, n)


def ref_key_leverage_row(k, ridge=1e-3):
    x = k.double() - k.double().mean(0)
    g = x.T @ x
    lam = ridge * float(g.diagonal().mean())
    inv = torch.linalg.inv(g + lam * torch.eye(x.shape[1], dtype=f64))
    return torch.stack([x[i] @ inv @ x[i] for i in range(x.shape[0])])


def ref_jacap_context(k, v, q, kpre, prior_weight, breadth, noise_var, causal, key_positions=None):
    "Rows of keys (N, d), values (N, dv), G query heads (G, T, d): sections 10-13 of 00_theory, written out."
    lead, (kr, vr, qr, pr) = _rows((k.double(), 2), (v.double(), 2), (q.double(), 3), (kpre.double(), 2))
    out = []
    for kk, vv, qq, pp in zip(kr, vr, qr, pr):
        n, d = kk.shape
        h = ref_key_leverage_row(pp)
        z = breadth * n * h / (2 * d)
        prior = torch.exp(z - z.max()) / torch.exp(z - z.max()).sum()
        kp = torch.arange(n) if key_positions is None else key_positions
        ctx = torch.stack([ref_context_attention_row(kk, qq[g], causal, kp, torch.arange(n - qq.shape[1], n))
                           for g in range(qq.shape[0])]).amax(0)           # worst case over the query heads
        w = prior_weight * prior + (1 - prior_weight) * ctx / ctx.sum()     # two distributions over the tokens
        vc = vv - (w[:, None] * vv).sum(0) / w.sum()
        out.append(ref_leverage_row(w, vc, ref_auto_noise(w, vc) if noise_var == "auto" else noise_var))
    return torch.stack(out).reshape(*lead, -1)


def rel_err(a, b):
    return float((a.double() - b.double()).abs().max()) / max(float(b.double().abs().max()), 1e-300)   # 0 when both are 0


def make_inputs(seed=0, lead=(2, 3), g=4, n=37, d=8, dv=5, dtype=f64):
    "GQA-shaped inputs: keys/values (*lead, 1, N, .), statistics (*lead, G, .)."
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=f64)
    k, v = r(*lead, 1, n, d) * 2, r(*lead, 1, n, dv)
    mu, var = r(*lead, g, d) * 2, r(*lead, g, d).abs() + 0.1
    return [x.to(dtype) for x in (k, v, mu, var)]


SHAPES = {"gqa": dict(lead=(2, 3), g=4, n=37, d=8, dv=5), "no-lead": dict(lead=(), g=1, n=23, d=16, dv=16),
          "one-token": dict(lead=(2,), g=3, n=1, d=8, dv=4), "wide-values": dict(lead=(1,), g=2, n=19, d=4, dv=12)}


# ---------------------------------------------------------------- Algorithm 1 and CapKV against the references
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("noise_var", [1.0, 0.3, "auto"])
@pytest.mark.parametrize("dtype,tol", [(f64, 1e-6), (torch.float32, 1e-4)], ids=["f64", "f32"])
def test_jacap_matches_float64_reference(shape, noise_var, dtype, tol):
    k, v, mu, var = make_inputs(seed=1, dtype=dtype, **SHAPES[shape])
    got = jacap_scores(k, v, mu, var, tau=2.0, noise_var=noise_var, backend="torch")
    s = SHAPES[shape]
    assert got.dtype == torch.float32 and got.shape == (*s["lead"], s["g"], s["n"])
    assert rel_err(got, ref_jacap(k, v, mu, var, 2.0, noise_var)) < tol


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("tau", [0.5, 5.0, 20.0])
def test_capkv_matches_float64_reference(shape, tau):
    k, v, mu, _ = make_inputs(seed=2, **SHAPES[shape])
    got = capkv_scores(k, v, mu, tau=tau, backend="torch")
    assert got.dtype == torch.float32 and rel_err(got, ref_capkv(k, v, mu, tau)) < 1e-6


@pytest.mark.parametrize("tau,noise_var", [(4.0, 0.5), (1.0, "auto"), (10.0, 2.0)])
def test_scores_are_leverage_of_their_weights(tau, noise_var):
    k, v, mu, var = make_inputs(seed=10)
    torch.testing.assert_close(jacap_scores(k, v, mu, var, tau=tau, noise_var=noise_var),
                               leverage_scores(jacap_weights(k, mu, var, tau=tau), v, noise_var))
    torch.testing.assert_close(capkv_scores(k, v, mu, tau=tau), leverage_scores(capkv_weights(k, mu, tau=tau), v, 1.0))


def test_broadcast_view_equals_materialised_repeat():
    k, v, mu, var = make_inputs(seed=3, dtype=torch.float32)
    kr, vr = k.expand(2, 3, 4, 37, 8).contiguous(), v.expand(2, 3, 4, 37, 5).contiguous()
    torch.testing.assert_close(jacap_scores(k, v, mu, var), jacap_scores(kr, vr, mu, var))
    torch.testing.assert_close(capkv_scores(k.expand(2, 3, 4, 37, 8), v, mu), capkv_scores(kr, vr, mu))


@pytest.mark.parametrize("tau", [1.0, 3.0])
def test_agrees_with_theory_module(tau):
    from jacap_nb import theory
    k, v, mu, var = make_inputs(seed=4)
    torch.testing.assert_close(jacap_weights(k, mu, var, tau=tau), theory.sensitivity_weights(k, mu, var, tau=tau))
    w = jacap_weights(k, mu, var, tau=tau)
    for nv in (0.7, "auto"):
        torch.testing.assert_close(leverage_scores(w, v, nv).double(), theory.reference_leverage_scores(w, v, nv), rtol=1e-6, atol=0)


def test_weights_are_non_negative_and_capkv_peaks_at_one():
    k, v, mu, var = make_inputs(seed=6)
    assert (jacap_weights(k, mu, var) >= 0).all() and (jacap_weights(-k, -mu, var * 0) >= 0).all()
    wc = capkv_weights(k, mu)
    assert (wc > 0).all() and (wc <= 1).all()


SCORE_FNS = {
    "jacap": lambda k, v, mu, var, q: jacap_scores(k, v, mu, var),
    "jacap auto": lambda k, v, mu, var, q: jacap_scores(k, v, mu, var, noise_var="auto"),
    "capkv": lambda k, v, mu, var, q: capkv_scores(k, v, mu),
    "expected_attention": lambda k, v, mu, var, q: expected_attention_scores(k, v, mu, var),
    "snapkv": lambda k, v, mu, var, q: snapkv_scores(k, v, q),
    "knorm": lambda k, v, mu, var, q: knorm_scores(k, v),
    "keydiff": lambda k, v, mu, var, q: keydiff_scores(k, v),
    "jacap_context": lambda k, v, mu, var, q: jacap_context_scores(k[..., 0, :, :], v[..., 0, :, :], q),
}


@pytest.mark.parametrize("name", list(SCORE_FNS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_give_finite_float32(name, dtype):
    "Low-precision caches are upcast: finite float32 scores equal to scoring the same rounded numbers in float32."
    k, v, mu, var = make_inputs(seed=8, n=300, d=64, dv=64, dtype=dtype)
    q = mu[..., None, :].expand(2, 3, 4, 3, 64)
    s = SCORE_FNS[name](k, v, mu, var, q)
    assert s.dtype == torch.float32 and torch.isfinite(s).all()
    f = SCORE_FNS[name](k.float(), v.float(), mu.float(), var.float(), q.float())
    torch.testing.assert_close(s, f)


# ---------------------------------------------------------------- the future-query mixture (00_theory sections 10-13)
CTX_SHAPES = {"one-row": ((), 17, 5, 8), "full-window": ((2,), 33, 33, 8), "heads": ((2, 3), 40, 7, 16), "tiny": ((), 1, 1, 4)}


@pytest.mark.parametrize("shape", list(CTX_SHAPES))
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("chunk", [256, 3])
def test_context_attention_matches_loops(shape, causal, chunk):
    lead, n, t, d = CTX_SHAPES[shape]
    g = torch.Generator().manual_seed(n + t)
    k, q = 2 * torch.randn(*lead, n, d, generator=g, dtype=f64), 2 * torch.randn(*lead, t, d, generator=g, dtype=f64)
    got = context_attention(k, q, causal=causal, chunk=chunk)
    assert got.dtype == torch.float32 and got.shape == (*lead, n)
    torch.testing.assert_close(got.double(), ref_context_attention(k, q, causal), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_context_attention_with_permuted_keys(causal, seed):
    "Keys out of order with their logical positions (as after an eviction): the same value per key."
    g = torch.Generator().manual_seed(seed)
    k, q = torch.randn(2, 30, 8, generator=g, dtype=f64), torch.randn(2, 9, 8, generator=g, dtype=f64)
    perm = torch.randperm(30, generator=g)
    got = context_attention(k[..., perm, :], q, causal=causal, key_positions=perm)
    torch.testing.assert_close(got.double(), ref_context_attention(k, q, causal)[..., perm], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(got.double(), ref_context_attention(k[..., perm, :], q, causal, key_positions=perm), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("causal", [True, False])
def test_context_attention_query_positions_and_unseen_keys(causal):
    "Queries at given positions; with causal=True a key after every query gets 0."
    g = torch.Generator().manual_seed(4)
    k, q = torch.randn(25, 8, generator=g, dtype=f64), torch.randn(4, 8, generator=g, dtype=f64)
    qpos = torch.tensor([3, 7, 8, 15])
    got = context_attention(k, q, causal=causal, query_positions=qpos)
    ref = ref_context_attention(k, q, causal, query_positions=qpos)
    torch.testing.assert_close(got.double(), ref, rtol=1e-6, atol=1e-7)
    if causal: assert (got[16:] == 0).all() and (got[:16] > 0).all()
    else: assert (got > 0).all()


@pytest.mark.parametrize("block", [1, 4, 16, 64])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("base", [0, 100], ids=["from-0", "offset"])
def test_band_with_halo_covering_everything_is_exact(block, causal, base):
    g = torch.Generator().manual_seed(block)
    n, t = 50, 31
    k, q = torch.randn(3, n, 8, generator=g, dtype=f64), torch.randn(3, t, 8, generator=g, dtype=f64)
    kpos, qpos = torch.arange(base, base + n), torch.arange(base + n - t, base + n)
    exact = context_attention(k, q, causal=causal, key_positions=kpos, query_positions=qpos)
    band = context_attention(k, q, causal=causal, key_positions=kpos, query_positions=qpos, block=block, halo=n)
    torch.testing.assert_close(band, exact, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(exact.double(), ref_context_attention(k, q, causal, kpos, qpos), rtol=1e-6, atol=1e-7)


def test_band_on_scattered_positions_is_exact():
    "Non-contiguous key positions (after an eviction) cannot be banded: the exact value comes back."
    g = torch.Generator().manual_seed(5)
    k, q = torch.randn(2, 40, 8, generator=g, dtype=f64), torch.randn(2, 6, 8, generator=g, dtype=f64)
    kpos = torch.randperm(60, generator=g)[:40].sort().values
    qpos = torch.arange(54, 60)
    torch.testing.assert_close(context_attention(k, q, key_positions=kpos, query_positions=qpos, block=2, halo=3),
                               context_attention(k, q, key_positions=kpos, query_positions=qpos), rtol=0, atol=0)


@pytest.mark.parametrize("ridge", [1e-3, 1e-1])
@pytest.mark.parametrize("n,d", [(40, 8), (9, 8), (200, 16)])
def test_key_leverage_matches_explicit_inverse(ridge, n, d):
    k = torch.randn(2, n, d, generator=torch.Generator().manual_seed(n), dtype=f64) * torch.linspace(0.2, 3, d, dtype=f64) + 1
    got = key_leverage(k, ridge)
    ref = torch.stack([ref_key_leverage_row(k[i], ridge) for i in range(2)])
    torch.testing.assert_close(got, ref, rtol=1e-8, atol=1e-10)
    assert (got >= 0).all() and (got < 1).all()


@pytest.mark.parametrize("prior_weight", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("noise_var", ["auto", 0.05])
@pytest.mark.parametrize("pre", [False, True], ids=["prior-on-keys", "prior-on-keys_pre"])
def test_jacap_context_scores_match_reference(prior_weight, causal, noise_var, pre):
    g = torch.Generator().manual_seed(7)
    n, t, d, dv = 30, 20, 8, 6
    k, v = torch.randn(2, n, d, generator=g, dtype=f64), torch.randn(2, n, dv, generator=g, dtype=f64)
    q = torch.randn(2, 3, t, d, generator=g, dtype=f64)                  # 3 query heads of each of 2 KV heads
    kpre = torch.randn(2, n, d, generator=g, dtype=f64) if pre else None
    got = jacap_context_scores(k, v, q, kpre, prior_weight, 1.5, noise_var, causal=causal)
    assert got.dtype == torch.float32 and got.shape == (2, n)
    ref = ref_jacap_context(k, v, q, k if kpre is None else kpre, prior_weight, 1.5, noise_var, causal)
    assert rel_err(got, ref) < 1e-5


def test_jacap_context_scores_with_permuted_keys():
    "Scoring the cache slots in any order, with their positions, gives each slot the same score."
    g = torch.Generator().manual_seed(8)
    k, v, q = torch.randn(1, 24, 8, generator=g), torch.randn(1, 24, 6, generator=g), torch.randn(1, 2, 16, 8, generator=g)
    perm = torch.randperm(24, generator=g)
    a = jacap_context_scores(k, v, q, causal=True)
    b = jacap_context_scores(k[:, perm], v[:, perm], q, k[:, perm], causal=True, key_positions=perm[None],
                             query_positions=torch.arange(8, 24))
    torch.testing.assert_close(b, a[:, perm], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e3])
def test_centred_leverage_is_scale_free_in_the_weights(scale):
    g = torch.Generator().manual_seed(9)
    w, v = torch.rand(3, 40, generator=g, dtype=f64), torch.randn(3, 40, 5, generator=g, dtype=f64)
    torch.testing.assert_close(centred_leverage(scale * w, v), centred_leverage(w, v), rtol=1e-9, atol=0)


@pytest.mark.parametrize("bad,exc,match", [
    (dict(prior_weight=1.5), ValueError, r"prior_weight must be a finite number in \[0, 1\]"),
    (dict(prior_weight=True), TypeError, "prior_weight must be a number; got bool"),
    (dict(breadth=0.0), ValueError, "breadth must be a finite number > 0"),
    (dict(noise_var="big"), ValueError, 'noise_var must be a number > 0 or "auto"'),
    (dict(queries=torch.randn(2, 3, 5, 7)), ValueError, "queries must have shape"),
    (dict(queries=torch.randn(4, 3, 5, 8)), ValueError, "must broadcast"),
    (dict(values=torch.randn(2, 11, 6)), ValueError, "values must have shape"),
    (dict(keys=torch.full((2, 12, 8), float("nan"))), ValueError, "keys must be finite")])
def test_jacap_context_scores_bad_arguments(bad, exc, match):
    args = dict(keys=torch.randn(2, 12, 8), values=torch.randn(2, 12, 6), queries=torch.randn(2, 3, 5, 8))
    kw = {k: bad.pop(k) for k in list(bad) if k not in args}
    args.update(bad)
    with pytest.raises(exc, match=match):
        jacap_context_scores(args["keys"], args["values"], args["queries"], **kw)


# ---------------------------------------------------------------- baselines not covered by 01_scoring
def test_snapkv_average_pooling_and_non_causal():
    g = torch.Generator().manual_seed(11)
    k, v, q = torch.randn(10, 4, generator=g), torch.randn(10, 3, generator=g), torch.randn(3, 4, generator=g)
    logits = q @ k.T / 2.0
    causal = logits.clone(); causal[0, 8:] = -math.inf; causal[1, 9:] = -math.inf   # window queries sit at positions 7, 8, 9
    attn = torch.softmax(causal, -1).mean(0)
    avg = torch.stack([attn[max(0, i - 1):i + 2].mean() for i in range(10)])
    torch.testing.assert_close(snapkv_scores(k, v, q, kernel_size=3, pool="avg"), avg)
    torch.testing.assert_close(snapkv_scores(k, v, q, kernel_size=1, causal=False), torch.softmax(logits, -1).mean(0))


def test_expected_attention_without_variance_is_the_mean_query_attention():
    g = torch.Generator().manual_seed(12)
    k, v, mu = torch.randn(6, 4, generator=g, dtype=f64), torch.randn(6, 3, generator=g, dtype=f64), torch.randn(4, generator=g, dtype=f64)
    torch.testing.assert_close(expected_attention_scores(k, v, mu, torch.zeros(4, dtype=f64)).double(),
                               torch.softmax(k @ mu / 2.0, -1) * v.norm(dim=-1), rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [0.01, 5.0])
def test_keydiff_is_scale_free_and_picks_the_outlier(scale):
    k = torch.tensor([[1.0, 0], [0.9, 0.2], [1.0, 0.1], [-1.0, 0.0]])
    s = keydiff_scores(k * scale, torch.ones(4, 2))
    assert s.argmax() == 3
    torch.testing.assert_close(s, keydiff_scores(k, torch.ones(4, 2)))


# ---------------------------------------------------------------- selection
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("budget,n_sink,window", [(12, 4, 5), (10, 0, 0), (40, 4, 5), (9, 0, 9)])
def test_select_tokens_keeps_budget_and_protected(seed, budget, n_sink, window):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(3, 2, 40, generator=gen)
    protect = torch.zeros(40, dtype=torch.bool)
    if budget > n_sink + window: protect[20] = True
    idx = select_tokens(s, budget, n_sink=n_sink, window=window, protect=protect)
    assert idx.shape == (3, 2, budget) and idx.dtype == torch.long
    assert (idx.diff(dim=-1) > 0).all()                         # sorted, distinct
    prot = set(range(n_sink)) | set(range(40 - window, 40)) | set(protect.nonzero().flatten().tolist())
    for row, sc in zip(idx.reshape(-1, budget), s.reshape(-1, 40)):
        kept = set(row.tolist())
        assert prot <= kept
        rest = sorted((i for i in range(40) if i not in prot), key=lambda i: -float(sc[i]))
        assert kept - prot == set(rest[:budget - len(prot)])    # the free slots go to the best others


def test_select_tokens_edge_budgets():
    s = torch.randn(2, 8)
    assert select_tokens(s, 0, n_sink=0).shape == (2, 0)
    assert select_tokens(s, 8).tolist() == [list(range(8))] * 2
    assert select_tokens(s, 8, n_sink=20, window=20).tolist() == [list(range(8))] * 2   # protection clipped to N
    kept = select_tokens(torch.tensor([0., 0., float("inf"), float("inf"), float("inf"), 1.]), 3, n_sink=2)
    assert {0, 1} <= set(kept.tolist())                         # an unprotected +inf does not push a sink out


SEL_BAD = [(lambda s: select_tokens(s, -1, n_sink=0), "budget must be"),
           (lambda s: select_tokens(s, 2.0, n_sink=0), "budget must be"),
           (lambda s: select_tokens(s, 5, protect=torch.ones(8)), "protect must be a bool tensor"),
           (lambda s: select_tokens(s, 5, protect=torch.ones(7, dtype=torch.bool)), "protect must be a bool tensor"),
           (lambda s: select_tokens(s, 5, n_sink=-1), "n_sink must be an int >= 0"),
           (lambda s: select_tokens(torch.tensor([1.0, math.nan, 0.0]), 1, n_sink=0), "NaN"),
           (lambda s: select_tokens(torch.tensor(1.0), 1), "scores must be a tensor")]


@pytest.mark.parametrize("i", range(len(SEL_BAD)))
def test_select_tokens_bad_arguments(i):
    fn, msg = SEL_BAD[i]
    with pytest.raises(ValueError, match=msg): fn(torch.randn(2, 8))


# ---------------------------------------------------------------- errors on bad input
def _bad_cases():
    k, v, mu, var = make_inputs(seed=15, dtype=torch.float32)
    return {
        "values N": (lambda: jacap_scores(k, v[..., :30, :], mu, var), "values must have shape"),
        "q_mean d": (lambda: jacap_scores(k, v, mu[..., :5], var), "q_mean must have shape"),
        "q_var d": (lambda: jacap_scores(k, v, mu, var[..., :5]), "q_var must have shape"),
        "lead dims": (lambda: jacap_scores(k, v, mu.reshape(3, 2, 4, 8), var), "must broadcast"),
        "N = 0": (lambda: jacap_scores(k[..., :0, :], v[..., :0, :], mu, var), "N > 0"),
        "tau 0": (lambda: jacap_scores(k, v, mu, var, tau=0.0), "tau must be a finite number > 0"),
        "capkv tau": (lambda: capkv_scores(k, v, mu, tau=-1), "tau must be a finite number > 0"),
        "noise 0": (lambda: jacap_scores(k, v, mu, var, noise_var=0.0), "noise_var must be a finite number > 0"),
        "noise str": (lambda: jacap_scores(k, v, mu, var, noise_var="big"), 'noise_var must be a number > 0 or "auto"'),
        "q_var < 0": (lambda: jacap_scores(k, v, mu, -var), "q_var must be non-negative"),
        "keys nan": (lambda: jacap_scores(k * math.nan, v, mu, var), "keys must be finite"),
        "values inf": (lambda: capkv_scores(k, v * math.inf, mu), "values must be finite"),
        "q_mean nan": (lambda: jacap_scores(k, v, mu * math.nan, var), "q_mean must be finite"),
        "weights < 0": (lambda: leverage_scores(-torch.ones(3), torch.ones(3, 2)), "weights must be non-negative"),
        "weights N": (lambda: leverage_scores(torch.ones(4), torch.ones(3, 2)), "must share N > 0"),
        "kernel even": (lambda: snapkv_scores(k, v, mu[..., None, :], kernel_size=4), "kernel_size must be an odd int"),
        "pool": (lambda: snapkv_scores(k, v, mu[..., None, :], pool="min"), 'pool must be "max" or "avg"'),
        "snap queries d": (lambda: snapkv_scores(k, v, mu[..., :5]), "queries must have shape"),
        "snap W > N": (lambda: snapkv_scores(k[..., :3, :], v[..., :3, :], mu[..., None, :, :]), "at most N=3 window queries"),
        "keys 1-D": (lambda: knorm_scores(torch.ones(4), v), "keys must be a tensor of shape"),
        "ridge 0": (lambda: key_leverage(k, ridge=0), "ridge must be a finite number > 0"),
        "breadth": (lambda: prior_attention(k, breadth=-1.0), "breadth must be"),
        "backend": (lambda: jacap_scores(k, v, mu, var, backend="cuda"), "backend must be one of 'auto', 'torch', 'triton'"),
        "capkv backend": (lambda: capkv_scores(k, v, mu, backend="gpu"), "backend must be one of"),
        "capkv backend eps": (lambda: capkv_scores(k, v, mu, epsilon=1e-6, backend="gpu"), "backend must be one of"),
        "capkv triton eps": (lambda: capkv_scores(k, v, mu, epsilon=1e-6, backend="triton"), "needs epsilon = 0"),
    }


@pytest.mark.parametrize("case", list(_bad_cases()))
def test_bad_inputs_raise_named_errors(case):
    fn, msg = _bad_cases()[case]
    with pytest.raises(ValueError, match=msg):
        fn()


def test_torch_backend_is_the_default_on_cpu():
    k, v, mu, var = make_inputs(seed=16, dtype=torch.float32)
    assert torch.equal(jacap_scores(k, v, mu, var), jacap_scores(k, v, mu, var, backend="torch"))
    assert torch.equal(capkv_scores(k, v, mu), capkv_scores(k, v, mu, backend="torch"))


def test_key_leverage_of_one_key():
    "One key makes the centred Gram zero: the ridge stays a normal number and the leverage is 0, not a Cholesky error, also where subnormals flush to zero (as on GPUs)."
    if not torch.set_flush_denormal(True): pytest.skip("this CPU cannot flush subnormals")
    try:
        for dt in (torch.float32, torch.float64):
            assert key_leverage(torch.randn(1, 2, 1, 16, dtype=dt)).eq(0).all()
    finally: torch.set_flush_denormal(False)
