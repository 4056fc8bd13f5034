"""jacap_nb.stats (and the StatsConfig of jacap_nb.cache) as grids. 02_stats checks the masks and moments on one
example, the RoPE mixture by Monte Carlo, one EMA step and one padded batch; not repeated here."""
import pytest, torch
from jacap_nb.stats import QueryStats, ema_update, rope_mixture, stats_mask
from jacap_nb.view import StatsConfig


def _ref_mask(valid, skip, window):
    "Loop version: per row, the real tokens ranked 1..R; keep rank > skip and rank > R - window."
    out = torch.zeros_like(valid)
    for b in range(valid.shape[0]):
        idx = valid[b].nonzero().flatten().tolist()
        for r, i in enumerate(idx, 1):
            out[b, i] = r > skip and (window is None or r > len(idx) - window)
    return out


@pytest.mark.parametrize("skip", [0, 1, 3, 10])
@pytest.mark.parametrize("window", [None, 1, 2, 5])
def test_stats_mask_matches_loops(skip, window):
    valid = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1]]).bool()
    assert torch.equal(stats_mask(valid, skip, window), _ref_mask(valid, skip, window))


@pytest.mark.parametrize("skip", [0, 1, 3])
@pytest.mark.parametrize("window", [None, 2, 5])
@pytest.mark.parametrize("frame", ["pre", "post"])
def test_padded_rows_equal_rows_alone(skip, window, frame):
    "A row's statistics computed in a left-padded batch equal those of the row alone; padding values never leak."
    g = torch.Generator().manual_seed(skip * 10 + (window or 0))
    qa, qb = torch.randn(1, 3, 9, 4, generator=g), torch.randn(1, 3, 6, 4, generator=g)
    batch = torch.cat([qa, torch.cat([torch.full((1, 3, 3, 4), 1e3), qb], 2)])
    valid = torch.tensor([[1] * 9, [0] * 3 + [1] * 6]).bool()
    sb = QueryStats.from_queries(batch, valid, skip=skip, window=window, frame=frame)
    for row, alone in ((0, qa), (1, qb)):
        sa = QueryStats.from_queries(alone, skip=skip, window=window, frame=frame)
        torch.testing.assert_close(sb.mean[row], sa.mean[0]); torch.testing.assert_close(sb.var[row], sa.var[0])
        assert sb.count[row] == sa.count[0]
    assert sb.frame == frame and (sb.var >= sb.eps).all()


def test_rows_too_short_for_skip_use_all_their_real_tokens():
    q = torch.randn(2, 1, 5, 4)
    valid = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 1, 1]]).bool()
    st = QueryStats.from_queries(q, valid, skip=3)
    torch.testing.assert_close(st.mean[0], q[0, :, 3:].mean(1))
    torch.testing.assert_close(st.mean[1], q[1, :, 3:].mean(1))          # 2 real tokens <= skip: both are used
    assert st.count.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("t", [1, 3, 7])
@pytest.mark.parametrize("beta", [0.5, 0.9, 0.99])
def test_ema_over_several_tokens_equals_one_at_a_time(t, beta):
    g = torch.Generator().manual_seed(t)
    st = QueryStats.from_queries(torch.randn(2, 2, 5, 4, generator=g), recent=torch.randn(2, 2, 4, 4, generator=g))
    q, qp = torch.randn(2, 2, t, 4, generator=g), torch.randn(2, 2, t, 4, generator=g)
    valid = torch.rand(2, t, generator=g) > 0.3
    once = ema_update(st, q, beta, valid, qp)
    step = st
    for i in range(t): step = ema_update(step, q[:, :, i:i + 1], beta, valid[:, i:i + 1], qp[:, :, i:i + 1])
    torch.testing.assert_close(once.mean, step.mean); torch.testing.assert_close(once.second, step.second)
    assert torch.equal(once.count, st.count + valid.sum(-1).float())
    # the recent buffer keeps its width and rolls in the new post-RoPE queries (padding included: it is per position)
    assert once.recent.shape == st.recent.shape
    torch.testing.assert_close(once.recent, torch.cat([st.recent, qp], 2)[:, :, -4:])


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


@pytest.mark.parametrize("fn,match", [
    (lambda: stats_mask(torch.ones(1, 3, dtype=torch.bool), window=0), "window must be an int >= 1"),
    (lambda: QueryStats.from_queries(torch.zeros(1, 1, 2, 2), frame="x"), 'frame must be "pre" or "post"'),
    (lambda: ema_update(QueryStats.from_queries(torch.zeros(1, 1, 2, 2)), torch.zeros(1, 1, 1, 2), beta=1.0), "beta must be a float in"),
    (lambda: ema_update(QueryStats.from_queries(torch.zeros(1, 1, 2, 2)), torch.zeros(1, 1, 1, 2), beta=0), "beta must be a float in")])
def test_stats_errors(fn, match):
    with pytest.raises(ValueError, match=match): fn()


@pytest.mark.parametrize("kw,exc,match", [
    (dict(window=0), ValueError, "window must be an int >= 1"), (dict(window=2.5), TypeError, "window must be an int"),
    (dict(frame="both"), ValueError, 'frame must be "pre" or "post"'), (dict(rope_horizon=0), ValueError, "rope_horizon"),
    (dict(recent=0), ValueError, "recent must be an int >= 1"), (dict(skip=-1), ValueError, "skip must be an int >= 0"),
    (dict(beta=1.0), ValueError, r"beta must be a float in \(0, 1\)"), (dict(beta=1), ValueError, "beta must be a float"),
    (dict(skip=True), TypeError, "skip must be an int")])
def test_stats_config_is_checked(kw, exc, match):
    with pytest.raises(exc, match=match): StatsConfig(**kw)
    assert StatsConfig(window=None).window is None
