"Candidate scorers: f(ad, lay, module) -> (1, Hkv, N) float scores."
import math, torch
from rh import unrope, layer_queries, rotate_half

def pre_keys(lay):
    return unrope(lay["keys"].float(), *[t.float() for t in lay["position_embeddings"]])

def leverage_rows(x, ridge=1e-3):
    "ridge leverage of the rows of x (..., N, m) (centred by caller): x_i^T (X^T X + lam I)^-1 x_i"
    g = x.mT @ x
    lam = ridge * g.diagonal(dim1=-2, dim2=-1).sum(-1) / x.shape[-1]
    g = g + lam[..., None, None] * torch.eye(x.shape[-1], dtype=x.dtype)
    L = torch.linalg.cholesky(g)
    y = torch.linalg.solve_triangular(L, x.mT, upper=False)
    return y.square().sum(-2)

def keylev(frame="pre", ridge=1e-3):
    def f(ad, lay, module):
        k = pre_keys(lay) if frame == "pre" else lay["keys"].float()
        x = k - k.mean(-2, keepdim=True)
        return leverage_rows(x, ridge)
    return f

def value_leverage(w, v, center=True):
    "Jacap structure term: w_i v_i^T A^-1 v_i / s2, A = I + sum w v v^T / s2, s2 auto. w (1,H,N), v (1,H,N,dv)"
    v = v.float()
    if center: v = v - (w[..., None] * v).sum(-2, keepdim=True) / w.sum(-1)[..., None, None].clamp_min(1e-30)
    s2 = ((w * v.square().sum(-1)).sum(-1) / v.shape[-1]).clamp_min(1e-30)[..., None]
    ws = w / s2
    A = torch.einsum("bhn,bhni,bhnj->bhij", ws, v, v) + torch.eye(v.shape[-1])
    L = torch.linalg.cholesky(A)
    y = torch.linalg.solve_triangular(L, v.mT, upper=False)
    return ws * y.square().sum(-2)

def ctx_attention(ad, lay, m=64, power=1):
    "mean over m evenly spread context queries (post-RoPE, non-causal) of alpha_j(q)^power, averaged over the GQA group"
    q = layer_queries(ad, lay, post=True)[0]          # (H, N, d)
    k = lay["keys"][0].float()                        # (Hkv, N, d)
    n = k.shape[1]; g = ad.group
    pos = torch.linspace(4, n - 1, min(m, n - 4)).round().long()
    qs = q[:, pos].view(k.shape[0], g, len(pos), -1)  # (Hkv, G, M, d)
    a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", qs, k) / math.sqrt(k.shape[-1]), -1)
    return a.pow(power).mean((1, 2))[None]

def wprior(beta=4.0, pi=1.0, center_v=True, m=64, structure=True, ridge=1e-3):
    "Jacap with a whitened broad query prior (+ optional context-query mixture), secant sensitivity, value leverage"
    def f(ad, lay, module):
        k = pre_keys(lay)
        x = k - k.mean(-2, keepdim=True)
        lev = leverage_rows(x, ridge)                     # (1,H,N) in [0,1]
        wp = torch.softmax(beta * lev * x.shape[-2] / x.shape[-1], -1) if beta else lev / lev.sum(-1, keepdim=True)
        w = wp
        if pi < 1:
            wc = ctx_attention(ad, lay, m, power=2); wc = wc / wc.sum(-1, keepdim=True)
            w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w, lay["values"], center_v)
    return f

def ctxattn(m=64, power=1):
    def f(ad, lay, module): return ctx_attention(ad, lay, m, power)
    return f

def prodlev(m=256, ridge=1e-2, seed=0):
    "ridge leverage in the (centred pre-RoPE key) x (centred value) product space, random features"
    def f(ad, lay, module):
        k = pre_keys(lay); v = lay["values"].float()
        x = k - k.mean(-2, keepdim=True); y = v - v.mean(-2, keepdim=True)
        g = torch.Generator().manual_seed(seed)
        r1 = torch.randn(x.shape[-1], m, generator=g); r2 = torch.randn(y.shape[-1], m, generator=g)
        z = (x @ r1) * (y @ r2) / math.sqrt(m)
        return leverage_rows(z, ridge)
    return f

