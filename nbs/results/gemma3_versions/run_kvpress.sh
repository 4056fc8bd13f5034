#!/usr/bin/env bash
# Gemma-3-270M's held-out passkey set (seed 1, the same examples as passkey_seed1) in kvpress's environment
# (transformers 5.2.0), now that load_model builds Gemma's tokenizer itself (05_models, gemma_gguf_tokenizer): the
# one-pass kvpress presses beside ours, the side by side the withdrawn rows had, made again. kvpress's CapPress and
# ExpectedAttentionPress crash on Gemma-3 in their own code (../sidebyside_heldout/run.sh says why). Nothing is chosen.
# Usage (kvpress environment): bash nbs/results/gemma3_versions/run_kvpress.sh OUT [FORMAT]
set -euo pipefail
out=$1; formats=(${2:-blank kvpress})
jacap-nb bench passkey --model gemma3-270m --methods full jacap capkv jacap:preset=paper kvpress:LeverageScore \
  kvpress:Compactor kvpress:SnapKV kvpress:TOVA kvpress:KeyDiff --ratios 0.75 0.9 --seed 1 --n 8 \
  --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats "${formats[@]}" --threads 1 --out "$out"
