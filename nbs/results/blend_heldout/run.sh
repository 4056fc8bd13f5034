#!/usr/bin/env bash
# Held out: the default's score under the layer budget lam of the way from the default's rule (mean over a layer's KV
# heads) to the head-max rule (its most demanding head), lam chosen on seed 0 (../blend_budget_seed0, its README's rule),
# on the held-out sets where the two rules differ (../head_max_heldout): SmolLM2's needle with its prefix (seed 1) and its
# passkey (seeds 1 and 2), both formats, and Qwen's code task without and with its prefix (`blank`), in the commands of
# the folders the default's and the head-max rows are in, each beside the full cache. Nothing is chosen here. Run from
# the repository root, in the kvpress environment.
# `qwen` is Qwen2.5-Coder's held-out needle (stated once, no answer prefix; ../head_max_heldout's `qwen` case), where
# the two rules were level; FORMAT runs one format into its own folder (one process per format). `qwen-multikey` and
# `qwen-multikey-prefix` are Qwen's multi-key set without and with its answer prefix, one folder per format, in the
# commands of ../head_max_heldout's cases of the same names.
# Usage: bash nbs/results/blend_heldout/run.sh smollm2|qwen-code|qwen|qwen-multikey|qwen-multikey-prefix LAM OUT [FORMAT]
set -euo pipefail
which=$1; lam=$2; out=$3; formats=(${4:-blank kvpress})
m() { echo "jacap:budget=nbs/results/blend_budget_seed0/${1}_l$lam.json"; }
case $which in
  smollm2)
    jacap-nb bench needle --model smollm2 --answer-prefix --methods full "$(m smollm2)" \
      --ratios 0.75 0.9 --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1"
    for seed in 1 2; do
      jacap-nb bench passkey --model smollm2 --methods full "$(m smollm2)" --ratios 0.75 0.9 --formats "${formats[@]}" \
        --seed $seed --n 4 --lengths 1024 --threads 1 --out "$out/smollm2_passkey_s$seed"; done ;;
  qwen-code)
    for p in no-answer-prefix answer-prefix; do
      jacap-nb bench code --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats blank \
        --$p --seed 1 --n 8 --threads 1 --out "$out/qwen_code_blank$([ $p = answer-prefix ] && echo _prefix)"; done ;;
  qwen)
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --max-new-tokens 32 --threads 1 --out "$out/qwen_needle_s1${4:+_$4}" ;;
  qwen-multikey)
    for f in "${formats[@]}"; do
      jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats $f \
        --no-answer-prefix --seed 1 --lengths 1024 --n 40 --threads 1 --out "$out/qwen_multikey_$f"; done ;;
  qwen-multikey-prefix)
    for f in "${formats[@]}"; do
      jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full "$(m qwen2.5-coder-0.5b)" --ratios 0.75 0.9 --formats $f \
        --answer-prefix --max-new-tokens 16 --seed 1 --lengths 1024 --n 40 --threads 1 --out "$out/qwen_multikey_${f}_prefix"; done ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