_MEMO = {}
def ctx_attn_all(ad, lay, reduce="mean", power=1, skip=4, chunk=512, causal=False):
    "alpha_j(q_t)^power over ALL context queries t (non-causal unless causal), reduced by mean or max, averaged over group"
    key = (id(lay["keys"]), reduce, power, skip, causal)
    if key not in _MEMO: _MEMO[key] = _ctx_attn_all(ad, lay, reduce, power, skip, chunk, causal)
    return _MEMO[key]

def _ctx_attn_all(ad, lay, reduce="mean", power=1, skip=4, chunk=512, causal=False):
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, n) if reduce == "mean" else torch.full((hkv, n), 0.0)
    for s in range(skip, n, chunk):
        qs = q[:, :, s:s + chunk]
        lg = torch.einsum("hgmd,hnd->hgmn", qs, k) / math.sqrt(d)
        if causal:
            tpos = torch.arange(s, min(s + chunk, n))[:, None]; lg = lg.masked_fill(torch.arange(n)[None] > tpos, float("-inf"))
        a = torch.softmax(lg, -1).pow(power)
        if reduce == "mean": acc += a.sum(2).mean(1)
        else: acc = torch.maximum(acc, a.amax(2).mean(1))
    return (acc / (n - skip) if reduce == "mean" else acc)[None]

def ctx(reduce="mean", power=1, causal=False, structure=False, pool=0):
    def f(ad, lay, module):
        w = ctx_attn_all(ad, lay, reduce, power, causal=causal)
        if pool: w = torch.nn.functional.avg_pool1d(w, pool, 1, pool // 2, count_include_pad=False)
        if structure: return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
        return w
    return f

def prior_weights(lay, c=1.0, ridge=1e-3, power=2):
    "E[alpha_j^power] under the whitened prior q ~ N(0, c (X^T X / N)^-1), lognormal approximation"
    k = pre_keys(lay); x = k - k.mean(-2, keepdim=True)
    lev = leverage_rows(x, ridge); n, d = x.shape[-2], x.shape[-1]
    s = c * n * lev / d                     # Var(logit_j)
    logz = torch.logsumexp(s / 2, -1, keepdim=True)   # log E[Z] = log sum_k exp(var_k / 2)
    return torch.exp(power * power * s / 2 - power * logz)  # E[e^{p l}] = exp(p^2 var/2)

def mix(c=1.0, pi=0.5, reduce="mean", power=2, structure=True, pool=0, causal=False):
    "E over the mixture pi * prior + (1-pi) * context queries of alpha^power, then (optionally) value leverage"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=power)
        wc = ctx_attn_all(ad, lay, reduce, power, causal=causal)
        w = pi * wp + (1 - pi) * wc
        if pool: w = torch.nn.functional.avg_pool1d(w, pool, 1, pool // 2, count_include_pad=False)
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def zblend(a, b, wa=0.75):
    "Compactor-style: wa * z(a) + z(b)"
    def f(ad, lay, module):
        x, y = a(ad, lay, module), b(ad, lay, module)
        z = lambda t: (t - t.mean()) / t.std().clamp_min(1e-6)
        return wa * z(x) + z(y)
    return f

def ctx_attn_chunked(ad, lay, chunk=256, reduce="max", power=1, skip=4, stride=1):
    "queries attend to the keys of their own chunk only (non-causal inside the chunk), reduce over queries; stride subsamples queries"
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, n)
    cnt = torch.zeros(n)
    for s in range(0, n, chunk):
        e = min(s + chunk, n)
        qs = q[:, :, max(s, skip):e:stride]
        if qs.shape[2] == 0: continue
        a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", qs, k[:, s:e]) / math.sqrt(d), -1).pow(power)
        if reduce == "mean": acc[:, s:e] = a.mean(2).mean(1)
        else: acc[:, s:e] = a.amax(2).mean(1)
    return acc[None]

