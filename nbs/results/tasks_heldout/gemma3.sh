#!/usr/bin/env bash
# Gemma-3-270M (an evaluation model: nothing is tuned on it): the passkey with its answer prefix, 1K tokens.
# Seed 0, full cache only, decides whether the task enters its table; seed 1 (40 per cell) compares the default with
# kvpress's one-pass presses replayed on the same prefills -- on the 3 full-attention layers, as our presses run; the
# 15 sliding-window layers keep their 512-token windows under every method.
# Usage (kvpress environment): bash nbs/results/tasks_heldout/gemma3.sh OUT
set -euo pipefail
out=$1
grid=(--lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --threads 1 --formats blank kvpress)
jacap-nb bench passkey --model gemma3-270m --methods full --ratios 0.75 --seed 0 --n 2 "${grid[@]}" --out "$out/seed0"
jacap-nb bench passkey --model gemma3-270m --methods full jacap capkv kvpress:LeverageScore kvpress:Compactor \
  --ratios 0.75 0.9 --seed 1 --n 8 "${grid[@]}" --out "$out/seed1"
