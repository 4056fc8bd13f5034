"""jacap_nb.analysis as grids: log-det identities, capacity proxies, Spearman p-values, greedy/brute-force selection,
capacities of a captured prefill. 14_analysis checks the hand examples (proxies, ranks, Spearman, the 2-D greedy
case, the competition form, the prefill tensors reproducing attention); not repeated here."""
import itertools, math
import numpy as np
import pytest
import torch
from jacap_nb.analysis import (logdet_eye_gram, capacity_proxies, average_ranks, spearman, student_t_two_sided_p,
    regularized_beta, greedy_logdet_selection, brute_force_selection, selection_logdet, taylor_errors,
    competition_weights, competition_scores, capacity_approximations, prefill_keys_values, prefill_queries, cache_capacity, query_stats, gather_tokens)
from jacap_nb.capture import capture_prefill
from jacap_nb.theory import softmax_jacobian, attention_probs, jacobian_capacity

f64 = dict(dtype=torch.float64)

@pytest.mark.parametrize("n,m", [(50, 7), (7, 50), (5, 5), (1, 3)])
def test_sylvester_identity(n, m):
    x = torch.randn(2, n, m, **f64)
    big = torch.linalg.slogdet(torch.eye(n, **f64) + x @ x.mT).logabsdet
    torch.testing.assert_close(logdet_eye_gram(x), big)
    torch.testing.assert_close(logdet_eye_gram(x.mT), big)

def test_proxies_monotone_scale_free_and_jacobian():
    keys, values = torch.randn(3, 30, 8, **f64), torch.randn(3, 30, 5, **f64)
    mu, var = torch.randn(3, 8, **f64), torch.rand(3, 8, **f64) + 0.1
    kept = torch.stack([torch.randperm(30)[:9] for _ in range(3)])
    sub = capacity_proxies(keys, values, kept, mu, var)
    full = capacity_proxies(keys, values, torch.arange(30).expand(3, 30), mu, var)
    for name in ("k", "u", "ku"): assert (sub[name] <= full[name] + 1e-9).all()
    scaled = capacity_proxies(5 * keys, 0.2 * values, kept)
    for name in scaled: torch.testing.assert_close(scaled[name], sub[name])
    sigma2 = full["jacobian"].new_tensor(0)  # recompute the documented noise reference by hand
    jac = __import__("jacap_nb.theory", fromlist=["attention_jacobian"]).attention_jacobian(keys, values, mu)
    sigma2 = (jac.square() * var.unsqueeze(-2)).sum((-2, -1)) / 5
    torch.testing.assert_close(sub["jacobian"], jacobian_capacity(gather_tokens(keys, kept), gather_tokens(values, kept), mu, var, sigma2))

def test_proxies_bad_inputs():
    keys, values = torch.randn(10, 4), torch.randn(10, 3)
    with pytest.raises(ValueError, match="q_var"): capacity_proxies(keys, values, torch.tensor([1, 2]), q_mean=torch.randn(4))
    with pytest.raises(ValueError, match=r"\[0, N=10\)"): capacity_proxies(keys, values, torch.tensor([1, 10]))
    with pytest.raises(ValueError, match="kept must be"): capacity_proxies(keys, values, torch.tensor([1., 2.]))
    with pytest.raises(ValueError, match="share leading dims"): capacity_proxies(keys, values[:5], torch.tensor([1]))
    with pytest.raises(ValueError, match="x must be"): logdet_eye_gram(torch.ones(3))

def test_t_pvalue_closed_forms_and_h0_calibration():
    for t in (0.0, 0.5, 1.7, 9.0):
        assert student_t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), abs=1e-12)
        assert student_t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
        assert student_t_two_sided_p(t, 4) == pytest.approx(regularized_beta(4 / (4 + t * t), 2, 0.5))
    assert student_t_two_sided_p(1.959964, 1e8) == pytest.approx(0.05, abs=1e-6)
    rng = np.random.default_rng(3)
    ps = np.array([spearman(rng.normal(size=25), rng.normal(size=25)).pvalue for _ in range(300)])
    assert 0.02 < np.mean(ps < 0.05) < 0.10 and 0.35 < np.mean(ps < 0.5) < 0.65   # uniform under H0
    assert spearman(np.arange(25), np.arange(25) + rng.normal(size=25)).pvalue < 1e-6

def test_spearman_bad_inputs():
    with pytest.raises(ValueError, match="length >= 3"): spearman([1, 2], [1, 2])
    with pytest.raises(ValueError, match="length >= 3"): spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="method must be"): spearman([1, 2, 3], [1, 2, 3], method="pearson")
    with pytest.raises(ValueError, match="n must be <= 10"): spearman(range(12), range(12), method="exact")

