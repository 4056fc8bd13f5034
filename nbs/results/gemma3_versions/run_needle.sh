#!/usr/bin/env bash
# Gemma-3-270M's held-out needle with its answer prefix: the second task that entered its table at seed 0
# (tasks_seed0/needle-answer-prefix, 8/10 in both formats). The default against CapKV, the paper's claim at 90%, in the
# main environment (our presses only: kvpress needs transformers < 5.3). Gemma-3 is an evaluation model: nothing is
# chosen here. Usage (main environment): bash nbs/results/gemma3_versions/run_needle.sh OUT [FORMAT]
set -euo pipefail
out=$1; formats=(${2:-blank kvpress})
jacap-nb bench needle --model gemma3-270m --answer-prefix --methods full jacap capkv --ratios 0.75 0.9 --seed 1 --n 8 \
  --formats "${formats[@]}" --threads 1 --out "$out"
