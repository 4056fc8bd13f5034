#!/usr/bin/env bash
# Every GPU check of the library in one command, on any CUDA machine with torch, triton and transformers (the checkout on
# PYTHONPATH, nothing installed): the gpu cells of 03_kernels and 03b_fused, `jacap-nb gpu-check` (15b_gpu_check),
# the kept tokens of SmolLM2's first layers on the GPU against its CPU (kept_tokens.py; GGUF from truncate_gguf.py,
# because the whole 93 MB model does not travel to a lent machine), then the kernel benchmark (04_kernel_bench). First,
# compare_norms.py: the shipped whitened-norms kernel against the launch tune_norms.py measured.
# Usage: bash nbs/results/gpu_check/run.sh OUT [SMOLLM2_PREFIX.gguf]. Each step's output goes to OUT; a failing step
# is reported and the next one still runs; the exit status is that of the worst step.
set -uo pipefail
out=$1; gguf=${2:-}
root=$(cd "$(dirname "$0")/../../.." && pwd); here=$root/nbs/results/gpu_check
export PYTHONUNBUFFERED=1 PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out"; rc=0
step() { local name=$1; shift; echo "=== $name"; local t0=$SECONDS
         "$@" 2>&1 | tee "$out/$name.txt"; local r=${PIPESTATUS[0]}
         echo "=== $name: rc $r in $((SECONDS - t0)) s"; [ $r = 0 ] || rc=$r; }
python3 -c "import torch, triton, transformers, platform; print('python', platform.python_version(), 'torch', torch.__version__,
'triton', triton.__version__, 'transformers', transformers.__version__, 'device', torch.cuda.get_device_name())" | tee "$out/versions.txt"
step compare_norms python3 "$here/compare_norms.py"
step cells python3 "$here/gpu_cells.py"
step gpu_check python3 -c "import sys; from jacap_nb.gpu_check import gpu_check_cli; sys.exit(gpu_check_cli(sys.argv[1:]))" --out "$out/gpu_check.json"
[ -n "$gguf" ] && step kept_tokens python3 "$here/kept_tokens.py" "$gguf" "$out/kept_tokens.json"
step kernel_bench python3 -m jacap_nb.kernel_bench --out "$out/kernel_bench.json"
exit $rc
