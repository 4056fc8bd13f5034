"""jacap_nb.fused (the default scorer's Triton path) against the torch scorers, in Triton's interpreter on CPU: grids over
dtypes, GQA groups, N, d and the band's settings; the press with backend="triton" launching the kernels; and the kept
tokens of a real SmolLM2 prefill, uniform and measured budget (03b_fused checks one diagonal of these grids).

Like tests/test_kernels.py this file needs TRITON_INTERPRET=1 before jacap_nb.kernels is first imported: tests/run.sh runs
the two in their own pytest process. Imported after compiled kernels (no GPU), the interpreter tests skip themselves.
"""
import os
import torch
if not torch.cuda.is_available(): os.environ["TRITON_INTERPRET"] = "1"   # before triton / jacap_nb.kernels are imported
import json, pathlib, re
from types import SimpleNamespace
import pytest
from jacap_nb import scoring
from jacap_nb.cooccurrence import cooccurrence_leverage, pivot_columns
import jacap_nb.kernels as K
import jacap_nb.fused as F
from jacap_nb.presses import make_press
from jacap_nb.capture import capture_prefill
from jacap_nb.cache import compress_layers
from jacap_nb.models import tiny_model

interpreted = pytest.mark.skipif(K.available() != "triton-interpreter",
    reason="jacap_nb.kernels was imported without TRITON_INTERPRET=1: run this file in its own pytest process")
pytestmark = interpreted
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def assert_close(ours, ref, tol=1e-4):
    "The kernels compute in float32 on upcast inputs, like the reference: float32 rounding for every input dtype."
    torch.testing.assert_close(ours, ref, rtol=tol, atol=tol * ref.abs().max().item())


