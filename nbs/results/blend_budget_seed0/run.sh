#!/usr/bin/env bash
# Seed 0 only: the default's score under layer budgets between the default's (each layer's share the mean over its KV
# heads) and the head-max one (its most demanding head's), lam = 0.25, 0.5, 0.75 (measure.py). Held out, the head-max
# budget (lam = 1) gained SmolLM2's needle and lost SmolLM2's passkey and Qwen's code task at 90% (../head_max_heldout);
# these are the sets screened here. The default's and the head-max rows of SmolLM2's seed-0 sets are in
# ../head_max_budget_seed0 (same prompts, this folder's full cache checks it); the code task had no seed-0 run of either,
# so its folders have all of them. Gemma-3 (one KV head per layer: every lam gives the default's budget) is not run.
# Run from the repository root, in the kvpress environment, after
#   python nbs/results/blend_budget_seed0/measure.py MODEL nbs/results/blend_budget_seed0/MODEL 0.25 0.5 0.75
# Usage: bash nbs/results/blend_budget_seed0/run.sh smollm2|qwen-code|qwen OUT
set -euo pipefail
which=$1; out=$2
here=nbs/results/blend_budget_seed0
b() { for l in 0.25 0.5 0.75; do echo "jacap:budget=$here/${1}_l$l.json"; done; }
common=(--seed 0 --threads 1 --ratios 0.75 0.9)
case $which in
  smollm2)
    jacap-nb bench needle --model smollm2 --answer-prefix --methods full $(b smollm2) --formats blank kvpress "${common[@]}" --n 4 --out "$out/smollm2_needle_prefix"
    jacap-nb bench passkey --model smollm2 --methods full $(b smollm2) --formats blank kvpress "${common[@]}" --lengths 1024 --n 2 --out "$out/smollm2_passkey" ;;
  qwen-code)
    for p in no-answer-prefix answer-prefix; do
      jacap-nb bench code --model qwen2.5-coder-0.5b --methods full jacap jacap:budget=nbs/results/head_max_budget_seed0/qwen2.5-coder-0.5b.json \
        $(b qwen2.5-coder-0.5b) --formats blank --$p "${common[@]}" --n 2 --out "$out/qwen_code_blank$([ $p = answer-prefix ] && echo _prefix)"; done ;;
  qwen)
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full $(b qwen2.5-coder-0.5b) --formats blank kvpress "${common[@]}" --no-answer-prefix --n 2 \
      --max-new-tokens 32 --out "$out/qwen_needle" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