def mixc(c=1.0, pi=0.5, chunk=256, reduce="max", power=1, structure=True, stride=1):
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=power)
        wc = ctx_attn_chunked(ad, lay, chunk, reduce, power, stride=stride)
        wc = wc / wc.sum(-1, keepdim=True)   # a distribution over tokens, like wp
        w = pi * wp / wp.sum(-1, keepdim=True) + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def mixu(c=1.0, pi=0.5, chunk=256, reduce="max", power=1, structure=True, stride=1):
    "like mix (context term NOT normalised), context attention within chunks"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=power)
        wc = ctx_attn_chunked(ad, lay, chunk, reduce, power, stride=stride) if chunk else ctx_attn_all(ad, lay, reduce, power)
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def ctx_attn_chunk_sink(ad, lay, chunk=256, reduce="max", power=1, sink=4):
    "queries of chunk c attend to [sink tokens] + [chunk c keys] (non-causal inside the chunk); reduce over queries"
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, n)
    for s in range(sink, n, chunk):
        e = min(s + chunk, n)
        qs = q[:, :, s:e]
        kk = torch.cat([k[:, :sink], k[:, s:e]], 1)
        a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", qs, kk) / math.sqrt(d), -1)[..., sink:].pow(power)
        acc[:, s:e] = a.mean(2).mean(1) if reduce == "mean" else a.amax(2).mean(1)
    return acc[None]

def mixs(c=1.0, pi=0.5, chunk=256, reduce="max", power=1, structure=True, sink=4):
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=power)
        wc = ctx_attn_chunk_sink(ad, lay, chunk, reduce, power, sink)
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def ctx_attn_band(ad, lay, block=64, halo=64, sink=4, reduce="max", power=1):
    "queries of block b attend to [sinks] + keys [b0 - halo, b1 + halo) (non-causal band); reduce over queries"
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, n)
    for s in range(sink, n, block):
        e = min(s + block, n)
        lo, hi = max(sink, s - halo), min(n, e + halo)
        kk = torch.cat([k[:, :sink], k[:, lo:hi]], 1)
        a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", q[:, :, s:e], kk) / math.sqrt(d), -1)[..., sink:].pow(power)
        a = a.amax(2).mean(1) if reduce == "max" else a.mean(2).mean(1)
        acc[:, lo:hi] = torch.maximum(acc[:, lo:hi], a) if reduce == "max" else acc[:, lo:hi] + a
    return acc[None]

def mixb(c=1.0, pi=0.5, block=64, halo=64, structure=True):
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = ctx_attn_band(ad, lay, block, halo)
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def value_leverage_metric(w, v, metric_inv):
    "w_i v_i^T (Minv + V^T W V / s2)^-1 v_i / s2 : leverage of u = W_O v with M = W_O^T W_O (metric_inv = M^-1, (H,d,d))"
    v = v.float()
    v = v - (w[..., None] * v).sum(-2, keepdim=True) / w.sum(-1)[..., None, None].clamp_min(1e-30)
    # auto noise in the output metric: s2 = sum w u^T u / D = sum w v^T M v / dv  (use trace/dv of the data term)
    M = torch.linalg.inv(metric_inv)
    energy = torch.einsum("bhn,bhni,hij,bhnj->bh", w, v, M, v)
    s2 = (energy / v.shape[-1]).clamp_min(1e-30)[..., None]
    ws = w / s2
    A = metric_inv[None] + torch.einsum("bhn,bhni,bhnj->bhij", ws, v, v)
    L = torch.linalg.cholesky(A)
    y = torch.linalg.solve_triangular(L, v.mT, upper=False)
    return ws * y.square().sum(-2)

def wo_metric_inv(module, ad):
    "per KV head: inverse of the mean over its G query heads of W_O^h^T W_O^h (d x d), ridge for invertibility"
    W = module.o_proj.weight.float()                     # (D, H*d)
    D = W.shape[0]; h, d, g = ad.num_heads, ad.head_dim, ad.group
    Wh = W.view(D, h, d).permute(1, 2, 0)                # (H, d, D)
    M = (Wh @ Wh.mT).view(ad.num_kv_heads, g, d, d).mean(1)
    M = M / (M.diagonal(dim1=-2, dim2=-1).mean(-1)[..., None, None])   # unit mean eigenvalue: noise scale-free
    return torch.linalg.inv(M + 1e-3 * torch.eye(d))