def cache(b, h, g, n, t, d, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k, v, kp = ((torch.randn(b, h, n, d, generator=gen) + 1).to(dtype) for _ in range(3))
    return k, v, kp, (2 * torch.randn(b, h, g, t, d, generator=gen)).to(dtype)


F32, BF16, F16 = DTYPES
@pytest.mark.parametrize("dtype,g,d", [(F32, 1, 64), (F32, 2, 64), (F32, 3, 64), (F32, 7, 64), (F32, 8, 64), (BF16, 3, 128),
                                       (F16, 3, 128), (F32, 3, 128), (BF16, 2, 256), (F16, 8, 256), (F32, 7, 256)], ids=str)
def test_context_scores(dtype, g, d):
    """The whole scorer, every GQA group size, head dim and dtype at least once: N = 83 is no multiple of the block,
    T = 79 (the press's queries after 4 sinks)."""
    k, v, kp, q = cache(1, 2, g, 83, 79, d, dtype)
    assert_close(F.triton_context_scores(k, v, q, kp), scoring.jacap_context_scores(k, v, q, kp, block=16, halo=16))


@pytest.mark.parametrize("block,halo,causal,n_sink", [(16, 16, True, 4), (8, 5, True, 4), (16, 16, False, 4),
                                                      (12, 30, True, 0), (32, 0, True, 2), (4, 64, False, 16)])
@pytest.mark.parametrize("n,t", [(1, 1), (17, 17), (200, 60), (130, 126)])
def test_band(block, halo, causal, n_sink, n, t):
    k, _, _, q = cache(2, 1, 3, n, t, 64, torch.float32, seed=n)
    kw = dict(n_sink=n_sink, block=block, halo=halo, causal=causal)
    ref = scoring.context_attention(k[..., None, :, :], q, **kw).amax(-2)
    assert_close(F.triton_band_attention(k, q, n_sink, block, halo, causal), ref, 1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_band_rotates_pre_rope_queries(dtype):
    "Pre-RoPE queries with (cos, sin) give the band of the queries rotated beforehand (the hook's path)."
    from jacap_nb.rope import rope_into
    k, _, _, q = cache(1, 2, 3, 90, 86, 128, dtype)
    cos, sin = torch.randn(86, 128), torch.randn(86, 128)
    ref = scoring.context_attention(k[..., None, :, :], rope_into(torch.empty(q.shape), q.float(), cos, sin), block=16, halo=16).amax(-2)
    assert_close(F.triton_band_attention(k, q, rope=(cos, sin)), ref, 1e-5)


@pytest.fixture
def split_dots(monkeypatch):
    "The kernels with split tf32 products (what a GPU runs), which the interpreter otherwise skips."
    monkeypatch.setattr(F, "SPLIT_DOTS", True)


@pytest.mark.parametrize("q_dtype,k_dtype,rope", [(BF16, BF16, False), (BF16, F32, False), (F32, BF16, True), (F32, F32, True)], ids=str)
def test_split_products(split_dots, q_dtype, k_dtype, rope):
    "Every branch of `_dot_f32` (neither, one or both operands exact in tf32) gives the band and the norms of the reference."
    k, v, kp, q = cache(1, 2, 3, 90, 86, 64, k_dtype)
    q = q.to(q_dtype)
    cos, sin = (torch.randn(86, 64), torch.randn(86, 64)) if rope else (None, None)
    from jacap_nb.rope import rope_into
    qr = rope_into(torch.empty(q.shape), q.float(), cos, sin) if rope else q.float()
    ref = scoring.context_attention(k.float()[..., None, :, :], qr, block=16, halo=16).amax(-2)
    assert_close(F.triton_band_attention(k, q, rope=(cos, sin) if rope else None), ref, 1e-5)
    w = torch.rand(1, 2, 90)
    assert_close(F.triton_centred_leverage(w, v), scoring.centred_leverage(w, v.float()), 1e-4)


def test_split_launch_falls_back_once(monkeypatch):
    "A split launch that exceeds the GPU's shared memory warns once, then takes the float32 products for that launch."
    calls = []
    class Kernel:
        fn = SimpleNamespace(__name__="_fake_kernel")
        def __getitem__(self, grid):
            def run(*args, SPLIT, **meta):
                calls.append(SPLIT)
                if SPLIT: raise K.triton.runtime.errors.OutOfResources(262144, 232448, "shared memory")
            return run
    monkeypatch.setattr(F, "SPLIT_DOTS", True); monkeypatch.setattr(F, "_UNSPLIT", set())
    with pytest.warns(UserWarning, match="_fake_kernel with split tf32 products exceeds this GPU"): F._launch(Kernel(), (1,), BN=64)
    F._launch(Kernel(), (1,), BN=64)                                          # remembered: no second try, no warning
    F._launch(Kernel(), (1,), BN=128)                                         # another launch tries again
    assert calls == [True, False, False, True, False]


@pytest.mark.parametrize("d", [64, 256])
@pytest.mark.parametrize("n", [1, 2, 130, 600])
def test_leverages(d, n):
    "The prior's key leverage and the centred-value leverage; large means and uneven spreads, several chunks."
    gen = torch.Generator().manual_seed(n)
    keys = (torch.randn(2, 1, n, d, generator=gen) * torch.linspace(0.2, 4, d) + 3).bfloat16()
    values, w = torch.randn(2, 1, n, d, generator=gen) + 1, torch.rand(2, 1, n, generator=gen)
    if n > 1: assert_close(F.triton_key_leverage(keys), scoring.key_leverage(keys), 1e-3)
    assert_close(F.triton_prior_attention(keys), scoring.prior_attention(keys), 1e-3)
    for nv in ("auto", 0.5):
        assert_close(F.triton_centred_leverage(w, values, nv), scoring.centred_leverage(w, values, nv), 1e-3)


@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64])
@pytest.mark.parametrize("n,d,dv,m", [(1, 64, 64, 16), (2, 64, 32, 16), (130, 256, 256, 16), (600, 64, 64, 0),
                                      (1100, 128, 64, 16), (300, 64, 64, 300)])
def test_cooccurrence_pivots(n, d, dv, m, dtype, monkeypatch):
    """The default's leverage with its pivots on the kernel equals torch's: one row, several chunks (512 rows each under
    the interpreter), m = 0 (no launch) and m = N (the exact leverage); plain and in logs; float64 inputs too."""
    monkeypatch.setattr(F, "_PIVOTS_IN_TORCH", {})
    gen = torch.Generator().manual_seed(n + m)
    keys = (torch.randn(2, 1, n, d, generator=gen) * torch.linspace(0.2, 4, d) + 3).to(dtype)
    values, w = (torch.randn(2, 1, n, dv, generator=gen) + 1).to(dtype), torch.rand(2, 1, n, generator=gen)
    for log in (False, True):
        ours = F.triton_cooccurrence_leverage(w, values, keys, 4.0, log=log, pivots=m)
        ref = cooccurrence_leverage(w, values, keys, 4.0, log=log, pivots=m)
        torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6 * ref.abs().max().item())
    assert F.pivot_fallbacks() == {}                                        # the kernel ran, not torch


def _norm25_vectors() -> torch.Tensor:
    "Every integer 4-vector with |v|^2 = 25 (248 of them), in a fixed order."
    r = range(-5, 6)
    return torch.tensor([v for v in ((a, b, c, d) for a in r for b in r for c in r for d in r)
                         if sum(x * x for x in v) == 25]).double()


