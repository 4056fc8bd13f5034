"""Every Triton kernel of jacap_nb.kernels against its torch reference (jacap_nb.scoring), in Triton's interpreter on CPU.

Triton decides at decoration time whether a kernel is interpreted, so TRITON_INTERPRET must be set before
jacap_nb.kernels is first imported: run this file in its own process, `TRITON_INTERPRET=1 python -m pytest tests/test_kernels.py`.
When another test file imported jacap_nb.kernels first (compiled kernels, no GPU), the interpreter tests skip themselves.
On a CUDA machine the variable is left unset: the compiled kernels are tested by the `gpu` test instead.
"""
import os
import torch
if not torch.cuda.is_available(): os.environ["TRITON_INTERPRET"] = "1"   # before triton / jacap_nb.kernels are imported
import math, time, warnings
import pytest
import torch.nn.functional as F
from jacap_nb import scoring
import jacap_nb.kernels as K

interpreted = pytest.mark.skipif(K.available() != "triton-interpreter",
    reason="jacap_nb.kernels was imported without TRITON_INTERPRET=1: run this file in its own pytest process")

DTYPES = [torch.float32, torch.bfloat16]
RTOL = {torch.float32: 1e-4, torch.bfloat16: 1e-4, torch.float16: 1e-4}   # interpreter: fp32 math on upcast inputs, like the reference

def rel_err(a, b): return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()

def assert_close(ours, ref, dtype):
    tol = RTOL[dtype]
    torch.testing.assert_close(ours, ref, rtol=tol, atol=tol * ref.abs().max().item())

