"Tests of jacap_nb.stats: masked moments, RoPE mixture, EMA, row separation."
import pytest, torch
from jacap_nb.stats import QueryStats, ema_update, rope_mixture, stats_mask, masked_moments


def test_rows_and_padding_never_mix():
    g = torch.Generator().manual_seed(0)
    qa, qb = torch.randn(1, 3, 7, 4, generator=g), torch.randn(1, 3, 4, 4, generator=g)
    batch = torch.cat([qa, torch.cat([torch.full((1, 3, 3, 4), 1e3), qb], 2)])
    valid = torch.tensor([[1] * 7, [0] * 3 + [1] * 4]).bool()
    sb = QueryStats.from_queries(batch, valid, skip=1, window=3)
    torch.testing.assert_close(sb.mean[0], qa[0, :, -3:].mean(1)); torch.testing.assert_close(sb.mean[1], qb[0, :, -3:].mean(1))
    assert (sb.var >= sb.eps).all()


def test_ema_matches_formula_and_skips_padding():
    g = torch.Generator().manual_seed(1)
    st = QueryStats.from_queries(torch.randn(2, 2, 5, 4, generator=g))
    q = torch.randn(2, 2, 1, 4, generator=g)
    new = ema_update(st, q, beta=0.8, valid=torch.tensor([[True], [False]]))
    torch.testing.assert_close(new.mean[0], 0.8 * st.mean[0] + 0.2 * q[0, :, 0])
    torch.testing.assert_close(new.second[0], 0.8 * st.second[0] + 0.2 * q[0, :, 0] ** 2)
    assert torch.equal(new.mean[1], st.mean[1])
    with pytest.raises(ValueError, match="beta"): ema_update(st, q, beta=0)


def test_rope_mixture_single_position_is_plain_rotation():
    g = torch.Generator().manual_seed(2)
    mean, var = torch.randn(1, 2, 8, generator=g), torch.rand(1, 2, 8, generator=g)
    ang = torch.rand(1, 1, 4, generator=g) * 6
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    mu, lam = rope_mixture(mean, var, cos, sin, eps=0.0)
    x1, x2 = mean.chunk(2, -1)
    torch.testing.assert_close(mu, mean * cos + torch.cat([-x2, x1], -1) * sin)
    v1, v2 = var.chunk(2, -1)
    torch.testing.assert_close(lam, cos ** 2 * var + sin ** 2 * torch.cat([v2, v1], -1), atol=1e-5, rtol=1e-5)


def test_stats_mask_and_bad_window():
    valid = torch.tensor([[0, 1, 1, 1, 1]]).bool()
    assert stats_mask(valid, skip=1, window=2).long().tolist() == [[0, 0, 0, 1, 1]]
    with pytest.raises(ValueError, match="window"): stats_mask(valid, window=0)
    with pytest.raises(ValueError, match="frame"): QueryStats.from_queries(torch.zeros(1, 1, 2, 2), frame="x")