def test_greedy_chain_rule_and_batching():
    w, u = torch.rand(2, 3, 25), torch.randn(2, 3, 25, 6)
    picks = greedy_logdet_selection(w, u, 5, noise_var=0.7)
    assert picks.shape == (2, 3, 5) and all(len(set(p.tolist())) == 5 for p in picks.reshape(-1, 5))
    for i, j in ((0, 0), (1, 2)):
        torch.testing.assert_close(picks[i, j], greedy_logdet_selection(w[i, j], u[i, j], 5, noise_var=0.7))
        a, total = torch.eye(6, **f64), 0.0
        for t in picks[i, j].tolist():
            ut, wt = u[i, j, t].double(), w[i, j, t].double() / 0.7
            gains = [math.log1p(wt_ * uu @ torch.linalg.solve(a, uu)) for uu, wt_ in
                     ((u[i, j, s].double(), w[i, j, s].double() / 0.7) for s in range(25))]
            chosen = [s for s in range(25) if s not in picks[i, j].tolist()[:picks[i, j].tolist().index(t)]]
            assert max(gains[s] for s in chosen) == pytest.approx(gains[t])            # it is the best remaining gain
            total += gains[t]; a = a + wt * torch.outer(ut, ut)
        assert selection_logdet(w[i, j], u[i, j], picks[i, j], 0.7).item() == pytest.approx(total)

@pytest.mark.parametrize("seed", range(8))
def test_greedy_vs_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    n, m = 12 + seed % 5, 2 + seed % 3
    w, u = torch.rand(n, generator=g) * 3, torch.randn(n, m, generator=g)
    best1, f1 = brute_force_selection(w, u, 1)
    assert greedy_logdet_selection(w, u, 1).tolist() == best1.tolist()
    for b in (2, 3, 4):
        best, f_opt = brute_force_selection(w, u, b)
        assert selection_logdet(w, u, best).item() == pytest.approx(f_opt)
        brute = max(selection_logdet(w, u, torch.tensor(c)).item() for c in itertools.combinations(range(n), b))
        assert f_opt == pytest.approx(brute)
        f_greedy = selection_logdet(w, u, greedy_logdet_selection(w, u, b)).item()
        assert (1 - 1 / math.e) * f_opt - 1e-9 <= f_greedy <= f_opt + 1e-9

def test_selection_bad_inputs():
    with pytest.raises(ValueError, match="budget must be"): greedy_logdet_selection(torch.rand(4), torch.randn(4, 2), 5)
    with pytest.raises(ValueError, match="budget must be"): greedy_logdet_selection(torch.rand(4), torch.randn(4, 2), True)
    with pytest.raises(ValueError, match="non-negative"): greedy_logdet_selection(-torch.rand(4), torch.randn(4, 2), 2)
    with pytest.raises(ValueError, match="share leading dims"): greedy_logdet_selection(torch.rand(4), torch.randn(5, 2), 2)
    with pytest.raises(ValueError, match="noise_var"): greedy_logdet_selection(torch.rand(4), torch.randn(4, 2), 2, noise_var=0)
    with pytest.raises(ValueError, match="N <= 20"): brute_force_selection(torch.rand(21), torch.randn(21, 2), 2)
    assert greedy_logdet_selection(torch.rand(4), torch.randn(4, 2), 0).shape == (0,)

def test_taylor_error_is_first_order():
    g = torch.Generator().manual_seed(0)          # fixed draws: the ratio's second-order term depends on them
    k, v, mu, dq = (torch.randn(*s, generator=g, **f64) for s in ((15, 6), (15, 4), (6,), (4, 6)))
    e1, e2 = taylor_errors(k, v, mu, mu + 1e-2 * dq), taylor_errors(k, v, mu, mu + 5e-3 * dq)
    torch.testing.assert_close(e2 / e1, torch.full((4,), 0.5, **f64), atol=0.02, rtol=0)
    assert (taylor_errors(k, v, mu, mu + 3 * dq) > e1).all()

def test_cache_capacity_tiny_model():
    from jacap_nb.models import tiny_model
    model = tiny_model()
    pre = capture_prefill(model, torch.randint(3, 120, (1, 10)))
    keys, values = prefill_keys_values(pre)
    queries = prefill_queries(model, pre)
    caps = cache_capacity(keys, values, queries, {1: torch.tensor([[[0, 1, 9], [0, 4, 9]]], dtype=torch.int32)})   # (1, Hkv, B) as saved by bench
    full = cache_capacity(keys, values, queries, {})
    assert set(caps) == {"k", "u", "ku", "jacobian"} and caps["k"].shape == (2, 2)
    torch.testing.assert_close(caps["ku"][0], full["ku"][0])
    assert (caps["ku"][1] < full["ku"][1]).all()
    assert set(cache_capacity(keys, values, None, {})) == {"k", "u", "ku"}
    with pytest.raises(ValueError, match="layer indices"): cache_capacity(keys, values, queries, {2: torch.tensor([[0], [0]])})
    with pytest.raises(ValueError, match="multiple of Hkv"): cache_capacity(keys, values, queries[:, :3], {})
    with pytest.raises(ValueError, match=r"\(L, Hkv, N, d\)"): cache_capacity(keys[0], values[0], queries, {})
    with pytest.raises(ValueError, match="at least 2"): query_stats(queries, start=9)