def _tied_pivots(first_tie:int, n:int=1100):
    """Pivot-step inputs whose residuals tie exactly while every tied token has a column of its own: keys at zero, tokens
    before `first_tie` all (5, 0, 0, 0); the rest cycle through five kinds, each a 4-dimensional subspace of its own,
    where each token takes the next integer vector of |v|^2 = 25. A pivot leaves every other kind's residuals at exactly
    25 (their values are orthogonal to it), and picking any other tied token than the first changes a column of L."""
    vecs = _norm25_vectors()
    v = torch.zeros(n, 24, dtype=torch.float64)
    v[:first_tie, 0] = 5
    for i in range(first_tie, n):
        kind, q = (i - first_tie) % 5 + 1, (i - first_tie) // 5
        v[i, 4 * kind:4 * kind + 4] = vecs[q % len(vecs)]
    x, ones = torch.zeros(1, n, 8, dtype=torch.float64), torch.ones(1, n, dtype=torch.float64)
    return (x, x, v[None], ones, torch.zeros(1, 1, dtype=torch.float64), 25 * ones, torch.ones(1, dtype=torch.float64), 8)


@pytest.mark.parametrize("first_tie", [3, 130, 512, 1030])
def test_cooccurrence_pivot_ties(first_tie, monkeypatch):
    """Equal residuals pick the first index, as torch.argmax: the first tie within a block, in a later block, at a chunk's
    start and in the last chunk (blocks of 128 and chunks of 512 rows under the interpreter), each tied with tokens of
    other columns in later blocks and chunks."""
    monkeypatch.setattr(F, "_PIVOTS_IN_TORCH", {})
    args = _tied_pivots(first_tie)
    l, rho = F.triton_pivot_columns(*args)
    assert F.pivot_fallbacks() == {}                                        # the kernel ran, not torch
    pivots = [0] + [first_tie + k for k in range(5)]                        # the first of each kind, in order
    assert torch.equal(l[0, pivots, :6].diagonal(), torch.full((6,), 5.0, dtype=torch.float64))
    ref = pivot_columns(*args)
    torch.testing.assert_close(l, ref[0], rtol=0, atol=1e-12); torch.testing.assert_close(rho, ref[1], rtol=0, atol=1e-12)


# Triton <= 3.1's make_cubin raises a plain RuntimeError when ptxas fails, with one of three messages
OLD_PTXAS_MESSAGES = {"ptxas-exit-255": "Internal Triton PTX codegen error: \nptxas error   : Entry function uses too much shared data",
             "ptxas-segfault": "Please run `ptxas kernel.ptx` to confirm that this is a bug in `ptxas`\n",
             "ptxas-other": "`ptxas` failed with error code 1: \nptxas fatal   : Unresolved extern function",
             "ptxas-negative": "`ptxas` failed with error code -11: \n"}

def _error(name):
    "The error a launch raises in these tests."
    if name in OLD_PTXAS_MESSAGES: return RuntimeError(OLD_PTXAS_MESSAGES[name])
    if not hasattr(K.triton.runtime.errors, name): pytest.skip(f"this Triton has no {name}")
    cls = getattr(K.triton.runtime.errors, name)
    return cls(1, 0, "shared memory") if name == "OutOfResources" else cls("ptxas: out of registers")

@pytest.mark.parametrize("error", ["OutOfResources", "PTXASError", *OLD_PTXAS_MESSAGES])
def test_pivot_kernel_that_cannot_run_falls_back_to_torch(monkeypatch, error):
    "A pivot launch that does not fit the GPU warns once per block shape; that shape then runs in torch, with torch's results."
    err = _error(error)
    calls = []
    class Kernel:
        def __getitem__(self, grid):
            def run(*args, **meta):
                calls.append(meta["BD"])
                raise err
            return run
    monkeypatch.setattr(F, "_pivot_kernel", Kernel()); monkeypatch.setattr(F, "_PIVOTS_IN_TORCH", {})
    k, v, w = torch.randn(1, 2, 50, 64), torch.randn(1, 2, 50, 64), torch.rand(1, 2, 50)
    with pytest.warns(UserWarning, match="pivot kernel cannot run here"): ours = F.triton_cooccurrence_leverage(w, v, k, 4.0, pivots=8)
    assert torch.equal(ours, cooccurrence_leverage(w, v, k, 4.0, pivots=8)) and calls == [64]
    F.triton_cooccurrence_leverage(w, v, k, 4.0, pivots=8)                    # remembered: no second try
    assert calls == [64]
    with pytest.warns(UserWarning, match="pivot kernel cannot run here"):   # keys of another width: another launch shape
        F.triton_cooccurrence_leverage(w, v, torch.randn(1, 2, 50, 128), 4.0, pivots=8)
    assert calls == [64, 128] and len(F._PIVOTS_IN_TORCH) == 2


