"Fast tests of jacap_nb.theory: closed forms against autograd and independent float64 implementations."
import math
import pytest
import torch
from jacap_nb.theory import (softmax_jacobian, attention_probs, attention_jacobian, gaussian_channel_capacity, jacobian_capacity,
                             linear_capacity, auto_noise_var, logdet_increment, capacity_matrix, diagonal_capacity, leverage_scores,
                             sensitivity_weights)

f64 = torch.float64


def _rand(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=g, dtype=f64)


def _spd(d, seed=0):
    r = _rand(d, d, seed=seed)
    return r @ r.mT / d + 0.1 * torch.eye(d, dtype=f64)


def _reference_capacity(J, cov, sigma2):
    "1/2 [logdet(J cov J^T + sigma2 I) - logdet(sigma2 I)] via slogdet: an implementation independent of the library's Cholesky path."
    m = J.shape[-2]
    return 0.5 * (torch.linalg.slogdet(J @ cov @ J.mT + sigma2 * torch.eye(m, dtype=f64)).logabsdet - m * math.log(sigma2))


def test_softmax_jacobian_matches_autograd_and_properties():
    z = _rand(4, 9, seed=1)
    alpha = torch.softmax(z, -1)
    S = softmax_jacobian(alpha)
    ref = torch.stack([torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), zi) for zi in z])
    assert (S - ref).abs().max() < 1e-12
    assert torch.equal(S, S.mT)
    assert torch.linalg.eigvalsh(S).min() > -1e-14
    assert (S.sum(-1)).abs().max() < 1e-15
    torch.testing.assert_close(softmax_jacobian(torch.tensor([0.5, 0.5], dtype=f64)), torch.tensor([[0.25, -0.25], [-0.25, 0.25]], dtype=f64))


@pytest.mark.parametrize("n,d,d_v", [(1, 3, 2), (13, 8, 5), (40, 16, 16)])
def test_attention_jacobian_matches_autograd(n, d, d_v):
    keys, values, q = _rand(n, d, seed=2, scale=1.5), _rand(n, d_v, seed=3), _rand(d, seed=4)
    f = lambda t: values.mT @ torch.softmax(keys @ t / math.sqrt(d), -1)
    ref = torch.autograd.functional.jacobian(f, q)
    J = attention_jacobian(keys, values, q)
    assert J.shape == (d_v, d)
    assert (J - ref).abs().max() < 1e-10


def test_attention_jacobian_broadcasts_gqa_layout():
    keys, values, q = _rand(2, 3, 1, 11, 6, seed=5), _rand(2, 3, 1, 11, 4, seed=6), _rand(2, 3, 5, 6, seed=7)
    J = attention_jacobian(keys, values, q)
    assert J.shape == (2, 3, 5, 4, 6)
    torch.testing.assert_close(J[1, 2, 4], attention_jacobian(keys[1, 2, 0], values[1, 2, 0], q[1, 2, 4]), rtol=0, atol=1e-13)


def test_jacobian_capacity_matches_independent_implementation():
    n, d, d_v = 20, 8, 5
    keys, values, mu = _rand(n, d, seed=8, scale=2.0), _rand(n, d_v, seed=9), _rand(d, seed=10)
    cov = _spd(d, seed=11)
    f = lambda t: values.mT @ torch.softmax(keys @ t / math.sqrt(d), -1)
    J_ref = torch.autograd.functional.jacobian(f, mu)            # independent Jacobian too
    for sigma2 in [1e-3, 0.3, 4.0]:
        got = jacobian_capacity(keys, values, mu, cov, noise_var=sigma2)
        assert got.dtype == f64
        assert abs(got.item() - _reference_capacity(J_ref, cov, sigma2).item()) < 1e-10


