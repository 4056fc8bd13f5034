"""Tests of jacap_nb.scoring: agreement with an independent float64 reference, the unit tests of the Jacap notes (§12),
the baselines, the registry, token selection and the error messages."""
import math
import pytest
import torch
from jacap_nb.scoring import (jacap_scores, jacap_weights, capkv_scores, capkv_weights, leverage_scores, knorm_scores,
                              keydiff_scores, snapkv_scores, expected_attention_scores, streaming_scores, random_scores,
                              observed_attention, jacap_mix_scores, SCORERS, scorer_needs, get_scorer, select_tokens, _capacity_matrix)

torch.set_num_threads(1)


# ---------------------------------------------------------------- independent float64 reference (loops, explicit inverse)
def _rows(*xs_and_core_dims):
    "Broadcast the leading dims of several tensors and flatten them; yields per-row tensors."
    lead = torch.broadcast_shapes(*[x.shape[:x.ndim - c] for x, c in xs_and_core_dims])
    out = [x.expand(*lead, *x.shape[x.ndim - c:]).reshape(-1, *x.shape[x.ndim - c:]) for x, c in xs_and_core_dims]
    return lead, out


def ref_leverage_row(w, v, s2):
    a = torch.eye(v.shape[1], dtype=torch.float64)
    for j in range(v.shape[0]):
        a = a + w[j] / s2 * torch.outer(v[j], v[j])
    ainv = torch.linalg.inv(a)
    return torch.stack([w[i] / s2 * v[i] @ ainv @ v[i] for i in range(v.shape[0])])


def ref_jacap(k, v, mu, var, tau, noise_var):
    lead, (k, v, mu, var) = _rows((k.double(), 2), (v.double(), 2), (mu.double(), 1), (var.double(), 1))
    out = []
    for kr, vr, m, s in zip(k, v, mu, var):
        d = kr.shape[1]
        z = torch.tensor([float(kr[i] @ m) / (tau * math.sqrt(d)) for i in range(kr.shape[0])], dtype=torch.float64)
        alpha = torch.exp(z - z.max()) / torch.exp(z - z.max()).sum()
        kappa = torch.stack([(kr[i] ** 2 * s).sum() for i in range(kr.shape[0])])
        w = (alpha * (1 - alpha)) ** 2 * kappa / d
        s2 = float((w * (vr ** 2).sum(1)).sum()) / vr.shape[1] if noise_var == "auto" else noise_var
        out.append(ref_leverage_row(w, vr, s2))
    return torch.stack(out).reshape(*lead, -1)


def ref_capkv(k, v, mu, tau):
    lead, (k, v, mu) = _rows((k.double(), 2), (v.double(), 2), (mu.double(), 1))
    out = []
    for kr, vr, m in zip(k, v, mu):
        c = torch.stack([torch.clamp(kr[i] @ m / (kr[i].norm() * m.norm()), -1, 1) for i in range(kr.shape[0])])
        out.append(ref_leverage_row(torch.exp(tau * (c - c.max())), vr, 1.0))
    return torch.stack(out).reshape(*lead, -1)


