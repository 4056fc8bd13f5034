#!/usr/bin/env bash
# Next-token fidelity on real text, every model (held out: seed 1; nothing is chosen here). Each document's first
# ~1K tokens of Britannica are prefilled and compressed once per method and ratio; the next 64 tokens are
# teacher-forced through the compressed cache and compared with the full cache's logits: KL(full || compressed) in
# nats per token and top-1 agreement (`jacap_nb.tasks.token_fidelity`).
# Usage (kvpress environment): bash nbs/results/fidelity_heldout/run.sh smollm2|qwen2.5-coder-0.5b|gemma3-270m OUT [N]
set -euo pipefail
model=$1; out=$2; n=${3:-20}
methods=(full jacap capkv jacap:preset=paper kvpress:LeverageScore kvpress:Compactor kvpress:SnapKV kvpress:TOVA
         kvpress:KeyDiff kvpress:CapPress kvpress:ExpectedAttention)
# kvpress's CapPress and ExpectedAttentionPress crash on Gemma-3 in their own code (`../sidebyside_heldout/run.sh`).
[ "$model" = gemma3-270m ] && methods=("${methods[@]:0:9}")
jacap-nb bench fidelity --model "$model" --methods "${methods[@]}" --ratios 0.75 0.9 --formats blank --seed 1 \
  --n "$n" --prefix-tokens 1024 --continuation-tokens 64 --threads 1 --out "$out/$model"
