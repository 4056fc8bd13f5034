#!/usr/bin/env bash
# Answers past 2K tokens: SmolLM2's passkey at 4K tokens (held-out seed 1, 40 per cell), the default as a user writes it
# beside the capacity score, CapKV, the paper preset and kvpress's one-pass presses, on the same prompts. Nothing is
# chosen on these rows. The needle (a fact stated once) does not enter at 4K: SmolLM2's full cache answered 1 and 3 of 6
# in a probe (blank / glued). KVzip and AdaKV (a re-reading pass or a full prefill per ratio) were left out for time.
# Usage (kvpress environment, one process per prompt format): bash nbs/results/long_heldout/run.sh OUT blank|kvpress
set -euo pipefail
out=$1; f=$2
jacap-nb bench passkey --model smollm2 --lengths 4096 --seed 1 --n 8 --ratios 0.75 0.9 --formats "$f" --threads 1 \
  --methods full jacap jacap:score=capacity capkv jacap:preset=paper kvpress:LeverageScore kvpress:Compactor \
            kvpress:SnapKV kvpress:TOVA kvpress:KeyDiff kvpress:ExpectedAttention kvpress:CapPress \
  --out "$out/smollm2_passkey_4k_s1/$f"
