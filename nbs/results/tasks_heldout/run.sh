#!/usr/bin/env bash
# Held out (seed 1, 40 questions per cell): the default as users write it against kvpress's strongest one-pass presses
# on this model (issue 24's Qwen runs: key leverage and Compactor), on the tasks that entered the model's table on seed 0
# (../tasks_seed0). One captured prefill per context, every press replayed on it.
# Usage (kvpress environment): bash nbs/results/tasks_heldout/run.sh MODEL TASK FORMAT OUT [bench options]
#   e.g. bash nbs/results/tasks_heldout/run.sh qwen2.5-coder-0.5b multikey blank build/heldout/qwen_multikey_blank --n 40
#   (a later `--answer-prefix` overrides the `--no-answer-prefix` below: qwen_code_blank_prefix)
set -euo pipefail
model=$1; task=$2; fmt=$3; out=$4; shift 4
jacap-nb bench "$task" --model "$model" --methods full jacap capkv kvpress:LeverageScore kvpress:Compactor \
  --ratios 0.75 0.9 --formats "$fmt" --no-answer-prefix --seed 1 --threads 1 --out "$out" "$@"