class CudaError(RuntimeError): "A RuntimeError subclass: not what Triton <= 3.1's ptxas failures raise, even with their text."

@pytest.mark.parametrize("error", [RuntimeError("CUDA error: an illegal memory access was encountered"),
                                   RuntimeError("something went wrong: Internal Triton PTX codegen error: \n"),   # not at the start
                                   RuntimeError("Internal Triton PTX codegen error\n"),                           # not its text
                                   CudaError("Internal Triton PTX codegen error: \n")])                          # not its class
def test_pivot_kernel_errors_that_are_not_about_fitting_are_raised(monkeypatch, error):
    "A launch error that does not say the kernel cannot compile or fit is raised, and no shape is sent to torch."
    class Kernel:
        def __getitem__(self, grid):
            def run(*args, **meta): raise error
            return run
    monkeypatch.setattr(F, "_pivot_kernel", Kernel()); monkeypatch.setattr(F, "_PIVOTS_IN_TORCH", {})
    k, v, w = torch.randn(1, 2, 50, 64), torch.randn(1, 2, 50, 64), torch.rand(1, 2, 50)
    with pytest.raises(type(error)) as raised: F.triton_cooccurrence_leverage(w, v, k, 4.0, pivots=8)
    assert raised.value is error
    assert F.pivot_fallbacks() == {}


def test_weighted_moments_merge_chunks():
    x, w = torch.randn(3, 517, 64) + 10, torch.rand(3, 517)
    for chunk in (128, 512, 1024):
        mu, m = F.weighted_moments(x, w, chunk=chunk)
        ref_mu = (w[..., None] * x).sum(1) / w.sum(1, keepdim=True)
        xc = x - ref_mu[:, None]
        assert_close(mu, ref_mu, 1e-5); assert_close(m, xc.mT @ (w[..., None] * xc), 1e-4)


def test_bad_input_fails_before_launch(launches):
    k = torch.randn(1, 2, 40, 64)
    with pytest.raises(ValueError, match="T <= N=40"): F.triton_band_attention(k, torch.randn(1, 2, 3, 41, 64))
    with pytest.raises(ValueError, match="queries must have shape"): F.triton_band_attention(k, torch.randn(1, 3, 3, 8, 64))
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"): F.triton_key_leverage(k.double())
    with pytest.raises(ValueError, match="weights must have shape"): F.triton_centred_leverage(torch.rand(1, 2, 39), k)
    with pytest.raises(ValueError, match="noise_var"): F.triton_centred_leverage(torch.rand(1, 2, 40), k, 0.0)
    with pytest.raises(ValueError, match="has no kernel"): F.triton_cooccurrence_leverage(torch.rand(1, 2, 40), k, k, pivots=None)
    with pytest.raises(ValueError, match="pivots"): F.triton_cooccurrence_leverage(torch.rand(1, 2, 40), k, k, pivots=-1)
    with pytest.raises(ValueError, match="float32, bfloat16, float16 or float64"): F.triton_cooccurrence_leverage(torch.rand(1, 2, 40), k, k.int())
    with pytest.raises(ValueError, match="backend must be one of"): make_press("jacap", 0.5, backend="cuda")
    assert sum(c.n for c in launches.values()) == 0                           # refused before any kernel ran


class Launches:
    "Stands in for a kernel in jacap_nb.fused: counts `kernel[grid](...)` launches and runs the real kernel."
    def __init__(self, kernel): self.kernel, self.fn, self.n = kernel, kernel.fn, 0
    def __getitem__(self, grid):
        self.n += 1
        return self.kernel[grid]


@pytest.fixture
def launches(monkeypatch):
    counters = {name: Launches(getattr(F, name)) for name in ("_band_kernel", "_moments_kernel", "_norms_kernel", "_pivot_kernel")}
    for name, c in counters.items(): monkeypatch.setattr(F, name, c)
    return counters


@pytest.mark.parametrize("options", [{}, {"score": "capacity"}, {"prior_weight": 1.0}, {"score": "attention"}],
                         ids=["default", "capacity", "prior", "attention"])