def mixo(c=1.0, pi=0.5):
    "mix(max) with output-aware values (leverage of W_O v)"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = ctx_attn_all(ad, lay, "max", 1)
        w = pi * wp + (1 - pi) * wc
        return value_leverage_metric(w / w.sum(-1, keepdim=True), lay["values"], wo_metric_inv(ad.module, ad))
    return f

def ctx_attn_causal_band(ad, lay, block=64, halo=256, sink=4):
    "causal: queries of block b see [sinks] + keys [b0 - halo, b1]; max over queries; skip the first `sink` queries"
    key = (id(lay["keys"]), "cband", block, halo, sink)
    if key in _MEMO: return _MEMO[key]
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, n)
    for s in range(sink, n, block):
        e = min(s + block, n)
        lo = max(sink, s - halo)
        kk = torch.cat([k[:, :sink], k[:, lo:e]], 1)
        kpos = torch.cat([torch.arange(sink), torch.arange(lo, e)])
        lg = torch.einsum("hgmd,hnd->hgmn", q[:, :, s:e], kk) / math.sqrt(d)
        lg = lg.masked_fill(kpos[None, :] > torch.arange(s, e)[:, None], float("-inf"))
        a = torch.softmax(lg, -1).amax(2).mean(1)
        acc[:, kpos] = torch.maximum(acc[:, kpos], a)
    _MEMO[key] = acc[None]
    return acc[None]

def mixcb(c=1.0, pi=0.5, block=64, halo=256, structure=True):
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = ctx_attn_causal_band(ad, lay, block, halo)
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

REPLAY = {}   # set per example by exp.py: list of (1, Hkv, N) replay max-attention per layer

def mixr(c=1.0, pi=0.5, structure=True):
    "Jacap with replay queries (KVzip's reconstruction pass) in the mixture"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = REPLAY["att"][ad.layer_idx]
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def replay_only():
    "KVzip's score replayed in our harness (max attention of the reconstruction queries), for reference"
    def f(ad, lay, module): return REPLAY["att"][ad.layer_idx]
    return f

def mixrp(c=1.0, pi=0.5):
    "replay without the instruction: the context re-read (teacher-forced) right after itself"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = REPLAY["plain"][ad.layer_idx]
        w = pi * wp + (1 - pi) * wc
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def mixp(c=1.0, pi=0.5, pool=3, mode="sym", structure=True):
    "causal exact context term, max-pooled along the sequence (sym: centred window; fwd: token j also gets its predecessor's)"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = ctx_attn_all(ad, lay, "max", 1, causal=True)
        if mode == "sym": wc = torch.nn.functional.max_pool1d(wc, pool, 1, pool // 2)
        else:
            padded = torch.nn.functional.pad(wc, (pool - 1, 0))
            wc = torch.nn.functional.max_pool1d(padded, pool, 1)     # w_j = max(w_{j-pool+1..j}): successors of a lookup
        w = pi * wp + (1 - pi) * wc
        if not structure: return w
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def _ctx_causal_group(ad, lay, reduce_g="max"):
    "exact causal max-attention per query head (skip 4 sink queries), then reduced over the GQA group by max or mean"
    key = (id(lay["keys"]), "cg", reduce_g)
    if key in _MEMO: return _MEMO[key]
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, g, n)
    for s in range(4, n, 512):
        e = min(s + 512, n)
        lg = torch.einsum("hgmd,hnd->hgmn", q[:, :, s:e], k[:, :e]) / math.sqrt(d)
        lg[..., s:e] = lg[..., s:e].masked_fill(torch.ones(e - s, e - s, dtype=torch.bool).triu(1), float("-inf"))
        acc[..., :e] = torch.maximum(acc[..., :e], torch.softmax(lg, -1).amax(2))
    out = (acc.amax(1) if reduce_g == "max" else acc.mean(1))[None]
    _MEMO[key] = out
    return out

