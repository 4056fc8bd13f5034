#!/usr/bin/env bash
# Gemma-3-270M's seed-0 gate again, with the tokenizer jacap_nb builds (load_model refuses the wrong one): full cache
# only, which task enters Gemma's table (>= 0.8). The suite of ../tasks_seed0/run.sh plus the passkey, whose template
# always ends in its answer prefix (../tasks_heldout/gemma3.sh's seed-0 grid). Nothing but the full cache runs; nothing is chosen among presses here.
# Usage (kvpress environment): bash nbs/results/gemma3_versions/gate.sh OUT
set -euo pipefail
out=$1; here=$(dirname "$0")
jacap-nb bench passkey --model gemma3-270m --methods full --ratios 0.75 --seed 0 --n 2 --lengths 1024 \
  --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --threads 1 --formats blank kvpress \
  --out "$out/passkey-answer-prefix"
bash "$here/../tasks_seed0/run.sh" gemma3-270m "$out" 10