def test_press_launches_the_kernels(launches, options):
    """backend='triton' runs the kernels on every layer (and keeps torch's tokens); backend='torch' launches none. The
    capacity score's leverage is two kernels; the default's co-occurrence leverage one launch per pivot (16 per layer)."""
    m, ids = tiny_model("llama"), torch.randint(3, 120, (1, 70), generator=torch.Generator().manual_seed(0))
    prefill = capture_prefill(m, ids)
    ref = compress_layers(make_press("jacap", 0.6, budget="uniform", backend="torch", **options), m, prefill)[1]
    assert sum(c.n for c in launches.values()) == 0
    run = compress_layers(make_press("jacap", 0.6, budget="uniform", backend="triton", **options), m, prefill)[1]
    band = 0 if options.get("prior_weight") == 1.0 else 2                      # one band per layer, 2 layers
    leverages = 2 if options.get("score") == "capacity" else 0                 # the value leverage's moments and norms
    pivots = 2 * 16 if options.get("score", "cooccurrence") == "cooccurrence" else 0
    assert launches["_band_kernel"].n == band
    assert launches["_moments_kernel"].n == launches["_norms_kernel"].n == 2 + leverages   # + the prior's, per layer
    assert launches["_pivot_kernel"].n == pivots
    for l in ref.kept_indices: assert torch.equal(ref.kept_indices[l], run.kept_indices[l]), l


def test_auto_stays_on_torch_for_cpu_tensors(launches):
    "backend='auto' (the default) takes Triton only for CUDA tensors: on CPU it never runs the interpreter."
    m = tiny_model("llama")
    compress_layers(make_press("jacap", 0.6, budget="uniform"), m, capture_prefill(m, torch.randint(3, 120, (1, 40))))
    assert sum(c.n for c in launches.values()) == 0


def _smollm2():
    from jacap_nb.models import load_smollm2
    try: return load_smollm2()
    except Exception as e: pytest.skip(f"SmolLM2 is not installed here ({e})")


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["uniform", "auto"])
def test_smollm2_kept_tokens(budget, launches):
    "On a real 512-token SmolLM2 prefill the Triton path keeps >= 99 % of torch's kept positions in every layer."
    from jacap_nb.texts import source_text
    model, tok = _smollm2()
    ids = tok(source_text("britannica")[:6000], return_tensors="pt").input_ids[:, :512]
    prefill = capture_prefill(model, ids)
    runs = {b: compress_layers(make_press("jacap", 0.75, budget=budget, backend=b), model, prefill)[1] for b in ("torch", "triton")}
    assert launches["_band_kernel"].n == model.config.num_hidden_layers
    for l, ref in runs["torch"].kept_indices.items():
        ours = runs["triton"].kept_indices[l]
        assert ours.shape == ref.shape
        for a, b in zip(ours.flatten(0, -2), ref.flatten(0, -2)):                # per KV head
            same = len(set(a.tolist()) & set(b.tolist())) / len(b)
            assert same >= 0.99, (l, same)


def test_gpu_cell_on_cpu(capsys):
    "03b_fused's `#| gpu` cell as written, on the CPU under the interpreter, with CPU-sized N (test_gpu_cells covers the others)."
    nb = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'nbs' / '03b_fused.ipynb').read_text())
    (src,) = [s for s in (''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code') if re.search(r'^#\|\s*gpu\s*$', s, re.M)]
    for a, b in {'device="cuda"': 'device="cpu"', '(1, 100, 64), (4, 32768, 128), (8, 4099, 256)': '(1, 24, 64), (4, 40, 128), (8, 20, 256)'}.items():
        assert a in src, f'the gpu cell no longer contains {a!r}: update this test'
        src = src.replace(a, b)
    max_rel_err = lambda a, b: ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()   # the notebook's helper
    exec(compile(src, '03b_fused:gpu', 'exec'), dict(torch=torch, scoring=scoring, max_rel_err=max_rel_err,
                                                    triton_context_scores=F.triton_context_scores))
    assert capsys.readouterr().out.count('kept overlap') == 3 * 3


def test_failed_factorisation_raises_what_torch_raises():
    "A value Gram that Cholesky cannot factor raises LinAlgError, as the torch path does: the cache hook then falls back."
    v = torch.randn(1, 1, 50, 64)
    v[..., 0, 0] = float("inf")
    w = torch.rand(1, 1, 50)
    with pytest.raises(torch.linalg.LinAlgError): scoring.centred_leverage(w, v, 1.0)
    with pytest.raises(torch.linalg.LinAlgError): F.triton_centred_leverage(w, v, 1.0)
