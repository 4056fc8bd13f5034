"""Why the value step decides the ranking on one model and not on another: per compressed layer and KV head, how widely
the prior's weights w_i and the value factor g_i (the centred-value leverage under uniform weights) spread over the
context (standard deviation of their logs), and where the key's tokens rank under each (mean percentile, 1 = top).
The default's capacity score is about w_i g_i, so the factor with the wider spread decides which tokens stay.
Seed-0 passkey prompts (1K tokens, Britannica), blank format; nothing is chosen here.
Usage (main environment): python factor_spread.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, statistics, sys
import torch
from jacap_nb import scoring
from seed0_prompts import CapacityJacap, each_prompt, key_percentile as percentile

LOG = []

class Recording(CapacityJacap):
    "The capacity score (the default then), recording each layer's prior weights, value factor and scores (the press's own inputs)."
    def __call__(self, view):
        s = super().__call__(view)
        w = scoring._prior_attention(view.keys_pre.float(), self.breadth)
        g = scoring.centred_leverage(torch.ones_like(w), view.values.float(), self.noise_var)
        LOG.append(dict(w=w[0], g=g[0], s=s[0].float()))
        return s

def spread(x, skip=4): return float(x[skip:].clamp_min(1e-30).log().std())

out, n, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
per_layer = {}
for name, pos in each_prompt(models, n, Recording(), LOG):
    for l, d in enumerate(LOG):
        for h in range(d["w"].shape[0]):
            w, g, s = d["w"][h], d["g"][h], d["s"][h]
            per_layer.setdefault(name, {}).setdefault(l, []).append(dict(
                spread_w=spread(w), spread_g=spread(g), key_w=percentile(w, pos), key_g=percentile(g, pos), key_score=percentile(s, pos)))
res = {name: {l: {k: round(statistics.mean(r[k] for r in rs), 3) for k in rs[0]} for l, rs in d.items()} for name, d in per_layer.items()}
for name, r in res.items(): print(name, json.dumps(r), flush=True)
json.dump(res, open(out, "w"), indent=1)
