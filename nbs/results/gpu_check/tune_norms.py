"""The whitened-norms kernel on a GPU: its launch settings and dot precision, timed and checked against float64.
profile_default.py found `fused._norms_kernel` taking 83% of the default scorer's GPU time (13 ms per call at 32K
tokens, where reading the keys once takes about 20 us). Candidates, each `scale * w_i * ||L^{-1} (x_i - mu)||^2`:
- centred, one dot per tile in `ieee` (float32 FMA; the shipped kernel) or `tf32x3` (three tensor-core products);
- split: `L^{-1} x_i - L^{-1} mu`, x (bf16/fp16, exact in tf32) times L^{-1} split into its tf32 head and tail, two
  tensor-core products, float32 accumulation.
The fastest candidate whose error stays under 1e-4 of the largest norm for every head dim then replaces
`fused.whitened_norms` for the end-to-end checks (gpu-check's scorer timing and prefill share, SmolLM2's kept tokens).
Usage: python tune_norms.py OUT_DIR [SMOLLM2_PREFIX.gguf] (about 6 minutes on an H200, most of it compiling).
Measured on an H200 on 2026-12-04 (tune_norms.txt, tune_norms.json; README.md): split/128/32/4 won."""
import json, pathlib, sys
import torch, triton, triton.language as tl
from jacap_nb import fused as F, kernels as K
from jacap_nb.gpu_check import median_seconds, kernel_check, prefill_share, kept_tokens_check

