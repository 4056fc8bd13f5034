#!/usr/bin/env bash
# Held out: the presses that re-read the context, added to committed sets. KVzip (kvpress's) and Jacap's replay variant
# as a user writes it (make_press("jacap", r, queries="replay")). Each committed folder is copied to OUT and the bench
# adds only these methods' rows (it resumes rows.jsonl; same examples, same prefills). Nothing is chosen here.
# Usage (kvpress environment): bash nbs/results/kvzip_heldout/run.sh smollm2-needle|smollm2-needle-kvzip-like OUT [FORMAT]
# (FORMAT: one prompt format per process, blank or kvpress; both by default)
set -euo pipefail
which=$1; out=$2; formats=(${3:-blank kvpress})
here=$(cd "$(dirname "$0")/.." && pwd)
copy() { mkdir -p "$out"; [ -d "$out/$2" ] || cp -r "$here/$1" "$out/$2"; }
case $which in
  smollm2-needle)
    # SmolLM2's needle set with its answer prefix (../defaults_heldout): a needle stated once, asked in other words.
    copy defaults_heldout/smollm2_needle_prefix_s1 smollm2_needle_prefix_s1
    jacap-nb bench needle --model smollm2 --answer-prefix --methods kvpress:KVzip jacap:queries=replay --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1" ;;
  smollm2-needle-kvzip-like)
    # The same set with KVzip's score and allocation inside this library: re-reading queries, the largest attention, no
    # prior, and one global ranking over heads (or over layers at the uniform memory). The two settings were chosen on
    # seed-0 passkey prompts (../budgets_seed0); nothing is chosen here.
    copy defaults_heldout/smollm2_needle_prefix_s1 smollm2_needle_prefix_s1
    jacap-nb bench needle --model smollm2 --answer-prefix --methods jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
      jacap:queries=replay,score=attention,prior_weight=0,budget=layers --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1" ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
