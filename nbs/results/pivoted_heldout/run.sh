#!/usr/bin/env bash
# The co-occurrence leverage at lookup breadth 4 through 16 pivots (`pivots=16`, O(N m (d + m)) in place of O(N^3); m
# chosen on seed 0 by ../score_factors_seed0/landmark_scan.py) held out on the sets the exact form was: added to copies
# of the same held-out folders (the bench resumes them, so the full cache's and the default's rows stay the committed
# ones); on Gemma-3 (an evaluation model: nothing is chosen on it) in a fresh folder with the full cache beside it.
# Then (`qwen-more`) on Qwen's other tables: multi-key with its answer prefix and the code task, with and without it.
# Then (`gemma-needle`, after it became the default) on Gemma-3's needle with its prefix (not on the scoreboard).
# `jacap` in these commands is the capacity score, the default when they ran (../README.md).
# Usage (main environment): bash nbs/results/pivoted_heldout/run.sh OUT smollm2|qwen|qwen-more|gemma-needle; then keep
# only the new rows.
set -euo pipefail
out=$1; which=$2; here=$(dirname "$0"); p16=jacap:score=cooccurrence,lookup_breadth=4,pivots=16
mkdir -p "$out"
if [ "$which" = smollm2 ]; then
  for s in smollm2_needle_prefix_s1 smollm2_passkey_s1 smollm2_passkey_s2; do
    [ -d "$out/$s" ] || cp -r "$here/../defaults_heldout/$s" "$out/"; done
  jacap-nb bench needle --model smollm2 --answer-prefix --methods full jacap $p16 --ratios 0.75 0.9 --formats blank kvpress --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1"
  for seed in 1 2; do
    jacap-nb bench passkey --model smollm2 --methods full jacap $p16 --ratios 0.75 0.9 --formats blank kvpress --seed $seed --n 4 --lengths 1024 --threads 1 --out "$out/smollm2_passkey_s$seed"; done
  jacap-nb bench passkey --model gemma3-270m --methods full $p16 --ratios 0.75 0.9 --seed 1 --n 8 --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats blank kvpress --threads 1 --out "$out/gemma3_passkey_s1"
elif [ "$which" = gemma-needle ]; then
  for f in blank kvpress; do
    [ -d "$out/gemma3_needle_prefix_s1/$f" ] || { mkdir -p "$out/gemma3_needle_prefix_s1"; cp -r "$here/../gemma3_versions/needle_prefix_s1/$f" "$out/gemma3_needle_prefix_s1/"; }
    jacap-nb bench needle --model gemma3-270m --answer-prefix --methods full $p16 --ratios 0.75 0.9 --seed 1 --n 8 --formats $f --threads 1 --out "$out/gemma3_needle_prefix_s1/$f"; done
elif [ "$which" = qwen-more ]; then
  for s in qwen_multikey_blank_prefix qwen_multikey_kvpress_prefix qwen_code_blank qwen_code_blank_prefix; do
    [ -d "$out/$s" ] || cp -r "$here/../tasks_heldout/$s" "$out/"; done
  for f in blank kvpress; do
    jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full jacap $p16 --ratios 0.75 0.9 --formats $f --answer-prefix --seed 1 --threads 1 --out "$out/qwen_multikey_${f}_prefix" --lengths 1024 --n 40 --max-new-tokens 16; done
  jacap-nb bench code --model qwen2.5-coder-0.5b --methods full jacap $p16 --ratios 0.75 0.9 --formats blank --no-answer-prefix --seed 1 --threads 1 --n 8 --out "$out/qwen_code_blank"
  jacap-nb bench code --model qwen2.5-coder-0.5b --methods full jacap $p16 --ratios 0.75 0.9 --formats blank --answer-prefix --seed 1 --threads 1 --n 8 --out "$out/qwen_code_blank_prefix"
else
  [ -d "$out/qwen_needle_s1" ] || cp -r "$here/../defaults_heldout/qwen_needle_s1" "$out/"
  for f in blank kvpress; do [ -d "$out/qwen_multikey_$f" ] || cp -r "$here/../tasks_heldout/qwen_multikey_$f" "$out/"; done
  jacap-nb bench needle --model qwen2.5-coder-0.5b --methods full jacap $p16 --ratios 0.75 0.9 --formats blank kvpress --seed 1 --n 8 --max-new-tokens 32 --threads 1 --out "$out/qwen_needle_s1"
  for f in blank kvpress; do   # multi-key with distractors, no answer prefix, one format per folder (as committed)
    jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods full jacap $p16 --ratios 0.75 0.9 --formats $f --no-answer-prefix --seed 1 --threads 1 --out "$out/qwen_multikey_$f" --lengths 1024 --n 40; done
fi
