#!/usr/bin/env bash
# Seed 0 only: a per-layer floor under the measured budget (`layer_floor`, a share of the uniform count every layer keeps
# at least), chosen on SmolLM2 and Qwen2.5-Coder-0.5B -- Gemma-3 is an evaluation model and is not run here.
# Usage (kvpress environment): bash nbs/results/floor_seed0/run.sh smollm2|qwen OUT
set -euo pipefail
which=$1; out=$2
methods=(full jacap jacap:layer_floor=0.1 jacap:layer_floor=0.25 jacap:layer_floor=0.5)
common=(--methods "${methods[@]}" --formats blank kvpress --seed 0 --threads 1 --no-answer-prefix)
if [ "$which" = qwen ]; then
  jacap-nb bench needle   --model qwen2.5-coder-0.5b "${common[@]}" --ratios 0.9 --n 2 --out "$out/qwen_needle"
  jacap-nb bench multikey --model qwen2.5-coder-0.5b "${common[@]}" --ratios 0.9 --lengths 1024 --n 10 --out "$out/qwen_multikey"
else
  jacap-nb bench needle   --model smollm2 "${common[@]}" --ratios 0.75 0.9 --n 2 --out "$out/smollm2_needle"
  jacap-nb bench passkey  --model smollm2 --methods "${methods[@]}" --formats blank kvpress --seed 0 --threads 1 \
    --ratios 0.75 0.9 --lengths 1024 --n 2 --out "$out/smollm2_passkey"
fi
