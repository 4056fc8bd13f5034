#!/usr/bin/env bash
# Seed 0 only: the layer budget measured from question-time attention (measure.py) against the default's re-reading
# budget, on the seed-0 sets of ../floor_seed0 (SmolLM2 and Qwen2.5-Coder-0.5B; Gemma-3 is an evaluation model and is
# not run here). Each committed folder is copied to OUT and only the candidate's rows are added (the bench resumes
# rows.jsonl: same prompts, same prefills). Run from the repository root, in the kvpress environment, after
#   python nbs/results/question_budget_seed0/measure.py MODEL nbs/results/question_budget_seed0/MODEL.json
# Usage: bash nbs/results/question_budget_seed0/run.sh smollm2|qwen-needle|qwen-multikey OUT
set -euo pipefail
which=$1; out=$2
here=nbs/results
copy() { mkdir -p "$out"; [ -d "$out/$2" ] || cp -r "$here/$1" "$out/$2"; }
m() { echo "jacap:budget=$here/question_budget_seed0/$1.json"; }
common=(--formats blank kvpress --seed 0 --threads 1)
case $which in
  smollm2)
    copy floor_seed0/smollm2_passkey smollm2_passkey
    jacap-nb bench passkey --model smollm2 --methods "$(m smollm2)" "${common[@]}" --ratios 0.75 0.9 --lengths 1024 --n 2 --out "$out/smollm2_passkey" ;;
  qwen-needle)
    copy floor_seed0/qwen_needle qwen_needle
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods "$(m qwen2.5-coder-0.5b)" "${common[@]}" --no-answer-prefix --ratios 0.9 --n 2 --out "$out/qwen_needle" ;;
  qwen-multikey)
    copy floor_seed0/qwen_multikey qwen_multikey
    jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods "$(m qwen2.5-coder-0.5b)" "${common[@]}" --no-answer-prefix --ratios 0.9 --lengths 1024 --n 10 --out "$out/qwen_multikey" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
