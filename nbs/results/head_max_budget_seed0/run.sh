#!/usr/bin/env bash
# Seed 0 only: the default's score with a layer budget whose shares are each layer's most demanding KV head's
# (measure.py), against the default as a user writes it, on seed-0 sets of SmolLM2 and Qwen2.5-Coder-0.5B (Gemma-3 is an
# evaluation model and is not run here). Fresh folders: `jacap` is make_press("jacap", r) at this commit. Run from the
# repository root, in the kvpress environment, after
#   python nbs/results/head_max_budget_seed0/measure.py MODEL nbs/results/head_max_budget_seed0/MODEL.json
# Usage: bash nbs/results/head_max_budget_seed0/run.sh smollm2|smollm2-replay|qwen OUT
set -euo pipefail
which=$1; out=$2
here=nbs/results/head_max_budget_seed0
m() { echo "jacap:budget=$here/$1.json"; }
common=(--formats blank kvpress --seed 0 --threads 1 --ratios 0.75 0.9)
case $which in
  smollm2)
    jacap-nb bench needle --model smollm2 --answer-prefix --methods full jacap "$(m smollm2)" "${common[@]}" --n 4 --out "$out/smollm2_needle_prefix"
    jacap-nb bench passkey --model smollm2 --methods full jacap "$(m smollm2)" "${common[@]}" --lengths 1024 --n 2 --out "$out/smollm2_passkey" ;;
  smollm2-replay)
    # KVzip's score (re-reading, largest attention) under the same budget and under each prompt's own layer shares: does
    # the budget measured once give what the prompt's own shares give?
    jacap-nb bench needle --model smollm2 --answer-prefix --methods full "jacap:queries=replay,score=attention,prior_weight=0,budget=$here/smollm2.json" \
      jacap:queries=replay,score=attention,prior_weight=0,budget=layers "${common[@]}" --n 4 --out "$out/smollm2_needle_prefix_replay" ;;
  qwen)
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full jacap "$(m qwen2.5-coder-0.5b)" "${common[@]}" --no-answer-prefix --n 2 \
      --max-new-tokens 32 --out "$out/qwen_needle"
    jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full jacap "$(m qwen2.5-coder-0.5b)" "${common[@]}" --no-answer-prefix \
      --lengths 1024 --n 10 --out "$out/qwen_multikey" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
