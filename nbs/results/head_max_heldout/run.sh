#!/usr/bin/env bash
# Held out: the default's score with the layer budget measured from each layer's most demanding KV head
# (../head_max_budget_seed0, screened on seed 0 there), on SmolLM2's held-out needle set with its prefix (seed 1, the
# questions of ../defaults_heldout/smollm2_needle_prefix_s1 and ../pivoted_heldout, where the default's rows are), in
# a fresh folder beside the full cache. Nothing is chosen here. Run from the repository root, in the kvpress environment.
# The second set is Qwen2.5-Coder's held-out needle (stated once, no answer prefix; ../defaults_heldout/qwen_needle_s1).
# Usage: bash nbs/results/head_max_heldout/run.sh smollm2|qwen OUT [FORMAT]
set -euo pipefail
which=$1; out=$2; formats=(${3:-blank kvpress})
m() { echo "jacap:budget=nbs/results/head_max_budget_seed0/$1.json"; }
case $which in
  smollm2)
    jacap-nb bench needle --model smollm2 --answer-prefix --methods full "$(m smollm2)" \
      --ratios 0.75 0.9 --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1" ;;
  qwen)
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --max-new-tokens 32 --threads 1 --out "$out/qwen_needle_s1" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
