"""Every Triton kernel of jacap_nb.kernels against its torch reference (jacap_nb.scoring), in Triton's interpreter on CPU,
as grids over N, d, G, dtypes and layouts (03_kernels checks one diagonal of these grids and the real-cache kept sets).

Triton decides at decoration time whether a kernel is interpreted, so TRITON_INTERPRET must be set before
jacap_nb.kernels is first imported: run this file in its own process, `TRITON_INTERPRET=1 python -m pytest tests/test_kernels.py`.
When another test file imported jacap_nb.kernels first (compiled kernels, no GPU), the interpreter tests skip themselves.
"""
import os
import torch
if not torch.cuda.is_available(): os.environ["TRITON_INTERPRET"] = "1"   # before triton / jacap_nb.kernels are imported
import math, warnings
import pytest
import torch.nn.functional as F
from jacap_nb import scoring
import jacap_nb.kernels as K

interpreted = pytest.mark.skipif(K.available() != "triton-interpreter",
    reason="jacap_nb.kernels was imported without TRITON_INTERPRET=1: run this file in its own pytest process")

DTYPES = [torch.float32, torch.bfloat16]
TAU = {"jacap": 10.0, "capkv": 5.0}


def assert_close(ours, ref, tol=1e-4):
    "The interpreter computes in float32 on upcast inputs, like the reference: float32 rounding for every input dtype."
    torch.testing.assert_close(ours, ref, rtol=tol, atol=tol * ref.abs().max().item())


