#!/usr/bin/env bash
# Answers past 2K tokens: the passkey at 4K tokens (held-out seed 1, 40 per cell), the default as a user writes it beside
# the capacity score, CapKV, the paper preset and kvpress's one-pass presses, on the same prompts. Nothing is chosen on
# these rows. On SmolLM2 the needle (a fact stated once) does not enter at 4K: its full cache answered 1 and 3 of 6 in a
# probe (blank / glued). KVzip and AdaKV (a re-reading pass or a full prefill per ratio) were left out for time. On
# Gemma-3 (an evaluation model), kvpress's CapPress and ExpectedAttention crash inside kvpress (../sidebyside_heldout).
# Usage (kvpress environment, one process per prompt format): bash nbs/results/long_heldout/run.sh OUT blank|kvpress [gemma3]
set -euo pipefail
out=$1; f=$2; which=${3:-smollm2}
ours=(full jacap jacap:score=capacity capkv jacap:preset=paper)
if [ "$which" = gemma3 ]; then
  jacap-nb bench passkey --model gemma3-270m --lengths 4096 --seed 1 --n 8 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica \
    --ratios 0.75 0.9 --formats "$f" --threads 1 --out "$out/gemma3_passkey_4k_s1/$f" \
    --methods "${ours[@]}" kvpress:LeverageScore kvpress:Compactor kvpress:SnapKV kvpress:TOVA kvpress:KeyDiff
else
  jacap-nb bench passkey --model smollm2 --lengths 4096 --seed 1 --n 8 --ratios 0.75 0.9 --formats "$f" --threads 1 \
    --methods "${ours[@]}" kvpress:LeverageScore kvpress:Compactor \
              kvpress:SnapKV kvpress:TOVA kvpress:KeyDiff kvpress:ExpectedAttention kvpress:CapPress \
    --out "$out/smollm2_passkey_4k_s1/$f"
fi