def rel_err(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def make_inputs(seed=0, lead=(2, 3), g=4, n=37, d=8, dv=5, dtype=torch.float64):
    "GQA-shaped inputs: keys/values (B, H, 1, N, .), statistics (B, H, G, .)."
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    k, v = r(*lead, 1, n, d) * 2, r(*lead, 1, n, dv)
    mu, var = r(*lead, g, d) * 2, r(*lead, g, d).abs() + 0.1
    return [x.to(dtype) for x in (k, v, mu, var)]


# ---------------------------------------------------------------- agreement with the reference
@pytest.mark.parametrize("noise_var", [1.0, 0.3, "auto"])
def test_jacap_matches_float64_reference(noise_var):
    k, v, mu, var = make_inputs()
    got = jacap_scores(k, v, mu, var, tau=2.0, noise_var=noise_var)
    assert got.dtype == torch.float32 and got.shape == (2, 3, 4, 37)
    assert rel_err(got, ref_jacap(k, v, mu, var, 2.0, noise_var)) < 1e-6


def test_capkv_matches_float64_reference():
    k, v, mu, _ = make_inputs(seed=1)
    got = capkv_scores(k, v, mu, tau=5.0)
    assert got.dtype == torch.float32 and got.shape == (2, 3, 4, 37)
    assert rel_err(got, ref_capkv(k, v, mu, 5.0)) < 1e-6


def test_float32_inputs_close_to_reference():
    k, v, mu, var = make_inputs(seed=2, dtype=torch.float32)
    assert rel_err(jacap_scores(k, v, mu, var, tau=2.0), ref_jacap(k, v, mu, var, 2.0, 1.0)) < 1e-4
    assert rel_err(capkv_scores(k, v, mu), ref_capkv(k, v, mu, 5.0)) < 1e-4


def test_broadcast_view_equals_materialised_repeat():
    k, v, mu, var = make_inputs(seed=3, dtype=torch.float32)
    kr, vr = k.expand(2, 3, 4, 37, 8).contiguous(), v.expand(2, 3, 4, 37, 5).contiguous()
    torch.testing.assert_close(jacap_scores(k, v, mu, var), jacap_scores(kr, vr, mu, var))
    torch.testing.assert_close(capkv_scores(k.expand(2, 3, 4, 37, 8), v, mu), capkv_scores(kr, vr, mu))


def test_agrees_with_theory_module():
    from jacap_nb import theory
    k, v, mu, var = make_inputs(seed=4)
    torch.testing.assert_close(jacap_weights(k, mu, var, tau=3.0), theory.sensitivity_weights(k, mu, var, tau=3.0))
    w = jacap_weights(k, mu, var, tau=3.0)
    torch.testing.assert_close(leverage_scores(w, v, "auto").double(), theory.leverage_scores(w, v, "auto"),
                               rtol=1e-6, atol=0)


# ---------------------------------------------------------------- the unit tests of the notes (§12)
def test_capacity_matrix_is_symmetric_positive_definite():
    k, v, mu, var = make_inputs(seed=5)
    a, _ = _capacity_matrix(jacap_weights(k, mu, var), v, 1.0)
    torch.testing.assert_close(a, a.mT)
    assert torch.linalg.eigvalsh(a).min() >= 1 - 1e-12      # I + PSD: every eigenvalue >= 1


def test_weights_are_non_negative():
    k, v, mu, var = make_inputs(seed=6)
    assert (jacap_weights(k, mu, var) >= 0).all() and (jacap_weights(-k, -mu, var * 0) >= 0).all()
    wc = capkv_weights(k, mu)
    assert (wc > 0).all() and torch.allclose(wc.amax(-1), torch.ones(()).double())


def test_leverage_sum_is_trace_identity():
    "sum_i r_i = tr(I - A^{-1}) = d_v - tr(A^{-1}): a property of the exact leverage, not of the code."
    k, v, mu, var = make_inputs(seed=7)
    w = jacap_weights(k, mu, var, tau=1.0)
    a, _ = _capacity_matrix(w, v, 1.0)
    expect = v.shape[-1] - torch.linalg.inv(a).diagonal(dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(leverage_scores(w, v).double().sum(-1), expect, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_give_finite_float32(dtype):
    k, v, mu, var = make_inputs(seed=8, n=300, d=64, dv=64, dtype=dtype)
    for s in (jacap_scores(k, v, mu, var), jacap_scores(k, v, mu, var, noise_var="auto"), capkv_scores(k, v, mu),
              expected_attention_scores(k, v, mu, var), snapkv_scores(k, v, mu[..., None, :].expand(2, 3, 4, 3, 64))):
        assert s.dtype == torch.float32 and torch.isfinite(s).all()
    # same (rounded) inputs in float32 give the same scores: the computation is upcast, not done in low precision
    f = [x.float() for x in (k, v, mu, var)]
    torch.testing.assert_close(jacap_scores(k, v, mu, var), jacap_scores(*f))


def test_constant_sensitivity_reduces_to_capkv_structure():
    "Notes §12.7: with a constant weight, Jacap's score is CapKV's leverage with the same weights."
    gen = torch.Generator().manual_seed(9)
    k = torch.nn.functional.normalize(torch.randn(3, 50, 16, generator=gen, dtype=torch.float64), dim=-1) * 2.5
    v = torch.randn(3, 50, 8, generator=gen, dtype=torch.float64)
    mu, var = torch.zeros(3, 16, dtype=torch.float64), torch.full((3, 16), 0.7, dtype=torch.float64)
    w = jacap_weights(k, mu, var)                             # uniform alpha, |k| and var constant => w constant
    torch.testing.assert_close(w, w[..., :1].expand_as(w))
    w0 = float(w[0, 0])
    # CapKV with mu = 0: every cosine is 0, every weight 1, sigma^2 = 1; Jacap with sigma^2 = w0: w/sigma^2 = 1
    torch.testing.assert_close(jacap_scores(k, v, mu, var, noise_var=w0), capkv_scores(k, v, mu), rtol=1e-6, atol=0)
    torch.testing.assert_close(jacap_scores(k, v, mu, var, noise_var="auto"),
                               leverage_scores(torch.ones(3, 50), v, "auto"), rtol=1e-6, atol=0)


def test_scores_are_leverage_of_their_weights():
    k, v, mu, var = make_inputs(seed=10)
    torch.testing.assert_close(jacap_scores(k, v, mu, var, tau=4.0, noise_var=0.5),
                               leverage_scores(jacap_weights(k, mu, var, tau=4.0), v, 0.5))
    torch.testing.assert_close(capkv_scores(k, v, mu, tau=3.0), leverage_scores(capkv_weights(k, mu, tau=3.0), v))


def test_hand_example_leverage_prefers_the_distinct_direction():
    "Notes §7.2: u2 is nearly collinear with u1, so leverage keeps {u1, u3} where the weights keep {u1, u2}."
    u = torch.tensor([[1.0, 0.0], [0.95, 0.05], [0.0, 1.0]])
    w = torch.tensor([1.0, 1.0, 0.7])
    r = leverage_scores(w, u)
    assert r[2] > r[0] > r[1]
    assert select_tokens(r, 2, n_sink=0).tolist() == [0, 2]
    assert select_tokens(w + torch.tensor([0.0, 1e-3, 0.0]), 2, n_sink=0).tolist() == [0, 1]


def test_duplicates_share_credit():
    "Ten copies of a value together earn about what one copy would: the leverage sum over the cluster stays below 1."
    v = torch.cat([torch.tensor([[1.0, 0, 0]]).repeat(10, 1), torch.tensor([[0, 1.0, 0], [0, 0, 1.0]])])
    r = leverage_scores(torch.ones(12), v * 3)
    assert r[:10].sum() < 1 and (r[10:] > r[:10].max()).all()


# ---------------------------------------------------------------- baselines
def test_knorm_and_keydiff():
    k = torch.tensor([[1.0, 0], [0, 3.0], [1.0, 0.1], [-1.0, 0.0]])
    v = torch.ones(4, 2)
    torch.testing.assert_close(knorm_scores(k, v), -k.norm(dim=-1))
    s = keydiff_scores(k, v)
    assert s.argmax() == 3 and s.shape == (4,)                 # the key pointing away from the others
    torch.testing.assert_close(keydiff_scores(k * 5, v), s)    # scale-free


def test_snapkv_matches_manual_attention():
    gen = torch.Generator().manual_seed(11)
    k, v, q = torch.randn(10, 4, generator=gen), torch.randn(10, 3, generator=gen), torch.randn(3, 4, generator=gen)
    logits = q @ k.T / 2.0
    logits[0, 8:] = -math.inf; logits[1, 9:] = -math.inf     # window queries sit at positions 7, 8, 9
    attn = torch.softmax(logits, -1).mean(0)
    torch.testing.assert_close(snapkv_scores(k, v, q, kernel_size=1), attn)
    pooled = torch.stack([attn[max(0, i - 1):i + 2].max() for i in range(10)])
    torch.testing.assert_close(snapkv_scores(k, v, q, kernel_size=3), pooled)
    avg = torch.stack([attn[max(0, i - 1):i + 2].mean() for i in range(10)])
    torch.testing.assert_close(snapkv_scores(k, v, q, kernel_size=3, pool="avg"), avg)


def test_expected_attention_closed_form_matches_monte_carlo():
    gen = torch.Generator().manual_seed(12)
    k, v = torch.randn(6, 4, generator=gen, dtype=torch.float64), torch.randn(6, 3, generator=gen, dtype=torch.float64)
    mu, var = torch.randn(4, generator=gen, dtype=torch.float64), torch.rand(4, generator=gen, dtype=torch.float64) * 0.5
    q = mu + var.sqrt() * torch.randn(400_000, 4, generator=gen, dtype=torch.float64)
    e = torch.exp(q @ k.T / 2.0).mean(0)                       # Monte Carlo E[exp(q.k / sqrt d)]
    mc = e / e.sum() * v.norm(dim=-1)
    torch.testing.assert_close(expected_attention_scores(k, v, mu, var).double(), mc, rtol=1e-2, atol=0)
    # zero variance: the attention of the mean query, times |v|
    torch.testing.assert_close(expected_attention_scores(k, v, mu, 0 * var).double(),
                               torch.softmax(k @ mu / 2.0, -1) * v.norm(dim=-1), rtol=1e-6, atol=0)


def test_streaming_and_random():
    k, v = torch.randn(2, 9, 4), torch.randn(2, 9, 4)
    s = streaming_scores(k, v)
    assert s.shape == (2, 9) and (s.diff(dim=-1) > 0).all()
    torch.testing.assert_close(random_scores(k, v, seed=3), random_scores(k, v, seed=3))
    assert not torch.equal(random_scores(k, v, seed=3), random_scores(k, v, seed=4))


# ---------------------------------------------------------------- registry
def test_registry_adapters_and_needs():
    k, v, mu, var = make_inputs(seed=13, dtype=torch.float32)
    queries = torch.randn(2, 3, 4, 5, 8)
    assert set(SCORERS) == {"jacap", "capkv", "knorm", "keydiff", "snapkv", "expected_attention", "streaming", "random",
                            "jacap_mix"}
    for name, fn in SCORERS.items():
        need = scorer_needs(name)
        assert need <= {"q_mean", "q_var", "queries"}
        stats = dict(q_mean=mu, q_var=var, queries=queries)
        s = fn(k, v, **{n: stats[n] for n in need})            # only what it declares it needs
        assert s.dtype == torch.float32 and s.shape[-1] == 37 and torch.isfinite(s).all(), name
        for missing in need:
            with pytest.raises(ValueError, match=f"needs {missing}"):
                fn(k, v, **{n: stats[n] for n in need - {missing}})
    torch.testing.assert_close(SCORERS["jacap"](k, v, q_mean=mu, q_var=var, tau=3.0), jacap_scores(k, v, mu, var, 3.0))
    assert scorer_needs("jacap") == {"q_mean", "q_var"} and scorer_needs("knorm") == set()
    assert scorer_needs("jacap_mix") == {"q_mean", "q_var", "queries"}
    torch.testing.assert_close(SCORERS["jacap_mix"](k, v, q_mean=mu, q_var=var, queries=queries, mix=0.3),
                               jacap_mix_scores(k, v, mu, var, queries, mix=0.3))


def test_unknown_scorer_lists_valid_names():
    with pytest.raises(ValueError, match="unknown scorer 'h2o'.*jacap.*capkv"):
        get_scorer("h2o")
    with pytest.raises(ValueError, match="valid names"):
        scorer_needs("h2o")


# ---------------------------------------------------------------- selection
def test_select_tokens_keeps_budget_and_protected():
    gen = torch.Generator().manual_seed(14)
    s = torch.randn(3, 2, 40, generator=gen)
    protect = torch.zeros(40, dtype=torch.bool); protect[20] = True
    idx = select_tokens(s, 12, n_sink=4, window=5, protect=protect)
    assert idx.shape == (3, 2, 12) and idx.dtype == torch.long
    assert (idx.diff(dim=-1) > 0).all()                         # sorted, distinct
    for row, sc in zip(idx.reshape(-1, 12), s.reshape(-1, 40)):
        kept = set(row.tolist())
        assert set(range(4)) | set(range(35, 40)) | {20} <= kept
        rest = [i for i in range(40) if i not in set(range(4)) | set(range(35, 40)) | {20}]
        best = sorted(rest, key=lambda i: -float(sc[i]))[:2]    # the two free slots go to the best others
        assert kept - set(range(4)) - set(range(35, 40)) - {20} == set(best)


def test_select_tokens_edge_budgets():
    s = torch.randn(2, 8)
    assert select_tokens(s, 0, n_sink=0).shape == (2, 0)
    assert select_tokens(s, 8).tolist() == [list(range(8))] * 2
    assert select_tokens(s, 8, n_sink=20, window=20).tolist() == [list(range(8))] * 2   # protection clipped to N
    with pytest.raises(ValueError, match="exceed budget"):
        select_tokens(s, 5, n_sink=4, window=2)
    with pytest.raises(ValueError, match=r"budget must be an int in \[0, N=8\]"):
        select_tokens(s, 9)
    with pytest.raises(ValueError, match="budget must be"):
        select_tokens(s, -1, n_sink=0)
    with pytest.raises(ValueError, match="protect must be a bool tensor"):
        select_tokens(s, 5, protect=torch.ones(8))
    with pytest.raises(ValueError, match="NaN"):
        select_tokens(torch.tensor([1.0, math.nan, 0.0]), 1, n_sink=0)


# ---------------------------------------------------------------- errors on bad input
def test_bad_inputs_raise_named_errors():
    k, v, mu, var = make_inputs(seed=15, dtype=torch.float32)
    bad = [
        (lambda: jacap_scores(k, v[..., :30, :], mu, var), "values must have shape"),
        (lambda: jacap_scores(k, v, mu[..., :5], var), "q_mean must have shape"),
        (lambda: jacap_scores(k, v, mu, var[..., :5]), "q_var must have shape"),
        (lambda: jacap_scores(k, v, mu.reshape(3, 2, 4, 8), var), "must broadcast"),
        (lambda: jacap_scores(k[..., :0, :], v[..., :0, :], mu, var), "N > 0"),
        (lambda: jacap_scores(k, v, mu, var, tau=0.0), "tau must be a finite number > 0"),
        (lambda: capkv_scores(k, v, mu, tau=-1), "tau must be a finite number > 0"),
        (lambda: jacap_scores(k, v, mu, var, noise_var=0.0), "noise_var must be a finite number > 0"),
        (lambda: jacap_scores(k, v, mu, var, noise_var="big"), 'noise_var must be a number > 0 or "auto"'),
        (lambda: jacap_scores(k, v, mu, -var), "q_var must be non-negative"),
        (lambda: jacap_scores(k * math.nan, v, mu, var), "keys must be finite"),
        (lambda: capkv_scores(k, v * math.inf, mu), "values must be finite"),
        (lambda: jacap_scores(k, v, mu * math.nan, var), "q_mean must be finite"),
        (lambda: leverage_scores(-torch.ones(3), torch.ones(3, 2)), "weights must be non-negative"),
        (lambda: snapkv_scores(k, v, mu[..., None, :], kernel_size=4), "kernel_size must be an odd int"),
        (lambda: snapkv_scores(k, v, mu[..., :5]), "queries must have shape"),
        (lambda: snapkv_scores(k[..., :3, :], v[..., :3, :], mu[..., None, :, :]), "at most N=3 window queries"),
        (lambda: knorm_scores(torch.ones(4), v), "keys must be a tensor of shape"),
    ]
    for fn, msg in bad:
        with pytest.raises(ValueError, match=msg):
            fn()


# ---------------------------------------------------------------- deletion-aware Jacap (observed attention mixed in)
def ref_observed_attention(k, q):
    "float64 loops: mean over the W window queries (positions N-W..N-1) of the causally masked softmax."
    lead, (k, q) = _rows((k.double(), 2), (q.double(), 2))
    out = []
    for kr, qr in zip(k, q):
        n, w = kr.shape[0], qr.shape[0]
        rows = []
        for t in range(w):
            pos = n - w + t
            logits = qr[t] @ kr[: pos + 1].T / math.sqrt(kr.shape[1])
            rows.append(torch.cat([torch.softmax(logits, 0), torch.zeros(n - pos - 1, dtype=torch.float64)]))
        out.append(torch.stack(rows).mean(0))
    return torch.stack(out).reshape(*lead, -1)


def ref_jacap_mix(k, v, mu, var, q, tau, mix):
    "float64 loops: normalised Jacap weights mixed with the observed attention, leverage with auto noise."
    g = ref_observed_attention(k, q)
    lead, (k, v, mu, var, g) = _rows((k.double(), 2), (v.double(), 2), (mu.double(), 1), (var.double(), 1), (g, 1))
    out = []
    for kr, vr, m, s, gr in zip(k, v, mu, var, g):
        alpha = torch.softmax(kr @ m / (tau * math.sqrt(kr.shape[1])), 0)
        w = (alpha * (1 - alpha)) ** 2 * (kr ** 2 @ s) / kr.shape[1]
        wt = (1 - mix) * w / w.sum() + mix * gr
        out.append(ref_leverage_row(wt, vr, float(wt @ (vr ** 2).sum(1)) / vr.shape[1]))
    return torch.stack(out).reshape(*lead, -1)


def window_queries(seed=0, lead=(2, 3), g=4, w=6, d=8, dtype=torch.float64):
    return torch.randn(*lead, g, w, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def test_observed_attention_matches_reference_and_sums_to_one():
    k, v, mu, var = make_inputs(seed=21)
    q = window_queries(seed=22)
    g = observed_attention(k, q)
    assert g.shape == (2, 3, 4, 37) and g.dtype == torch.float32
    torch.testing.assert_close(g.double(), ref_observed_attention(k, q), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(g.sum(-1), torch.ones(2, 3, 4))
    torch.testing.assert_close(g, snapkv_scores(k, v, q, kernel_size=1))     # SnapKV without its pooling
    assert (g[..., -1] > 0).all() and (observed_attention(k, q[..., :1, :])[..., -1] > 0).all()


@pytest.mark.parametrize("mix", [0.0, 0.3, 0.5, 1.0])
def test_jacap_mix_matches_reference(mix):
    k, v, mu, var = make_inputs(seed=23)
    q = window_queries(seed=24)
    s = jacap_mix_scores(k, v, mu, var, q, tau=2.0, mix=mix)
    assert s.shape == (2, 3, 4, 37) and s.dtype == torch.float32
    torch.testing.assert_close(s.double(), ref_jacap_mix(k, v, mu, var, q, 2.0, mix), rtol=1e-5, atol=1e-7)


def test_jacap_mix_endpoints_are_the_pure_methods():
    k, v, mu, var = make_inputs(seed=25)
    q = window_queries(seed=26)
    mix0 = jacap_mix_scores(k, v, mu, var, q, tau=3.0, mix=0.0)
    jac = jacap_scores(k, v, mu, var, tau=3.0, noise_var="auto")
    torch.testing.assert_close(mix0, jac)
    assert torch.equal(mix0.argsort(-1, descending=True)[..., :10], jac.argsort(-1, descending=True)[..., :10])
    mix1 = jacap_mix_scores(k, v, mu, var, q, mix=1.0)
    torch.testing.assert_close(mix1, leverage_scores(observed_attention(k, q).double(), v, "auto"))
    assert not torch.allclose(mix0, mix1, rtol=0.1)                   # the two ends really differ on these inputs


def test_jacap_mix_is_scale_free_in_the_jacobian_weights():
    "Both parts are normalised before mixing: scaling q_var (hence w_Jac) by 1000 must not tilt the mix."
    k, v, mu, var = make_inputs(seed=27)
    q = window_queries(seed=28)
    torch.testing.assert_close(jacap_mix_scores(k, v, mu, 1000 * var, q, mix=0.5), jacap_mix_scores(k, v, mu, var, q, mix=0.5))
    a = jacap_mix_scores(k, v, mu, var, q, mix=0.5, noise_var=0.01)   # explicit sigma^2 is relative to total weight 1
    torch.testing.assert_close(a, jacap_mix_scores(k, v, mu, 1000 * var, q, mix=0.5, noise_var=0.01))


def test_jacap_mix_zero_jacobian_weights_fall_back_to_observed_attention():
    k, v, mu, var = make_inputs(seed=29)
    q = window_queries(seed=30)
    s = jacap_mix_scores(k, v, mu, torch.zeros_like(var), q, mix=0.5)
    assert torch.isfinite(s).all()
    torch.testing.assert_close(s, jacap_mix_scores(k, v, mu, var, q, mix=1.0), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("bad,msg", [
    (dict(mix=-0.1), "mix must be a number in \\[0, 1\\]"), (dict(mix=1.5), "mix must be"), (dict(mix=True), "mix must be"),
    (dict(mix="half"), "mix must be"), (dict(tau=0.0), "tau must be"), (dict(noise_var="big"), "noise_var must be")])
def test_jacap_mix_bad_arguments(bad, msg):
    k, v, mu, var = make_inputs(seed=31)
    with pytest.raises(ValueError, match=msg):
        jacap_mix_scores(k, v, mu, var, window_queries(seed=32), **bad)


def test_jacap_mix_bad_queries():
    k, v, mu, var = make_inputs(seed=33)
    with pytest.raises(ValueError, match="leading dims of keys .* and queries .* must broadcast"):
        jacap_mix_scores(k, v, mu, var, mu)                            # (B, H, G, d) read as a window of G queries: wrong lead
    with pytest.raises(ValueError, match="at most N=5 window queries"):
        jacap_mix_scores(k[..., :5, :], v[..., :5, :], mu, var, window_queries(w=6))
    with pytest.raises(ValueError, match="queries must have shape"):
        observed_attention(k, window_queries(d=7))


def test_jacap_mix_low_precision_inputs_give_finite_float32():
    k, v, mu, var = make_inputs(seed=34, dtype=torch.bfloat16)
    s = jacap_mix_scores(k, v, mu, var, window_queries(seed=35, dtype=torch.bfloat16))
    assert s.dtype == torch.float32 and torch.isfinite(s).all()


def test_select_tokens_keeps_protected_over_unprotected_inf():
    "An unprotected +inf score must not push a protected sink out of the kept set."
    kept = select_tokens(torch.tensor([0., 0., float("inf"), float("inf"), float("inf"), 1.]), 3, n_sink=2)
    assert {0, 1} <= set(kept.tolist()) and len(kept) == 3
