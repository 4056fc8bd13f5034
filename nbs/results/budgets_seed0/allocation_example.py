"Per-(layer, KV head) kept tokens of one seed-0 passkey prompt at 90% under budget='heads' / 'layers' (for 16_results)."
import json, sys, torch
from jacap_nb.models import load_smollm2
from jacap_nb.presses import make_press
from jacap_nb.pipeline import compress_context
from jacap_nb import tasks
model, tok = load_smollm2()
ex = [e for e in tasks.passkey_examples(lengths=(2048,), depths=(0.5,), filler="pydoc", seed=0, count_tokens=tasks.token_counter(tok))][0]
out = dict(uid=ex.uid, ratio=0.9, command="python allocation_example.py allocation.json (jacap_nb " + __import__("jacap_nb").__version__ + ")")
for budget in ("heads", "layers", "uniform"):
    press = make_press("jacap", 0.9, queries="replay", score="attention", prior_weight=0, budget=budget)
    ctx = compress_context(model, tok, ex.context, press)
    kept = [[int(x) for x in (l.slot_valid.sum(-1)[0] if l.slot_valid is not None else torch.full((l.keys.shape[1],), l.keys.shape[2]))]
            for l in ctx.cache.layers]
    out[budget] = dict(kept=kept, slots=[l.keys.shape[2] for l in ctx.cache.layers], n_tokens=ctx.n_tokens, nbytes=ctx.nbytes)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print({k: (sum(map(sum, v["kept"])), sum(v["slots"]) * 3, v["nbytes"]) for k, v in out.items() if isinstance(v, dict)})
