"""jacap_nb.theory: closed forms against autograd and independent float64 implementations, as grids over shapes and
noise. 00_theory checks the softmax Jacobian, one shape of the attention Jacobian and its GQA broadcast, the
eigenvalue example, the determinant lemma and the "auto" scale invariance; not repeated here."""
import math
import pytest
import torch
from jacap_nb.theory import (softmax_jacobian, attention_probs, attention_jacobian, gaussian_channel_capacity, jacobian_capacity,
                             linear_capacity, auto_noise_var, logdet_increment, reference_capacity_matrix, diagonal_capacity, reference_leverage_scores,
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


@pytest.mark.parametrize("n,d,d_v", [(1, 3, 2), (13, 8, 5), (40, 16, 16)])
def test_attention_jacobian_matches_autograd(n, d, d_v):
    keys, values, q = _rand(n, d, seed=2, scale=1.5), _rand(n, d_v, seed=3), _rand(d, seed=4)
    f = lambda t: values.mT @ torch.softmax(keys @ t / math.sqrt(d), -1)
    ref = torch.autograd.functional.jacobian(f, q)
    J = attention_jacobian(keys, values, q)
    assert J.shape == (d_v, d)
    assert (J - ref).abs().max() < 1e-10


@pytest.mark.parametrize("sigma2", [1e-3, 0.3, 4.0])
@pytest.mark.parametrize("n,d,d_v", [(20, 8, 5), (3, 6, 6), (50, 4, 9)])
def test_jacobian_capacity_matches_independent_implementation(sigma2, n, d, d_v):
    keys, values, mu = _rand(n, d, seed=8, scale=2.0), _rand(n, d_v, seed=9), _rand(d, seed=10)
    cov = _spd(d, seed=11)
    f = lambda t: values.mT @ torch.softmax(keys @ t / math.sqrt(d), -1)
    J_ref = torch.autograd.functional.jacobian(f, mu)            # independent Jacobian too
    got = jacobian_capacity(keys, values, mu, cov, noise_var=sigma2)
    assert got.dtype == f64
    assert abs(got.item() - _reference_capacity(J_ref, cov, sigma2).item()) < 1e-10


def test_per_row_noise_variance_broadcasts():
    "A tensor noise variance, one per (batch, head) row, broadcasts over the leading dims."
    keys, values, mu = _rand(2, 3, 15, 6, seed=12), _rand(2, 3, 15, 4, seed=13), _rand(2, 3, 6, seed=14)
    var = torch.rand(6, dtype=f64, generator=torch.Generator().manual_seed(0)) + 0.1
    nv = torch.tensor([[0.5, 1.0, 2.0]], dtype=f64)
    per = jacobian_capacity(keys, values, mu, var, nv)
    for b in range(2):
        for h in range(3):
            torch.testing.assert_close(per[b, h], jacobian_capacity(keys[b, h], values[b, h], mu[b, h], var, float(nv[0, h])), rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_inputs_give_float64(dtype):
    keys, values, mu = (_rand(10, 4, seed=15).to(dtype), _rand(10, 3, seed=16).to(dtype), _rand(4, seed=17).to(dtype))
    w = torch.rand(10, dtype=dtype, generator=torch.Generator().manual_seed(4))
    for got in (jacobian_capacity(keys, values, mu, torch.ones(4)), linear_capacity(keys, values, torch.ones(4)),
                reference_leverage_scores(w, values), diagonal_capacity(w, values), reference_capacity_matrix(w, values),
                sensitivity_weights(keys, mu, torch.ones(4))):
        assert got.dtype == f64 and torch.isfinite(got).all()
    assert auto_noise_var(w, values).dtype == (torch.float32 if dtype != torch.float64 else f64)


@pytest.mark.parametrize("cov", ["full", "diagonal"])
@pytest.mark.parametrize("noise_var", [0.7, "auto"])
def test_linear_capacity_matches_independent_implementation(cov, noise_var):
    keys, values = _rand(12, 6, seed=18), _rand(12, 4, seed=19)
    c = _spd(6, seed=20) if cov == "full" else torch.diag(torch.rand(6, dtype=f64, generator=torch.Generator().manual_seed(5)) + 0.1)
    J = values.mT @ keys
    s2 = noise_var if noise_var != "auto" else float(torch.trace(J @ c @ J.mT)) / 4      # mean eigenvalue of J Lambda J^T
    got = linear_capacity(keys, values, c if cov == "full" else c.diagonal(), noise_var=noise_var)
    assert abs(got.item() - _reference_capacity(J, c, s2).item()) < 1e-10


@pytest.mark.parametrize("noise_var", [0.4, 3.0, "auto"])
@pytest.mark.parametrize("n,m", [(9, 3), (2, 5), (40, 8)])
def test_leverage_scores_match_explicit_inverse(noise_var, n, m):
    w, U = torch.rand(n, dtype=f64, generator=torch.Generator().manual_seed(n)), _rand(n, m, seed=27)
    s2 = float((w * U.square().sum(-1)).sum()) / m if noise_var == "auto" else noise_var
    A = torch.eye(m, dtype=f64) + (U.mT * w / s2) @ U
    ref = w / s2 * torch.einsum("ni,ij,nj->n", U, torch.linalg.inv(A), U)
    torch.testing.assert_close(reference_capacity_matrix(w, U, noise_var), A, rtol=0, atol=1e-12)
    torch.testing.assert_close(reference_leverage_scores(w, U, noise_var), ref, rtol=1e-10, atol=0)
    assert abs(diagonal_capacity(w, U, noise_var).item() - 0.5 * torch.linalg.slogdet(A).logabsdet.item()) < 1e-12


@pytest.mark.parametrize("tau", [0.5, 1.0, 3.0, 10.0])
def test_sensitivity_weights_formula(tau):
    keys, mu, var = _rand(10, 4, seed=29), _rand(4, seed=30), torch.rand(4, dtype=f64) + 0.1
    a = torch.softmax(keys @ mu / (tau * 2.0), -1)
    ref = (a * (1 - a)) ** 2 * (keys.square() * var).sum(-1) / 4
    torch.testing.assert_close(sensitivity_weights(keys, mu, var, tau=tau), ref, rtol=1e-12, atol=0)
    assert (sensitivity_weights(keys, mu, var, tau=tau) >= 0).all()


_K, _V, _Q = _rand(5, 4), _rand(5, 3), _rand(4)
ERRORS = {   # the ones 00_theory does not check already
    "keys 1-D": (lambda: attention_jacobian(_K[0], _V, _Q), "keys"),
    "linear noise str": (lambda: linear_capacity(_K, _V, torch.ones(4), noise_var="loud"), "noise_var"),
    "capacity noise < 0": (lambda: jacobian_capacity(_K, _V, _Q, torch.ones(4), noise_var=-1.0), "noise_var"),
    "not PSD": (lambda: jacobian_capacity(_K, _V, _Q, -100 * torch.eye(4)), "positive semi-definite"),
    "leverage weights N": (lambda: reference_leverage_scores(torch.rand(4, dtype=f64), _rand(5, 3)), "weights"),
    "leverage noise 0": (lambda: reference_leverage_scores(torch.rand(5, dtype=f64), _rand(5, 3), 0), "noise_var"),
    "leverage vectors 1-D": (lambda: reference_leverage_scores(torch.rand(5, dtype=f64), _rand(5)), "vectors"),
    "increment u": (lambda: logdet_increment(torch.eye(3, dtype=f64), torch.ones(2, dtype=f64)), "u must"),
    "increment a": (lambda: logdet_increment(torch.ones(3, 2, dtype=f64), torch.ones(2, dtype=f64)), "a must be a square"),
    "alpha scalar": (lambda: softmax_jacobian(torch.tensor(1.0)), "alpha"),
    "sensitivity q_var": (lambda: sensitivity_weights(_K, _Q, torch.ones(3)), "q_var"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_argument(case):
    fn, match = ERRORS[case]
    with pytest.raises(ValueError, match=match): fn()
