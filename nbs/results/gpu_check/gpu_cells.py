"""The `#| gpu` cells of 03_kernels and 03b_fused, run as written on a CUDA device (tests/test_kernels.py and
tests/test_fused.py run them on the CPU at toy sizes, under Triton's interpreter). Each cell compares the compiled
kernels with the torch scorer on random caches up to 32K tokens and asserts its own tolerance; this prints their lines."""
import json, pathlib, re, sys, time
import torch
from jacap_nb import scoring, kernels
from jacap_nb.fused import triton_context_scores

NBS = pathlib.Path(__file__).resolve().parents[2]
def max_rel_err(a, b): return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()   # both notebooks' helper

def gpu_cell(name:str) -> str:
    nb = json.loads((NBS / name).read_text())
    (src,) = [s for s in (''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code') if re.search(r'^#\|\s*gpu\s*$', s, re.M)]
    return src

if __name__ == "__main__":
    if not torch.cuda.is_available() or kernels.available() != "triton":
        sys.exit(f"needs a CUDA device and compiled Triton; kernels path here: {kernels.available()!r}")
    failed = 0
    for name in sys.argv[1:] or ("03_kernels.ipynb", "03b_fused.ipynb"):
        print(f"== {name}'s gpu cell", flush=True); t0 = time.time()
        try: exec(compile(gpu_cell(name), f"{name}:gpu", "exec"),
                  dict(torch=torch, scoring=scoring, max_rel_err=max_rel_err, triton_context_scores=triton_context_scores))
        except Exception as e: failed += 1; print(f"FAILED: {type(e).__name__}: {e}")
        print(f"== {name}: {'FAILED' if failed else 'passed'} in {time.time() - t0:.1f} s", flush=True)
    sys.exit(1 if failed else 0)