def mixg(c=1.0, pi=0.5, reduce_g="max", normalise=False):
    "exact causal context term reduced over the group by max (worst-case head) or mean; optionally both terms normalised"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = _ctx_causal_group(ad, lay, reduce_g)
        if normalise: wc = wc / wc.sum(-1, keepdim=True)
        w = pi * wp + (1 - pi) * wc
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def _ctx_relocated(ad, lay, offset=0):
    "context queries (pre-RoPE) rotated to the next position N + offset, attending to all N keys; max over queries, mean over G"
    key = (id(lay["keys"]), "reloc", offset)
    if key in _MEMO: return _MEMO[key]
    h = lay["hidden_states"]; n = h.shape[1]
    qpre = ad.queries(h)[0, :, 4:]                                   # (H, T, d)
    cos, sin = ad.rope(h, torch.tensor([[n + offset]]))             # (1, 1, d)
    q = qpre * cos[0] + rotate_half(qpre) * sin[0]
    k = lay["keys"][0].float(); hkv, _, d = k.shape; g = ad.group
    q = q.view(hkv, g, -1, d)
    acc = torch.zeros(hkv, g, n)
    for s in range(0, q.shape[2], 512):
        a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", q[:, :, s:s + 512].float(), k) / math.sqrt(d), -1)
        acc = torch.maximum(acc, a.amax(2))
    out = acc.mean(1)[None]
    _MEMO[key] = out
    return out

def mixf(c=1.0, pi=0.5, union=False):
    "context queries asked after the context (relocated to position N); union: max with the causal term"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        wc = _ctx_relocated(ad, lay)
        if union: wc = torch.maximum(wc, _ctx_causal_group(ad, lay, "mean"))
        w = pi * wp + (1 - pi) * wc
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f

def _ctx_nc_group(ad, lay):
    "exact non-causal max-attention per query head (skip 4 sink queries): (Hkv, G, N)"
    key = (id(lay["keys"]), "ncg")
    if key in _MEMO: return _MEMO[key]
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, g, n)
    for s in range(4, n, 512):
        a = torch.softmax(torch.einsum("hgmd,hnd->hgmn", q[:, :, s:s + 512], k) / math.sqrt(d), -1)
        acc = torch.maximum(acc, a.amax(2))
    _MEMO[key] = acc
    return acc

def _ctx_causal_heads(ad, lay):
    key = (id(lay["keys"]), "cgh")
    if key in _MEMO: return _MEMO[key]
    q = layer_queries(ad, lay, post=True)[0]
    k = lay["keys"][0].float(); hkv, n, d = k.shape; g = ad.group
    q = q.view(hkv, g, n, d)
    acc = torch.zeros(hkv, g, n)
    for s in range(4, n, 512):
        e = min(s + 512, n)
        lg = torch.einsum("hgmd,hnd->hgmn", q[:, :, s:e], k[:, :e]) / math.sqrt(d)
        lg[..., s:e] = lg[..., s:e].masked_fill(torch.ones(e - s, e - s, dtype=torch.bool).triu(1), float("-inf"))
        acc[..., :e] = torch.maximum(acc[..., :e], torch.softmax(lg, -1).amax(2))
    _MEMO[key] = acc
    return acc

def mixn(c=1.0, pi=0.5, mode="union"):
    "normalised mixture, worst case over heads; context term: causal, non-causal, or their union (max)"
    def f(ad, lay, module):
        wp = prior_weights(lay, c, power=1)
        if mode == "causal": wc = _ctx_causal_heads(ad, lay)
        elif mode == "noncausal": wc = _ctx_nc_group(ad, lay)
        else: wc = torch.maximum(_ctx_causal_heads(ad, lay), _ctx_nc_group(ad, lay))
        wc = wc.amax(1)[None]; wc = wc / wc.sum(-1, keepdim=True)
        w = pi * wp + (1 - pi) * wc
        return value_leverage(w / w.sum(-1, keepdim=True), lay["values"])
    return f