def test_capacity_diagonal_covariance_and_batching():
    keys, values, mu = _rand(2, 3, 15, 6, seed=12), _rand(2, 3, 15, 4, seed=13), _rand(2, 3, 6, seed=14)
    var = torch.rand(6, dtype=f64, generator=torch.Generator().manual_seed(0)) + 0.1
    full = jacobian_capacity(keys, values, mu, torch.diag(var), 0.5)
    diag = jacobian_capacity(keys, values, mu, var, 0.5)
    assert full.shape == (2, 3)
    torch.testing.assert_close(full, diag, rtol=0, atol=1e-13)
    torch.testing.assert_close(diag[0, 1], jacobian_capacity(keys[0, 1], values[0, 1], mu[0, 1], var, 0.5), rtol=0, atol=1e-13)
    # a per-batch noise variance tensor broadcasts over the leading dims
    nv = torch.tensor([[0.5, 1.0, 2.0]], dtype=f64)
    per = jacobian_capacity(keys, values, mu, var, nv)
    torch.testing.assert_close(per[1, 2], jacobian_capacity(keys[1, 2], values[1, 2], mu[1, 2], var, 2.0), rtol=0, atol=1e-13)


def test_float32_inputs_give_float64_capacity():
    keys, values, mu = _rand(10, 4, seed=15).float(), _rand(10, 3, seed=16).float(), _rand(4, seed=17).float()
    got = jacobian_capacity(keys, values, mu, torch.ones(4))
    assert got.dtype == f64 and torch.isfinite(got)


def test_linear_capacity_matches_independent_implementation():
    keys, values = _rand(12, 6, seed=18), _rand(12, 4, seed=19)
    cov = _spd(6, seed=20)
    got = linear_capacity(keys, values, cov, noise_var=0.7)
    assert abs(got.item() - _reference_capacity(values.mT @ keys, cov, 0.7).item()) < 1e-10


def test_gaussian_channel_capacity_eigenvalue_example():
    conc = gaussian_channel_capacity(torch.diag(torch.tensor([10.0, 0.0], dtype=f64).sqrt()), torch.ones(2))
    spread = gaussian_channel_capacity(torch.diag(torch.tensor([5.0, 5.0], dtype=f64).sqrt()), torch.ones(2))
    assert abs(2 * conc.item() - math.log(11)) < 1e-12 and abs(2 * spread.item() - math.log(36)) < 1e-12


def test_auto_noise_makes_capacity_value_scale_invariant():
    keys, values, mu = _rand(30, 6, seed=21), _rand(30, 4, seed=22), _rand(6, seed=23)
    var = torch.full((6,), 0.5, dtype=f64)
    a = jacobian_capacity(keys, values, mu, var, "auto")
    b = jacobian_capacity(keys, 7.0 * values, mu, var, "auto")
    assert abs(a.item() - b.item()) < 1e-12
    assert abs(jacobian_capacity(keys, values, mu, var).item() - jacobian_capacity(keys, 7.0 * values, mu, var).item()) > 1e-3


def test_auto_noise_var_formula_floor_and_broadcast():
    w, v = torch.rand(2, 3, 7), torch.randn(3, 7, 5)
    got = auto_noise_var(w, v)
    assert got.shape == (2, 3) and got.dtype == torch.float32
    torch.testing.assert_close(got, (w * v.square().sum(-1)).sum(-1) / 5)
    assert auto_noise_var(torch.zeros(4), torch.randn(4, 3)).item() > 0
    assert auto_noise_var(torch.rand(4, dtype=torch.bfloat16), torch.randn(4, 3, dtype=torch.bfloat16)).dtype == torch.float32
    assert auto_noise_var(torch.rand(4, dtype=f64), torch.randn(4, 3, dtype=f64)).dtype == f64


def test_determinant_lemma_and_ranking():
    A, u = _spd(6, seed=24), _rand(6, seed=25)
    direct = torch.linalg.slogdet(A + 0.7 * torch.outer(u, u)).logabsdet - torch.linalg.slogdet(A).logabsdet
    assert abs(logdet_increment(A, u, 0.7).item() - direct.item()) < 1e-12
    cands, w = _rand(100, 6, seed=26), torch.rand(100, dtype=f64, generator=torch.Generator().manual_seed(1)) * 3
    lev = w * (cands * torch.linalg.solve(A, cands.mT).mT).sum(-1)
    assert torch.equal(lev.argsort(), logdet_increment(A, cands, w).argsort())