def make(r, n, d, g, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(r, n, d, generator=gen).to(dtype)
    v = torch.randn(r, n, d, generator=gen).to(dtype)
    return k, v, 2 * torch.randn(r, g, d, generator=gen), torch.rand(r, g, d, generator=gen)


def ref_weights(method, k, q, qv, tau):
    return scoring.jacap_weights(k[:, None], q, qv, tau) if method == "jacap" else scoring.capkv_weights(k[:, None], q, tau)


def public(method, *args, backend, **kw):
    "The one public entry point per method: jacap_nb.scoring.{jacap,capkv}_scores(..., backend=...)."
    return getattr(scoring, f"{method}_scores")(*args, backend=backend, **kw)


@interpreted
def test_interpreter_is_active():
    from triton.runtime.interpreter import InterpretedFunction
    assert isinstance(K._gram_kernel, InterpretedFunction)


@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("n", [1, 17, 600])
@pytest.mark.parametrize("block_n,chunk", [(64, 192), (16, 48), (None, None)])
def test_softmax_stats(method, n, block_n, chunk):
    k, _, q, _ = make(2, n, 64, 3, torch.bfloat16)
    m, l = K.softmax_stats(k, q, method, TAU[method], block_n=block_n, chunk=chunk)
    kf = k.float()
    if method == "jacap": z = torch.einsum('rnd,rgd->rgn', kf, q) / (TAU[method] * math.sqrt(64))
    else: z = TAU[method] * torch.einsum('rnd,rgd->rgn', F.normalize(kf, dim=-1), F.normalize(q, dim=-1)).clamp(-1, 1)
    torch.testing.assert_close(m, z.amax(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(l, torch.exp(z - z.amax(-1, keepdim=True)).sum(-1), rtol=1e-4, atol=1e-5)


@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("n,d,g", [(17, 64, 3), (1000, 128, 8), (300, 32, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_weighted_gram(method, n, d, g, dtype):
    k, v, q, qv = make(1, n, d, g, dtype)
    var = qv if method == "jacap" else None
    m, l = K.softmax_stats(k, q, method, TAU[method])
    gram = K.weighted_gram(k, v, q, var, method, TAU[method], m, l, block_n=64, chunk=256)   # several splits: atomic adds
    ref = torch.einsum('rgn,rni,rnj->rgij', ref_weights(method, k, q, qv, TAU[method]), v.float(), v.float())
    assert_close(gram, ref)


@pytest.mark.parametrize("noise_var", [1.0, 0.5, 1e-3, "auto"])
@pytest.mark.parametrize("dv", [1, 16, 64])
def test_capacity_factor(noise_var, dv):
    s = torch.randn(2, 3, dv, dv, generator=torch.Generator().manual_seed(dv)); gram = s @ s.transpose(-1, -2)
    linv, inv_noise, info = K.capacity_factor(gram, noise_var)
    s2 = gram.diagonal(dim1=-2, dim2=-1).sum(-1) / dv if noise_var == "auto" else torch.full((2, 3), noise_var)
    a = torch.eye(dv) + gram / s2[..., None, None]
    assert (info == 0).all()
    torch.testing.assert_close(inv_noise, 1 / s2)
    torch.testing.assert_close(linv @ a @ linv.transpose(-1, -2), torch.eye(dv).expand(2, 3, dv, dv), atol=1e-3, rtol=0)
    assert (linv.triu(1) == 0).all()                               # lower triangular


@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("linv_rows", [None, 16])
@pytest.mark.parametrize("noise_var", [1.0, "auto"])
def test_leverage_pass(method, linv_rows, noise_var):
    k, v, q, qv = make(2, 1000, 64, 3, torch.bfloat16)
    var = qv if method == "jacap" else None
    nv = noise_var if method == "jacap" else 1.0
    m, l = K.softmax_stats(k, q, method, TAU[method])
    linv, inv_noise, _ = K.capacity_factor(K.weighted_gram(k, v, q, var, method, TAU[method], m, l), nv)
    r = K.leverage_pass(k, v, q, var, method, TAU[method], m, l, linv, inv_noise, linv_rows=linv_rows)
    ref = (scoring.jacap_scores(k[:, None], v[:, None], q, qv, TAU[method], nv, backend="torch") if method == "jacap"
           else scoring.capkv_scores(k[:, None], v[:, None], q, TAU[method], backend="torch"))
    assert_close(r, ref)


@interpreted
@pytest.mark.parametrize("n", [1, 17, 1000])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("g", [1, 3, 8])
@pytest.mark.parametrize("dtype", DTYPES)
def test_public_scores_match_the_torch_backend(n, d, g, dtype):
    "backend='triton' vs 'torch' on the cache hook's layout: keys (B, Hkv, 1, N, d) stride-0 views, statistics (B, Hkv, G, d)."
    h = 2 if n < 1000 else 1   # two KV heads where it is cheap; the interpreter's cost grows with heads x G x N
    k, v, q, qv = make(h, n, d, g, dtype, seed=n + d + g)
    keys, values = k.view(1, h, 1, n, d), v.view(1, h, 1, n, d)
    mu, var = q.view(1, h, g, d), qv.view(1, h, g, d)
    nv = "auto" if (n + g) % 2 else 1.0
    for method, args, kw in (("jacap", (keys, values, mu, var), dict(noise_var=nv)), ("capkv", (keys, values, mu), {})):
        ours, ref = public(method, *args, backend="triton", **kw), public(method, *args, backend="torch", **kw)
        assert ours.shape == (1, h, g, n) and ours.dtype == torch.float32
        assert_close(ours, ref)


LAYOUTS = {
    "per-query-head keys": lambda k, v, q, qv: ((k[:, None].expand(3, 2, 200, 64).contiguous(), v[:, None].expand(3, 2, 200, 64).contiguous(), q, qv)),
    "no leading dims": lambda k, v, q, qv: (k[0], v[0], q[0, 0], qv[0, 0]),
    "slice of a longer cache": lambda k, v, q, qv: (torch.cat([k, k[:, :100]], 1)[:, None, :200], v[:, None], q, qv),
    "batch of KV heads": lambda k, v, q, qv: (k.view(3, 1, 1, 200, 64), v.view(3, 1, 1, 200, 64), q.view(3, 1, 2, 64), qv.view(3, 1, 2, 64)),
}


@interpreted
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_other_layouts_take_the_kernels(layout, dtype):
    k, v, q, qv = make(3, 200, 64, 2, dtype)
    keys, values, mu, var = LAYOUTS[layout](k, v, q, qv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # the Triton path, not the warned fallback to the reference
        for method, args in (("jacap", (keys, values, mu, var)), ("capkv", (keys, values, mu))):
            assert_close(public(method, *args, backend="triton"), public(method, *args, backend="torch"))


@interpreted
@pytest.mark.parametrize("case,warning", [("float64", "float64"), ("keys broadcast over the batch", "layout")])
def test_fallback_to_the_reference_warns_once(case, warning):
    k, v, q, qv = make(2, 50, 64, 4, torch.float32)
    if case == "float64": keys, values, mu = k[:, None].double(), v[:, None].double(), q
    else: keys, values, mu = torch.randn(1, 2, 1, 50, 64), torch.randn(1, 2, 1, 50, 64), torch.randn(2, 2, 4, 64)
    K._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            torch.testing.assert_close(public("capkv", keys, values, mu, backend="triton"), public("capkv", keys, values, mu, backend="torch"))
    assert sum(warning in str(w.message) for w in caught) == 1


def _error_cases():
    k, v, q, qv = make(2, 50, 64, 4, torch.float32)
    keys, values = k[:, None], v[:, None]
    bad = values.clone(); bad[0, 0, 7, 3] = float("inf")
    return {
        "q_var < 0": (lambda: public("jacap", keys, values, q, -qv, backend="triton"), ValueError, "q_var must be non-negative"),
        "values N": (lambda: public("capkv", keys, values[..., :40, :], q, backend="triton"), ValueError, "values must have shape"),
        "q_mean d": (lambda: public("capkv", keys, values, q[..., :32], backend="triton"), ValueError, "q_mean must have shape"),
        "tau": (lambda: public("capkv", keys, values, q, tau=-1.0, backend="triton"), ValueError, "tau"),
        "noise_var": (lambda: public("jacap", keys, values, q, qv, noise_var="x", backend="triton"), ValueError, "noise_var"),
        "strided last dim": (lambda: public("capkv", keys.transpose(-1, -2).contiguous().transpose(-1, -2), values, q, backend="triton"),
                             ValueError, "contiguous last dimension"),
        "int values": (lambda: K.weighted_gram(k, v.int(), q, None, "capkv", 5.0, *K.softmax_stats(k, q, "capkv", 5.0)),
                       ValueError, "values must be float32"),
        "method": (lambda: K.softmax_stats(k, q, "snapkv", 1.0), ValueError, "method"),
        "q_mean float64": (lambda: K.softmax_stats(k, q.double(), "capkv", 1.0), ValueError, "q_mean must be a contiguous float32"),
        "rows mismatch": (lambda: K.softmax_stats(k, q[:1], "capkv", 1.0), ValueError, "q_mean must be"),
        "inf value": (lambda: public("jacap", keys, bad, q, qv, backend="triton"), ValueError, "finite"),
    }


@interpreted
@pytest.mark.parametrize("case", list(_error_cases()))
def test_bad_input_is_named(case):
    fn, exc, match = _error_cases()[case]
    with pytest.raises(exc, match=match):
        fn()


@interpreted
def test_failed_factorisation_raises_linalg_error(monkeypatch):
    "A failed Cholesky raises the torch path's error type, so the cache hook falls back instead of crashing."
    k, v, q, qv = make(2, 50, 64, 4, torch.float32)
    real = K.capacity_factor
    def failing(gram, noise_var=1.0):
        linv, inv_noise, info = real(gram, noise_var); return linv, inv_noise, torch.ones_like(info)
    monkeypatch.setattr(K, "capacity_factor", failing)
    with pytest.raises(torch.linalg.LinAlgError, match="Cholesky"): public("jacap", k[:, None], v[:, None], q, qv, backend="triton")


@pytest.mark.parametrize("n,rows,block_n,chunk,want", [(1000, 2, 64, 192, ([64], 192, 6)), (1, 2, 16, 100, ([16], 16, 1)),
                                                        (1000, 2, 64, 30, ([64], 64, 16)), (50, 1, 16, 10_000, ([16], 64, 1))])
def test_plan_splits(n, rows, block_n, chunk, want):
    "Chunks are whole blocks, never longer than the cache's last block, and cover N."
    blocks, ch, n_split = K._plan(n, rows, torch.device("cpu"), block_n=block_n, chunk=chunk)
    assert (blocks, ch, n_split) == want
    assert ch % blocks[0] == 0 and n_split * ch >= n > (n_split - 1) * ch


@interpreted
def test_gpu_cell_on_cpu(capsys):
    "03_kernels' `#| gpu` cell as written, on the CPU under the interpreter, with CPU-sized N (tests/test_gpu_cells.py covers the others)."
    import json, pathlib, re
    nb = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'nbs' / '03_kernels.ipynb').read_text())
    cells = [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code']
    (src,) = [s for s in cells if re.search(r'^#\|\s*gpu\s*$', s, re.M)]
    for a, b in {'device="cuda"': 'device="cpu"', '(1000, 64, 8), (32768, 128, 4)': '(40, 64, 8), (96, 128, 4)'}.items():
        assert a in src, f'the gpu cell no longer contains {a!r}: update this test'
        src = src.replace(a, b)
    max_rel_err = lambda a, b: ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()   # the notebook's helper
    exec(compile(src, '03_kernels:gpu', 'exec'), dict(torch=torch, scoring=scoring, max_rel_err=max_rel_err))
    out = capsys.readouterr().out
    assert out.count('kept overlap') == 3 * 4 * 2, out


@interpreted
def test_triton_scores_without_a_reference_says_so():
    "kernels.triton_scores imports no scorer: inputs the kernels do not take go to the `reference` it is given, or raise."
    k, v, q, qv = make(1, 20, 64, 2, torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="no torch reference was given"):
            K.triton_scores(k.double()[:, None], v.double()[:, None], q, qv, "jacap", 10.0)
        ref = scoring.jacap_scores(k.double()[:, None], v.double()[:, None], q, qv, backend="torch")
        got = K.triton_scores(k.double()[:, None], v.double()[:, None], q, qv, "jacap", 10.0,
                              reference=lambda: scoring.jacap_scores(k.double()[:, None], v.double()[:, None], q, qv, backend="torch"))
    assert torch.equal(got, ref)
