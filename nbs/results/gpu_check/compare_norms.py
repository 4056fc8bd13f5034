"""The shipped whitened-norms kernel against tune_norms.py's fastest launch, on a GPU.
tune_norms.py chose `split/128/32/4`: rows not centred (L^{-1}x - L^{-1}mu), two tf32 products. It cancels when the
spread is at rounding level (one token, or equal rows: 121 against 0.98 in test_fused's one-token case), so
03b_fused ships the centred form, x - mu split into tf32 head and tail, three products. This times both at the
cases of tune_norms.py and checks the shipped one against float64 in bf16 and float32.
Usage: python compare_norms.py (the checkout on PYTHONPATH; about a minute on an H200)."""
import pathlib, sys
import torch
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tune_norms import case, launcher
from jacap_nb import fused as F
from jacap_nb.gpu_check import median_seconds

if __name__ == "__main__":
    print(torch.cuda.get_device_name(), flush=True)
    split = launcher("split", 128, 32, 4)
    for n, d in ((8192, 64), (8192, 128), (8192, 256), (32768, 128)):
        args, ref = case(n, d)
        err = lambda got: ((got.double() - ref).abs().max() / ref.abs().max()).item()
        line = f"{n:6d}x{d:3d} bf16: shipped {median_seconds(lambda: F.whitened_norms(*args), 10) * 1e3:7.3f} ms err {err(F.whitened_norms(*args)):.1e}"
        if d == 128: line += f"   split/128/32/4 {median_seconds(lambda: split(*args), 10) * 1e3:7.3f} ms err {err(split(*args)):.1e}"
        print(line, flush=True)
    args, ref = case(32768, 128)
    x32 = args[0].float()
    print(f" 32768x128 fp32: shipped {median_seconds(lambda: F.whitened_norms(x32, *args[1:]), 10) * 1e3:7.3f} ms "
          f"err {((F.whitened_norms(x32, *args[1:]).double() - ref).abs().max() / ref.abs().max()).item():.1e}", flush=True)
