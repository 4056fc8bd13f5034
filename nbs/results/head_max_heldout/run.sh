#!/usr/bin/env bash
# Held out: the default's score with the layer budget measured from each layer's most demanding KV head
# (../head_max_budget_seed0, screened on seed 0 there), on SmolLM2's held-out needle set with its prefix (seed 1, the
# questions of ../defaults_heldout/smollm2_needle_prefix_s1 and ../pivoted_heldout, where the default's rows are), in
# a fresh folder beside the full cache. Nothing is chosen here. Run from the repository root, in the kvpress environment.
# The second set is Qwen2.5-Coder's held-out needle (stated once, no answer prefix; ../defaults_heldout/qwen_needle_s1).
# Then the scoreboard's other held-out sets of the two models the budget was screened on, in the commands of the folders
# the default's rows are in: SmolLM2's passkey (seeds 1 and 2, ../defaults_heldout), Qwen's multi-key set without and
# with its answer prefix (one format per folder, ../tasks_heldout) and its code task (blank format, ../tasks_heldout).
# Gemma-3 has one KV head per layer, where the most demanding head is the mean: its head-max budget is the default's.
# Usage: bash nbs/results/head_max_heldout/run.sh smollm2|qwen|smollm2-passkey|qwen-multikey|qwen-multikey-prefix|qwen-code OUT [FORMAT]
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
  smollm2-passkey)
    for seed in 1 2; do
      jacap-nb bench passkey --model smollm2 --methods full "$(m smollm2)" --ratios 0.75 0.9 --formats "${formats[@]}" \
        --seed $seed --n 4 --lengths 1024 --threads 1 --out "$out/smollm2_passkey_s$seed"; done ;;
  qwen-multikey)
    for f in "${formats[@]}"; do
      jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats $f \
        --no-answer-prefix --seed 1 --lengths 1024 --n 40 --threads 1 --out "$out/qwen_multikey_$f"; done ;;
  qwen-multikey-prefix)
    for f in "${formats[@]}"; do
      jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats $f \
        --answer-prefix --max-new-tokens 16 --seed 1 --lengths 1024 --n 40 --threads 1 --out "$out/qwen_multikey_${f}_prefix"; done ;;
  qwen-code)
    for p in no-answer-prefix answer-prefix; do
      jacap-nb bench code --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats blank \
        --$p --seed 1 --n 8 --threads 1 --out "$out/qwen_code_blank$([ $p = answer-prefix ] && echo _prefix)"; done ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
