#!/usr/bin/env bash
# Held out: the layer floor chosen on seed 0 (../floor_seed0) against the default, on the held-out sets already in
# ../defaults_heldout and ../tasks_heldout. Each committed folder is copied to OUT and only the new method's rows are
# added (the bench resumes rows.jsonl; every row of the old methods stays as it was, same prefills, same examples).
# Usage (kvpress environment): bash nbs/results/floor_heldout/run.sh smollm2|qwen-multikey|qwen-needle|gemma3 OUT [METHOD]
set -euo pipefail
which=$1; out=$2; method=${3:-jacap:layer_floor=0.25}
here=$(cd "$(dirname "$0")/.." && pwd)
copy() { mkdir -p "$out"; [ -d "$out/$2" ] || cp -r "$here/$1" "$out/$2"; }
r=(--methods "$method" --ratios 0.75 0.9 --threads 1)
case $which in
  smollm2)
    for s in 1 2; do
      copy defaults_heldout/smollm2_passkey_s$s smollm2_passkey_s$s
      jacap-nb bench passkey --model smollm2 "${r[@]}" --formats blank kvpress --seed $s --n 4 --lengths 1024 --out "$out/smollm2_passkey_s$s"
    done ;;
  qwen-multikey)
    for f in blank kvpress; do
      copy tasks_heldout/qwen_multikey_$f qwen_multikey_$f
      jacap-nb bench multikey --model qwen2.5-coder-0.5b "${r[@]}" --formats $f --no-answer-prefix --seed 1 --lengths 1024 --n 40 --out "$out/qwen_multikey_$f"
    done ;;
  qwen-needle)
    copy defaults_heldout/qwen_needle_s1 qwen_needle_s1
    jacap-nb bench needle --model qwen2.5-coder-0.5b "${r[@]}" --formats blank kvpress --seed 1 --n 8 --max-new-tokens 32 --out "$out/qwen_needle_s1" ;;
  gemma3)
    copy tasks_heldout/gemma3_passkey/seed1 gemma3_passkey_seed1
    jacap-nb bench passkey --model gemma3-270m "${r[@]}" --seed 1 --n 8 --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats blank kvpress --out "$out/gemma3_passkey_seed1" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