def make(r, n, d, g, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(r, n, d, generator=gen).to(dtype)
    v = torch.randn(r, n, d, generator=gen).to(dtype)
    return k, v, 2 * torch.randn(r, g, d, generator=gen), torch.rand(r, g, d, generator=gen)

def ref_weights(method, k, q, qv, tau):
    return (scoring.jacap_weights(k[:, None], q, qv, tau) if method == "jacap" else scoring.capkv_weights(k[:, None], q, tau))

TAU = {"jacap": 10.0, "capkv": 5.0}

@interpreted
def test_interpreter_is_active():
    from triton.runtime.interpreter import InterpretedFunction
    assert isinstance(K._gram_kernel, InterpretedFunction)

@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("n", [1, 17, 1000])
def test_softmax_stats(method, n):
    k, _, q, _ = make(2, n, 64, 3, torch.bfloat16)
    m, l = K.softmax_stats(k, q, method, TAU[method], block_n=64, chunk=192)
    kf = k.float()
    if method == "jacap": z = torch.einsum('rnd,rgd->rgn', kf, q) / (TAU[method] * math.sqrt(64))
    else: z = TAU[method] * torch.einsum('rnd,rgd->rgn', F.normalize(kf, dim=-1), F.normalize(q, dim=-1)).clamp(-1, 1)
    torch.testing.assert_close(m, z.amax(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(l, torch.exp(z - z.amax(-1, keepdim=True)).sum(-1), rtol=1e-4, atol=1e-5)

@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("n,d,g", [(17, 64, 3), (1000, 128, 8)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_weighted_gram(method, n, d, g, dtype):
    k, v, q, qv = make(1, n, d, g, dtype)
    var = qv if method == "jacap" else None
    m, l = K.softmax_stats(k, q, method, TAU[method])
    gram = K.weighted_gram(k, v, q, var, method, TAU[method], m, l, block_n=64, chunk=256)   # 4 splits -> atomic adds
    ref = torch.einsum('rgn,rni,rnj->rgij', ref_weights(method, k, q, qv, TAU[method]), v.float(), v.float())
    assert_close(gram, ref, dtype)

def test_capacity_factor():
    s = torch.randn(2, 3, 16, 16); gram = s @ s.transpose(-1, -2)
    for nv in (1.0, 0.5, "auto"):
        linv, inv_noise, info = K.capacity_factor(gram, nv)
        s2 = gram.diagonal(dim1=-2, dim2=-1).sum(-1) / 16 if nv == "auto" else torch.full((2, 3), nv)
        a = torch.eye(16) + gram / s2[..., None, None]
        assert (info == 0).all()
        torch.testing.assert_close(inv_noise, 1 / s2)
        torch.testing.assert_close(linv @ a @ linv.transpose(-1, -2), torch.eye(16).expand(2, 3, 16, 16), atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="noise_var"): K.capacity_factor(gram, "big")

@interpreted
@pytest.mark.parametrize("method", ["jacap", "capkv"])
@pytest.mark.parametrize("linv_rows", [None, 16])
def test_leverage_pass(method, linv_rows):
    k, v, q, qv = make(2, 1000, 64, 3, torch.bfloat16)
    var = qv if method == "jacap" else None
    m, l = K.softmax_stats(k, q, method, TAU[method])
    linv, inv_noise, _ = K.capacity_factor(K.weighted_gram(k, v, q, var, method, TAU[method], m, l), 1.0)
    r = K.leverage_pass(k, v, q, var, method, TAU[method], m, l, linv, inv_noise, linv_rows=linv_rows)
    ref = (scoring.jacap_scores(k[:, None], v[:, None], q, qv, TAU[method]) if method == "jacap"
           else scoring.capkv_scores(k[:, None], v[:, None], q, TAU[method]))
    assert_close(r, ref, torch.bfloat16)

@interpreted
@pytest.mark.parametrize("n", [1, 17, 1000])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("g", [1, 3, 8])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scores_match_reference(n, d, g, dtype):
    "The public scorers on the cache hook's layout: keys (B, Hkv, 1, N, d) stride-0 views, statistics (B, Hkv, G, d)."
    h = 2 if n < 1000 else 1   # two KV heads where it is cheap; the interpreter's cost grows with heads x G x N
    k, v, q, qv = make(h, n, d, g, dtype, seed=n + d + g)
    keys, values = k.view(1, h, 1, n, d), v.view(1, h, 1, n, d)
    mu, var = q.view(1, h, g, d), qv.view(1, h, g, d)
    nv = "auto" if (n + g) % 2 else 1.0
    for ours, ref in ((K.jacap_scores(keys, values, mu, var, noise_var=nv), scoring.jacap_scores(keys, values, mu, var, noise_var=nv)),
                      (K.capkv_scores(keys, values, mu), scoring.capkv_scores(keys, values, mu))):
        assert ours.shape == (1, h, g, n) and ours.dtype == torch.float32
        assert_close(ours, ref, dtype)

@interpreted
def test_float16_and_other_layouts():
    k, v, q, qv = make(3, 200, 64, 2, torch.float16)
    # per-query-head keys (no sharing): every leading index is a row
    kk, vv = k[:, None].expand(3, 2, 200, 64).contiguous(), v[:, None].expand(3, 2, 200, 64).contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # must take the Triton path, not the warned fallback
        assert_close(K.capkv_scores(kk, vv, q), scoring.capkv_scores(kk, vv, q), torch.float16)
    # no leading dims
    assert_close(K.jacap_scores(k[0], v[0], q[0, 0], qv[0, 0]), scoring.jacap_scores(k[0], v[0], q[0, 0], qv[0, 0]), torch.float16)
    # a slice of a longer cache (N stride > d) is used in place
    big = torch.randn(3, 1, 300, 64).half()
    assert_close(K.capkv_scores(big[..., :200, :], v[:, None], q), scoring.capkv_scores(big[..., :200, :], v[:, None], q), torch.float16)

@interpreted
def test_fallbacks_and_errors():
    k, v, q, qv = make(2, 50, 64, 4, torch.float32)
    keys, values = k[:, None], v[:, None]
    with pytest.raises(ValueError, match="q_var must be non-negative"): K.jacap_scores(keys, values, q, -qv)
    with pytest.raises(ValueError, match="values must have shape"): K.capkv_scores(keys, values[..., :40, :], q)
    with pytest.raises(ValueError, match="q_mean must have shape"): K.capkv_scores(keys, values, q[..., :32])
    with pytest.raises(ValueError, match="tau"): K.capkv_scores(keys, values, q, tau=-1.0)
    with pytest.raises(ValueError, match="noise_var"): K.jacap_scores(keys, values, q, qv, noise_var="x")
    with pytest.raises(ValueError, match="contiguous last dimension"):
        K.capkv_scores(keys.transpose(-1, -2).contiguous().transpose(-1, -2), values, q)
    with pytest.raises(ValueError, match="values must be float32"): K.weighted_gram(k, v.int(), q, None, "capkv", 5.0, *K.softmax_stats(k, q, "capkv", 5.0))
    with pytest.raises(ValueError, match="method"): K.softmax_stats(k, q, "snapkv", 1.0)
    bad = values.clone(); bad[0, 0, 7, 3] = float("inf")
    with pytest.raises(ValueError, match="finite"): K.jacap_scores(keys, bad, q, qv)
    with warnings.catch_warnings(record=True) as caught:   # float64 -> the reference, with a warning
        warnings.simplefilter("always"); K._warned.clear()
        torch.testing.assert_close(K.capkv_scores(keys.double(), values.double(), q), scoring.capkv_scores(keys.double(), values.double(), q))
    assert any("float64" in str(w.message) for w in caught)
    # keys broadcast over the batch while the statistics are not: no copy-free row view -> reference, with a warning
    k2, v2, q2 = torch.randn(1, 2, 1, 50, 64), torch.randn(1, 2, 1, 50, 64), torch.randn(2, 2, 4, 64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always"); K._warned.clear()
        torch.testing.assert_close(K.capkv_scores(k2, v2, q2), scoring.capkv_scores(k2, v2, q2))
    assert any("layout" in str(w.message) for w in caught)

@interpreted
def test_failed_factorisation_raises_linalg_error(monkeypatch):
    "A failed Cholesky raises the torch path's error type, so the cache hook falls back instead of crashing."
    k, v, q, qv = make(2, 50, 64, 4, torch.float32)
    real = K.capacity_factor
    def failing(gram, noise_var=1.0):
        linv, inv_noise, info = real(gram, noise_var); return linv, inv_noise, torch.ones_like(info)
    monkeypatch.setattr(K, "capacity_factor", failing)
    with pytest.raises(torch.linalg.LinAlgError, match="Cholesky"): K.jacap_scores(k[:, None], v[:, None], q, qv)

def test_plan_splits():
    blocks, chunk, n_split = K._plan(1000, 2, torch.device("cpu"), block_n=64, chunk=192)
    assert blocks == [64] and chunk == 192 and n_split == 6
    blocks, chunk, n_split = K._plan(1, 2, torch.device("cpu"), block_n=16, chunk=100)
    assert chunk == 16 and n_split == 1   # capped at the cache length

def test_runtime_budget():
    "The interpreter grid above must stay CI-sized: one mid-sized call (N=1000, d=128, G=3) under 10 s."
    if K.available() != "triton-interpreter": pytest.skip("interpreter not active")
    k, v, q, qv = make(2, 1000, 128, 3, torch.bfloat16)
    t0 = time.perf_counter(); K.jacap_scores(k[:, None], v[:, None], q, qv); assert time.perf_counter() - t0 < 10

@pytest.mark.slow
@interpreted
def test_kept_sets_on_smollm2():
    "Same select_tokens kept sets through both paths on a real SmolLM2 cache (~512 tokens)."
    import pydoc_data.topics
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    from jacap_nb.models import load_smollm2, output_cache
    model, tok = load_smollm2()
    text = " ".join(pydoc_data.topics.topics[t] for t in ("with", "try", "for", "while", "if"))
    ids = tok(text, return_tensors="pt").input_ids[:, :512]
    queries = {}
    hooks = [layer.self_attn.q_proj.register_forward_hook(lambda mod, inp, out, i=i: queries.__setitem__(i, out))
             for i, layer in enumerate(model.model.layers)]
    try:
        with torch.no_grad(): out = model(ids, use_cache=True)
    finally:
        for h in hooks: h.remove()
    cfg = model.config; hd = cfg.hidden_size // cfg.num_attention_heads; grp = cfg.num_attention_heads // cfg.num_key_value_heads
    cos, sin = model.model.rotary_emb(queries[0], torch.arange(ids.shape[1])[None])
    budget = ids.shape[1] // 4
    for layer in (0, 15, 29):
        keys, values = output_cache(out).layers[layer].keys, output_cache(out).layers[layer].values
        q = queries[layer].view(1, -1, cfg.num_attention_heads, hd).transpose(1, 2)
        q, _ = apply_rotary_pos_emb(q, q, cos, sin)
        q = q[:, :, -64:].reshape(1, cfg.num_key_value_heads, grp, 64, hd)
        mu, var = q.mean(-2), q.var(-2)
        for method, args in (("jacap", (keys[:, :, None], values[:, :, None], mu, var)), ("capkv", (keys[:, :, None], values[:, :, None], mu))):
            ours = getattr(K, f"{method}_scores")(*args).mean(2); ref = getattr(scoring, f"{method}_scores")(*args).mean(2)
            a, b = scoring.select_tokens(ours, budget), scoring.select_tokens(ref, budget)
            overlap = (a.unsqueeze(-1) == b.unsqueeze(-2)).any(-1).float().mean().item()
            assert overlap >= 0.99, (method, layer, overlap)

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_kernels_on_cuda():
    "Compiled kernels vs the reference; half inputs use tf32 tensor cores, hence the looser tolerance."
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for n, d, g in ((1, 64, 1), (17, 128, 3), (1000, 64, 8), (20000, 128, 4)):
            keys = torch.randn(2, 4, n, d, device="cuda").to(dtype)[:, :, None]
            values = torch.randn(2, 4, n, d, device="cuda").to(dtype)[:, :, None]
            mu, var = 2 * torch.randn(2, 4, g, d, device="cuda"), torch.rand(2, 4, g, d, device="cuda")
            tol = 1e-4 if dtype == torch.float32 else 1e-2
            for ours, ref in ((K.jacap_scores(keys, values, mu, var), scoring.jacap_scores(keys, values, mu, var)),
                              (K.capkv_scores(keys, values, mu), scoring.capkv_scores(keys, values, mu))):
                torch.testing.assert_close(ours, ref, rtol=tol, atol=tol * ref.abs().max().item())