def test_leverage_scores_match_explicit_inverse_and_hand_example():
    w, U = torch.rand(9, dtype=f64, generator=torch.Generator().manual_seed(2)), _rand(9, 3, seed=27)
    A = torch.eye(3, dtype=f64) + (U.mT * w / 0.4) @ U
    ref = w / 0.4 * torch.einsum("ni,ij,nj->n", U, torch.linalg.inv(A), U)
    torch.testing.assert_close(capacity_matrix(w, U, 0.4), A, rtol=0, atol=1e-13)
    torch.testing.assert_close(leverage_scores(w, U, 0.4), ref, rtol=1e-12, atol=0)
    assert abs(diagonal_capacity(w, U, 0.4).item() - 0.5 * torch.linalg.slogdet(A).logabsdet.item()) < 1e-12
    U2 = torch.tensor([[1.0, 0.0], [0.95, 0.05], [0.0, 1.0]], dtype=f64)
    w2 = torch.tensor([1.0, 1.0, 0.7], dtype=f64)
    assert sorted(leverage_scores(w2, U2).topk(2).indices.tolist()) == [0, 2]


def test_leverage_auto_is_weight_scale_invariant():
    w, U = torch.rand(50, dtype=f64, generator=torch.Generator().manual_seed(3)) * 1e-5, _rand(50, 8, seed=28)
    torch.testing.assert_close(leverage_scores(1e4 * w, U, "auto"), leverage_scores(w, U, "auto"), rtol=1e-10, atol=0)


def test_sensitivity_weights_formula():
    keys, mu, var = _rand(10, 4, seed=29), _rand(4, seed=30), torch.rand(4, dtype=f64) + 0.1
    a = torch.softmax(keys @ mu / (3.0 * 2.0), -1)
    ref = (a * (1 - a)) ** 2 * (keys.square() * var).sum(-1) / 4
    torch.testing.assert_close(sensitivity_weights(keys, mu, var, tau=3.0), ref, rtol=1e-12, atol=0)
    assert (sensitivity_weights(keys, mu, var) >= 0).all()


def test_errors_name_the_argument():
    keys, values, q = _rand(5, 4), _rand(5, 3), _rand(4)
    with pytest.raises(ValueError, match="values"): attention_jacobian(keys, values[:4], q)
    with pytest.raises(ValueError, match="q must"): attention_jacobian(keys, values, q[:3])
    with pytest.raises(ValueError, match="keys"): attention_jacobian(keys[0], values, q)
    with pytest.raises(ValueError, match="noise_var"): jacobian_capacity(keys, values, q, torch.ones(4), noise_var=0.0)
    with pytest.raises(ValueError, match="noise_var"): jacobian_capacity(keys, values, q, torch.ones(4), noise_var=-1.0)
    with pytest.raises(ValueError, match="noise_var"): linear_capacity(keys, values, torch.ones(4), noise_var="loud")
    with pytest.raises(ValueError, match="q_cov"): jacobian_capacity(keys, values, q, torch.ones(3))
    with pytest.raises(ValueError, match="q_mean"): jacobian_capacity(keys, values, q[:3], torch.ones(4))
    with pytest.raises(ValueError, match="positive semi-definite"): jacobian_capacity(keys, values, q, -100 * torch.eye(4))
    with pytest.raises(ValueError, match="weights"): auto_noise_var(torch.rand(4), torch.randn(5, 3))
    with pytest.raises(ValueError, match="values"): auto_noise_var(torch.rand(5), torch.randn(5))
    with pytest.raises(ValueError, match="weights"): leverage_scores(torch.rand(4, dtype=f64), _rand(5, 3))
    with pytest.raises(ValueError, match="noise_var"): leverage_scores(torch.rand(5, dtype=f64), _rand(5, 3), 0)
    with pytest.raises(ValueError, match="u must"): logdet_increment(torch.eye(3, dtype=f64), torch.ones(2, dtype=f64))
    with pytest.raises(ValueError, match="alpha"): softmax_jacobian(torch.tensor(1.0))
