#!/usr/bin/env bash
# The co-occurrence leverage at lookup breadth 4 (16_results: chosen on seed 0 as the first candidate behind the default
# on none of the seed-0 sets) held out: added to copies of the held-out folders the default was judged on (the bench
# resumes them, so their full-cache and default rows stay the committed ones), and on Gemma-3's held-out passkey with
# the full cache and the default run again beside it (an evaluation model: nothing is chosen on it).
# Usage (main environment): bash nbs/results/cooccurrence_heldout/run.sh OUT; then keep only the new method's rows in
# the six copied folders (16_results reads them with ../defaults_heldout).
set -euo pipefail
out=$1; here=$(dirname "$0"); c4=jacap:score=cooccurrence,lookup_breadth=4
mkdir -p "$out"
for s in smollm2_needle_prefix_s1 smollm2_passkey_s1 smollm2_passkey_s2 qwen_needle_s1; do
  [ -d "$out/$s" ] || cp -r "$here/../defaults_heldout/$s" "$out/"; done
for f in blank kvpress; do [ -d "$out/qwen_multikey_$f" ] || cp -r "$here/../tasks_heldout/qwen_multikey_$f" "$out/"; done
jacap-nb bench needle --model smollm2 --answer-prefix --methods full jacap $c4 --ratios 0.75 0.9 --formats blank kvpress --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1"
for seed in 1 2; do
  jacap-nb bench passkey --model smollm2 --methods full jacap $c4 --ratios 0.75 0.9 --formats blank kvpress --seed $seed --n 4 --lengths 1024 --threads 1 --out "$out/smollm2_passkey_s$seed"; done
jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full jacap $c4 --ratios 0.75 0.9 --formats blank kvpress --seed 1 --n 8 --max-new-tokens 32 --threads 1 --out "$out/qwen_needle_s1"
for f in blank kvpress; do   # multi-key with distractors, no answer prefix, one format per folder (as committed)
  jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full jacap $c4 --ratios 0.75 0.9 --formats $f --no-answer-prefix --seed 1 --threads 1 --out "$out/qwen_multikey_$f" --lengths 1024 --n 40; done
jacap-nb bench passkey --model gemma3-270m --methods full jacap $c4 --ratios 0.75 0.9 --seed 1 --n 8 --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats blank kvpress --threads 1 --out "$out/gemma3_passkey_s1"