@triton.jit
def norms(X, W, MU, C, LINV, SCALE, OUT, N, d, s_xr, s_xn, HAS_W: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr,
          LT: tl.constexpr, PRECISION: tl.constexpr, SPLIT: tl.constexpr):
    r = tl.program_id(0); blk = tl.program_id(1)
    dk = tl.arange(0, BD); dmask = dk < d
    offs = blk * BN + tl.arange(0, BN); nmask = offs < N
    x = tl.load(X + r * s_xr + offs[:, None] * s_xn + dk[None, :], mask=nmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
    if not SPLIT:
        mu = tl.load(MU + r * d + dk, mask=dmask, other=0.0)
        x = tl.where(nmask[:, None] & dmask[None, :], x - mu[None, :], 0.0)
    sq = tl.zeros([BN], dtype=tl.float32)
    for a in tl.static_range(0, BD, LT):
        rows = a + tl.arange(0, LT)
        lt = tl.load(LINV + r * d * d + rows[:, None] * d + dk[None, :], mask=(rows < d)[:, None] & dmask[None, :], other=0.0)
        if SPLIT:
            hi = (lt.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)   # tf32's 10 mantissa bits
            y = tl.dot(x, tl.trans(hi), input_precision="tf32")
            y = tl.dot(x, tl.trans(lt - hi), y, input_precision="tf32")
            c = tl.load(C + r * d + rows, mask=rows < d, other=0.0)
            y = y - c[None, :]
        else:
            y = tl.dot(x, tl.trans(lt), input_precision=PRECISION)
        sq += tl.sum(y * y, axis=1)
    if HAS_W: w = tl.load(W + r * N + offs, mask=nmask, other=0.0)
    else: w = tl.where(nmask, 1.0, 0.0)
    tl.store(OUT + r * N + offs, w * tl.load(SCALE + r) * sq, mask=nmask)

def launcher(precision, bn, lt, warps):
    split = precision == "split"
    def whitened_norms(x, mean, linv, scale, weights=None):
        rows, n, d = x.shape
        bd = F._pow2(d)
        if split and x.dtype == torch.float32: return F_whitened_norms(x, mean, linv, scale, weights)   # not exact in tf32
        out = x.new_empty((rows, n), dtype=torch.float32)
        linv = linv.contiguous()
        c = (linv @ mean[..., None])[..., 0].contiguous() if split else mean
        norms[(rows, -(-n // bn))](x, out if weights is None else weights, mean.contiguous(), c, linv, scale.contiguous(), out,
                                   n, d, x.stride(0), x.stride(1), HAS_W=weights is not None, BN=bn, BD=bd, LT=min(bd, lt),
                                   PRECISION="tf32" if split else precision, SPLIT=split, num_warps=warps)
        return out
    return whitened_norms

F_whitened_norms = F.whitened_norms
CANDIDATES = [("ieee", 64, 64, 4), ("ieee", 64, 32, 4), ("ieee", 32, 32, 4),          # the shipped launch first
              ("tf32x3", 64, 64, 4), ("tf32x3", 128, 64, 8), ("split", 64, 64, 4), ("split", 128, 64, 8), ("split", 128, 32, 4)]

def case(n, d, rows=8, seed=0):
    "Keys-like rows: a large mean and uneven spreads, bf16; L^{-1} of their ridge-regularised centred Gram; random weights."
    g = torch.Generator().manual_seed(seed)
    x = ((torch.randn(rows, n, d, generator=g) * torch.linspace(0.2, 4, d) + 3)).to("cuda", torch.bfloat16)
    w = torch.rand(rows, n, generator=g).cuda()
    mu, gram = F.weighted_moments(x, w)
    lam = 1e-3 * gram.diagonal(dim1=-2, dim2=-1).mean(-1)
    linv = F._inverse_cholesky(gram + lam[:, None, None] * torch.eye(d, device="cuda"))
    scale = torch.rand(rows, generator=g).cuda() + 0.5
    ref = (scale[:, None].double() * w.double() * ((x.double() - mu[:, None].double()) @ linv.double().mT).square().sum(-1))
    return (x, mu, linv, scale, w), ref

if __name__ == "__main__":
    out = sys.argv[1]; pathlib.Path(out).mkdir(parents=True, exist_ok=True); gguf = sys.argv[2] if len(sys.argv) > 2 else None
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    res = {"candidates": {}}
    for cand in CANDIDATES:
        fn, row = launcher(*cand), {}
        try:
            for n, d in ((8192, 64), (8192, 128), (8192, 256), (32768, 128)):
                args, ref = case(n, d)
                got = fn(*args)
                err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
                row[f"{n}x{d}"] = dict(ms=median_seconds(lambda: fn(*args), 10) * 1e3, err=err)
        except Exception as e: row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        res["candidates"]["/".join(map(str, cand))] = row
        print(f"{'/'.join(map(str, cand)):18s}", row.get("error") or "  ".join(f"{k}: {v['ms']:7.3f} ms err {v['err']:.1e}" for k, v in row.items()), flush=True)
    ok = {k: v for k, v in res["candidates"].items() if "error" not in v and all(c["err"] < 1e-4 for c in v.values())}
    best = min(ok, key=lambda k: ok[k]["32768x128"]["ms"])
    res["best"] = best; print("best:", best, flush=True)
    prec, bn, lt, warps = best.split("/")
    F.whitened_norms = launcher(prec, int(bn), int(lt), int(warps))
    kc = res["kernel_check"] = kernel_check()["jacap capacity score (fused)"]
    print(f"default scorer at 32K with {best}: {kc['speedup']:.2f}x eager torch ({kc['triton_s'] * 1e3:.2f} ms vs {kc['torch_s'] * 1e3:.2f} ms), "
          f"scores correlate {kc['correlation']:.6f}", flush=True)
    ps = res["prefill"] = prefill_share()
    print(f"prefill share with {best}: {ps['share']:.1%} of an 8192-token 8B-shaped prefill ({ps['pressed_s']:.3f} s vs {ps['prefill_s']:.3f} s)", flush=True)
    if gguf:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        p = pathlib.Path(gguf)
        tok = AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name)
        model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.float32).eval()
        kt = res["kept_tokens"] = kept_tokens_check(("cpu", "cuda"), model=model, tokenizer=tok, n_tokens=1024)
        print(f"same tokens with {best}: cuda keeps {kt['min']:.2%} of cpu's kept pairs in its worst layer; per layer "
              + " ".join(f"{s:.4f}" for s in kt["per_layer"]), flush=True)
    pathlib.Path(out, "tune_norms.json").write_text(json.dumps(res, indent=1))
