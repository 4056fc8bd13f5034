#!/usr/bin/env bash
# Gemma-3-270M's held-out needle with its answer prefix (needle_prefix_s1: seed 1, the same 40 questions per format)
# with kvpress's one-pass presses beside it, so that the task enters the scoreboard (its full cache answers 36/40 in
# both formats). kvpress's environment (transformers 5.2.0); the presses are replayed on the 3 full-attention layers,
# as ours run, and the 15 sliding-window layers keep their windows. CapPress and ExpectedAttentionPress crash on
# Gemma-3 in their own code (../sidebyside_heldout/run.sh says why). The full cache runs again in each fresh folder:
# 16_results' load_runs checks that it answers as the committed rows (made in the main environment) do.
# Nothing is chosen here. Usage (kvpress environment): bash nbs/results/gemma3_versions/run_needle_kvpress.sh OUT [FORMAT]
set -euo pipefail
out=$1; formats=(${2:-blank kvpress})
for f in "${formats[@]}"; do
  jacap-nb bench needle --model gemma3-270m --answer-prefix --methods full kvpress:LeverageScore kvpress:Compactor \
    kvpress:SnapKV kvpress:TOVA kvpress:KeyDiff --ratios 0.75 0.9 --seed 1 --n 8 --formats "$f" --threads 1 --out "$out/$f"
done
