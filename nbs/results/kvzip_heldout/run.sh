#!/usr/bin/env bash
# Held out: the presses that re-read the context, added to committed sets: KVzip (kvpress's) and Jacap's replay variant.
# Each committed folder is copied to OUT and the bench adds only these methods' rows (it resumes rows.jsonl; same
# examples, same prefills). Nothing is chosen here. make_press("jacap", r, queries="replay") builds KVzip's score and
# allocation inside this library (the label jacap:queries=replay,score=attention,prior_weight=0,budget=heads); before
# that it built Jacap's capacity score with the measured layer budget, spelt out in full in smollm2-needle below.
# Usage (kvpress environment): bash nbs/results/kvzip_heldout/run.sh smollm2-needle|smollm2-needle-kvzip-like|smollm2-needle-layer-budget|smollm2-passkey|qwen-needle|qwen-multikey|qwen-code|qwen-code-prefix|gemma-passkey OUT [FORMAT]
# (FORMAT: one prompt format per process, blank or kvpress; both by default)
set -euo pipefail
which=$1; out=$2; formats=(${3:-blank kvpress})
here=$(cd "$(dirname "$0")/.." && pwd)
copy() { mkdir -p "$out"; [ -d "$out/$2" ] || cp -r "$here/$1" "$out/$2"; }
case $which in
  smollm2-needle)
    # SmolLM2's needle set with its answer prefix (../defaults_heldout): a needle stated once, asked in other words.
    copy defaults_heldout/smollm2_needle_prefix_s1 smollm2_needle_prefix_s1
    # The replay variant as make_press("jacap", r, queries="replay") built it then; the committed rows were made under
    # that label (16_results reads them as this one).
    jacap-nb bench needle --model smollm2 --answer-prefix --methods kvpress:KVzip \
      jacap:queries=replay,score=capacity,prior_weight=0.5,budget=auto --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1" ;;
  smollm2-needle-kvzip-like)
    # The same set with KVzip's score and allocation inside this library: re-reading queries, the largest attention, no
    # prior, and one global ranking over heads (or over layers at the uniform memory). The two settings were chosen on
    # seed-0 passkey prompts (../budgets_seed0); nothing is chosen here.
    copy defaults_heldout/smollm2_needle_prefix_s1 smollm2_needle_prefix_s1
    jacap-nb bench needle --model smollm2 --answer-prefix --methods jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
      jacap:queries=replay,score=attention,prior_weight=0,budget=layers --ratios 0.75 0.9 \
      --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1" ;;
  smollm2-needle-layer-budget)
    # KVzip's score with the one-pass default's allocation: re-reading queries, the largest attention, no prior, and the
    # layer budget measured once per model (budget=auto, the default's), every head of a layer at the layer's share.
    # Beside the per-prompt allocations above (heads, layers) it says whether KVzip's lead over the default on this set
    # is its score or its allocation. A diagnosis: nothing is chosen here.
    copy defaults_heldout/smollm2_needle_prefix_s1 smollm2_needle_prefix_s1_layer_budget
    jacap-nb bench needle --model smollm2 --answer-prefix --methods jacap:queries=replay,score=attention,prior_weight=0,budget=auto \
      --ratios 0.75 0.9 --formats "${formats[@]}" --seed 1 --n 8 --threads 1 --out "$out/smollm2_needle_prefix_s1_layer_budget" ;;
  smollm2-passkey)
    # SmolLM2's passkey sets (../defaults_heldout, seeds 1 and 2, 20 examples each): our own template (the key stated
    # twice, the answer prefix "The pass key is "), the easiest task here, so the comparison is not left to harder sets.
    for s in 1 2; do
      copy defaults_heldout/smollm2_passkey_s$s smollm2_passkey_s$s
      jacap-nb bench passkey --model smollm2 --methods kvpress:KVzip jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
        --ratios 0.75 0.9 --formats "${formats[@]}" --seed $s --n 4 --lengths 1024 --threads 1 --out "$out/smollm2_passkey_s$s"
    done ;;
  qwen-needle)
    # Qwen2.5-Coder's needle set (../defaults_heldout): KVzip and the replay variant with KVzip's score and allocation
    # (what make_press("jacap", r, queries="replay") builds since it was chosen on SmolLM2's seed-0 passkey prompts).
    copy defaults_heldout/qwen_needle_s1 qwen_needle_s1
    jacap-nb bench needle --model qwen2.5-coder-0.5b --methods kvpress:KVzip jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
      --ratios 0.75 0.9 --formats "${formats[@]}" --seed 1 --n 8 --max-new-tokens 32 --threads 1 --out "$out/qwen_needle_s1" ;;
  qwen-multikey)
    # Qwen2.5-Coder's multi-key set (../tasks_heldout, one folder per format: 8 facts in ~1K tokens, one asked, no answer
    # prefix): KVzip and the replay variant as a user writes it, a third task for the comparison with the presses that
    # re-read the context.
    for f in "${formats[@]}"; do
      copy tasks_heldout/qwen_multikey_$f qwen_multikey_$f
      jacap-nb bench multikey --model qwen2.5-coder-0.5b --methods kvpress:KVzip jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
        --ratios 0.75 0.9 --formats "$f" --no-answer-prefix --seed 1 --lengths 1024 --n 40 --threads 1 --out "$out/qwen_multikey_$f"
    done ;;
  qwen-code)
    # Qwen2.5-Coder's code task (../tasks_heldout/qwen_code_blank: ~1K tokens of a stdlib module, a question for a
    # function's def line, no answer prefix, `blank` only, where it entered the table): KVzip and the replay variant as
    # a user writes it, a fourth task for the comparison with the presses that re-read the context.
    copy tasks_heldout/qwen_code_blank qwen_code_blank
    jacap-nb bench code --model qwen2.5-coder-0.5b --methods kvpress:KVzip jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
      --ratios 0.75 0.9 --formats blank --no-answer-prefix --seed 1 --n 8 --threads 1 --out "$out/qwen_code_blank" ;;
  qwen-code-prefix)
    # The same code task with its answer prefix (../tasks_heldout/qwen_code_blank_prefix: the reply starts
    # with a code fence), a sixth task for the comparison (the passkey above is the fifth).
    copy tasks_heldout/qwen_code_blank_prefix qwen_code_blank_prefix
    jacap-nb bench code --model qwen2.5-coder-0.5b --methods kvpress:KVzip jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
      --ratios 0.75 0.9 --formats blank --answer-prefix --seed 1 --n 8 --threads 1 --out "$out/qwen_code_blank_prefix" ;;
  gemma-passkey)
    # Gemma-3-270M's passkey set (../gemma3_versions/sidebyside_s1, one folder per format): the replay variant as a user
    # writes it. KVzip is not run: it runs only in kvpress's own pipeline, which on Gemma-3 compresses the sliding-window
    # layers too (../gemma3_kvpress), so its memory would not match the presses here.
    for f in "${formats[@]}"; do
      copy gemma3_versions/sidebyside_s1/$f gemma3_passkey_s1_$f
      jacap-nb bench passkey --model gemma3-270m --methods jacap:queries=replay,score=attention,prior_weight=0,budget=heads \
        --ratios 0.75 0.9 --seed 1 --n 8 --lengths 1024 --depths 0.1 0.3 0.5 0.7 0.9 --filler britannica --formats "$f" \
        --threads 1 --out "$out/gemma3_passkey_s1_$f"
    done
    # The committed folder gemma3_passkey_s1 holds only the replay rows of both formats (and one config.json).
    ;;
  *) echo "unknown set $which"; exit 2 ;;
esac
