#!/usr/bin/env bash
# Held out: the default's score with the layer budget measured from each layer's most demanding KV head
# (../head_max_budget_seed0, screened on seed 0 there), on SmolLM2's held-out needle set with its prefix (seed 1, the
# questions of ../defaults_heldout/smollm2_needle_prefix_s1 and ../pivoted_heldout, where the default's rows are), in
# a fresh folder beside the full cache. Nothing is chosen here. Run from the repository root, in the kvpress environment.
# Usage: bash nbs/results/head_max_heldout/run.sh OUT [FORMAT]
set -euo pipefail
out=$1; formats=(${2:-blank kvpress})
jacap-nb bench needle --model smollm2 --answer-prefix --methods full jacap:budget=nbs/results/head_max_budget_seed0/smollm2.json \
  --ratios 0.75 0.9 --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1"
