"""Does the value step rank a key's tokens low because their values repeat elsewhere in the context? Per compressed
layer and KV head, on the seed-0 passkey prompts: each token's redundancy, the largest cosine between its centred value
and any other token's (sinks left out), its value factor g (the centred-value leverage under uniform weights), and where
the key's tokens rank under each (mean percentile, 1 = the top). The rank correlation across tokens says how far g
is a redundancy penalty. Nothing is chosen here.
Usage (main environment): python value_redundancy.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, statistics, sys
import torch
from jacap_nb import scoring
from seed0_prompts import CapacityJacap, each_prompt, key_percentile as percentile

LOG = []
class Recording(CapacityJacap):
    "The capacity score (the default then), recording each layer's values."
    def __call__(self, view):
        LOG.append(view.values[0].float())
        return super().__call__(view)

def ranks(x): return x.argsort().argsort().float()
def spearman(a, b): ra, rb = ranks(a) - ranks(a).mean(), ranks(b) - ranks(b).mean(); return float((ra @ rb) / (ra.norm() * rb.norm()))

out, n, models, skip = sys.argv[1], int(sys.argv[2]), sys.argv[3:], 4
per_layer = {}
for name, pos in each_prompt(models, n, Recording(), LOG):
    for l, v in enumerate(LOG):
        for h in range(v.shape[0]):
            x = v[h, skip:] - v[h, skip:].mean(0)
            u = torch.nn.functional.normalize(x, dim=-1)
            cos = (u @ u.T).fill_diagonal_(-1)
            red = cos.amax(-1)                                        # redundancy: the nearest other value's cosine
            g = scoring.centred_leverage(torch.ones(v.shape[1]), v[h])[skip:]
            p = pos - skip
            per_layer.setdefault(name, {}).setdefault(l, []).append(dict(
                key_redundancy=float(red[p].mean()), context_redundancy=float(red.median()),
                key_g=percentile(g, p), key_redundancy_pct=percentile(red, p), spearman_g_redundancy=spearman(g, red)))
res = {name: {l: {k: round(statistics.mean(r[k] for r in rs), 3) for k in rs[0]} for l, rs in d.items()} for name, d in per_layer.items()}
for name, d in res.items():
    print(name, {k: round(statistics.median(r[k] for r in d.values()), 3) for k in next(iter(d.values()))}, flush=True)
json.dump(res, open(out, "w"), indent=1)
