#!/usr/bin/env bash
# Which factor of the default score loses the key in Gemma-3's full-attention layers: the default against itself with
# one factor removed at a time (the prior alone, the context band alone, each with and without the value step), on
# seed 0. On Gemma-3 this is a diagnosis only (an evaluation model: nothing is chosen on it); on SmolLM2 and Qwen the
# same rows are the seed-0 evidence a change of default would have to be chosen on.
# Usage (main environment): bash nbs/results/score_factors_seed0/run.sh OUT [SET ...]
# (SET: gemma3-270m, smollm2, qwen2.5-coder-0.5b, smollm2-passkey; all four by default). Then, for the spreads:
# python nbs/results/score_factors_seed0/factor_spread.py OUT/factor_spread.json 5 smollm2 qwen2.5-coder-0.5b gemma3-270m
# and for the knobs: python nbs/results/score_factors_seed0/knob_scan.py OUT/knob_scan.json 5 smollm2 qwen2.5-coder-0.5b gemma3-270m
# and value_redundancy.py, cooccurrence_scan.py and query_breadth.py with the same arguments (OUT/value_redundancy.json,
# OUT/cooccurrence_scan.json, OUT/query_breadth.json).
set -euo pipefail
out=$1; shift; models=("${@:-gemma3-270m smollm2 qwen2.5-coder-0.5b smollm2-passkey}")
methods=(jacap jacap:prior_weight=1,score=attention jacap:prior_weight=1 jacap:score=attention jacap:prior_weight=0
         jacap:prior_weight=0.75 jacap:prior_weight=0.9 jacap:score=union   # knob_scan.py's best candidates
         jacap:score=cooccurrence                                            # cooccurrence_scan.py's
         jacap:score=cooccurrence,lookup_breadth=1 jacap:score=cooccurrence,lookup_breadth=4)   # query_breadth.py's range
for m in ${models[@]}; do case $m in
  gemma3-270m) jacap-nb bench passkey --model $m --methods full "${methods[@]:0:5}" jacap:score=union jacap:score=cooccurrence jacap:score=cooccurrence,lookup_breadth=4 --ratios 0.75 0.9 --seed 0 --n 2 \
                 --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats blank kvpress --threads 1 \
                 --out "$out/gemma3_passkey" ;;
  smollm2) jacap-nb bench needle --model $m --answer-prefix --methods full "${methods[@]}" --ratios 0.75 0.9 --seed 0 \
             --n 4 --formats blank kvpress --threads 1 --out "$out/smollm2_needle_prefix" ;;
  qwen2.5-coder-0.5b) jacap-nb bench needle --model $m --methods full "${methods[@]}" --ratios 0.75 0.9 --seed 0 \
             --n 2 --formats blank kvpress --threads 1 --out "$out/qwen_needle" ;;
  smollm2-passkey)   # the prior alone and the candidates added to a copy of the seed-0 set the default was chosen on (the bench resumes it)
    mkdir -p "$out"; [ -d "$out/smollm2_passkey" ] || cp -r "$(dirname "$0")/../defaults_seed0/smollm2_passkey" "$out/"
    jacap-nb bench passkey --model smollm2 --methods full jacap jacap:prior_weight=1,score=attention "${methods[@]:5}" --ratios 0.75 0.9 \
      --formats blank kvpress --seed 0 --threads 1 --out "$out/smollm2_passkey" ;;
  *) echo "unknown set $m"; exit 2 ;;
esac; done
