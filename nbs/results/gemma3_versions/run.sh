#!/usr/bin/env bash
# Gemma-3-270M's held-out passkey set (../tasks_heldout/gemma3_passkey/seed1, made in kvpress's environment with
# transformers 5.2.0) again in the main environment (transformers 5.24), where budget="auto" measures a different
# layer budget for this model. Our own presses only (kvpress needs transformers < 5.3). Nothing is chosen here.
# Usage (main environment): bash nbs/results/gemma3_versions/run.sh OUT [FORMAT]
set -euo pipefail
out=$1; formats=(${2:-blank kvpress})
jacap-nb bench passkey --model gemma3-270m --methods full jacap capkv jacap:budget=uniform --ratios 0.75 0.9 --seed 1 --n 8 \
  --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats "${formats[@]}" --threads 1 --out "$out"
