"""Tokens each layer keeps on SmolLM2's seed-0 needle prompts (answer prefix, `blank`): the prompt's own re-reading
allocation over layers (`budget="layers"`, KVzip's score, the default's memory), the same prompt with its needle
sentence taken out, and the layer budget measured once per model (`budget="auto"`, the default's). A diagnosis for
16_results ("Where KVzip's lead on SmolLM2's needle comes from"); nothing is chosen on it.
Usage: python needle_layer_shares.py RATIO OUT.json   (one process per ratio)"""
import json, sys
from tqdm.auto import tqdm
import jacap_nb
from jacap_nb import tasks
from jacap_nb.models import load_model
from jacap_nb.presses import make_press
from jacap_nb.pipeline import compress_context
from jacap_nb.allocation import layer_counts
from jacap_nb.texts import token_counter

ratio, out = float(sys.argv[1]), sys.argv[2]
model, tok = load_model("smollm2")
examples = tasks.needle_examples(n=4, answer_prefix=True, seed=0, count_tokens=token_counter(tok))   # the seed-0 set
per_layer = make_press("jacap", ratio, queries="replay", score="attention", prior_weight=0, budget="layers")
measured = make_press("jacap", ratio, queries="replay", score="attention", prior_weight=0, budget="auto").resolve(model, tok)
rows = []
for ex in tqdm(examples, desc=f"needle prompts at {ratio}"):
    needle = tasks.NEEDLE_TEMPLATES[ex.meta["template"]][0].format(thing=ex.meta["thing"], value=ex.answer)
    assert ex.context.count(needle) == 1, ex.uid
    row = dict(uid=ex.uid)
    for name, text in (("needle", ex.context), ("no_needle", ex.context.replace(needle, "").replace("  ", " "))):
        ctx = compress_context(model, tok, text, per_layer)
        row[name] = [int(l.slot_valid.sum(-1).max()) if l.slot_valid is not None else l.keys.shape[2] for l in ctx.cache.layers]
        row[name + "_tokens"] = ctx.n_tokens
    row["measured"] = layer_counts(measured, row["needle_tokens"])
    assert row["measured"] is not None
    rows.append(row)
json.dump(dict(ratio=ratio, command=f"python needle_layer_shares.py {ratio} {out.split('/')[-1]} (jacap_nb {jacap_nb.__version__})",
               rows=rows), open(out, "w"), indent=1)
