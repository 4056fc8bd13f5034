#!/usr/bin/env bash
# Seed 0, full cache only: which task enters which model's table (a task enters where the full cache scores >= 0.8).
# Usage: bash nbs/results/tasks_seed0/run.sh smollm2|qwen2.5-coder-0.5b|gemma3-270m OUT [N]   (kvpress environment; N examples per task)
set -euo pipefail
model=$1; out=$2; n=${3:-10}
common=(--model "$model" --methods full --ratios 0.75 --formats blank kvpress --seed 0 --threads 1)
for prefix in --no-answer-prefix --answer-prefix; do
  tag=${prefix#--}
  jacap-nb bench qa          "${common[@]}" $prefix --n $((n / 5)) --out "$out/qa-$tag"     # 5 depths
  jacap-nb bench multikey    "${common[@]}" $prefix --lengths 1024 --n "$n" --out "$out/multikey-$tag"
  jacap-nb bench multivalue  "${common[@]}" $prefix --n "$n" --out "$out/multivalue-$tag"
  jacap-nb bench vartrack    "${common[@]}" $prefix --n "$n" --out "$out/vartrack-$tag"
  jacap-nb bench commonwords "${common[@]}" $prefix --n "$n" --out "$out/commonwords-$tag"
  if [ "$model" = qwen2.5-coder-0.5b ]; then    # the code task: the coder model only, 5 depths x 2
    jacap-nb bench code "${common[@]}" $prefix --n 2 --out "$out/code-$tag"
  fi
  if [ "$model" = gemma3-270m ]; then           # Gemma-3 had only the passkey with its prefix (../tasks_heldout/gemma3.sh)
    jacap-nb bench needle "${common[@]}" $prefix --n 2 --out "$out/needle-$tag"   # 5 depths x 2
  fi
done
