"""Can a knob of the default score keep the key where the default loses it? Seed-0 passkey prompts (1K tokens,
Britannica, blank format), one prefill per prompt; in every compressed layer the default's scorer and its variants
score the same keys, values and queries, and we count the share of the key's tokens that each KV head's top 25% (top
10%) of the tokens holds (the sinks included, as the press ranks them; the budget is uniform here, the press's own
`auto` budget differs by layer). Variants: the prior's breadth c, the value step's noise variance (a multiple m of
"auto": patched into the scorer's capacity step for this script only), the prior's share pi (with the value step), the
prior alone (its key-leverage order) and the rank union of the prior alone and the default (a token stays when either
ranks it high: the top of max(percentile under the prior, percentile under the default)). Nothing is chosen here.
Usage (main environment): python knob_scan.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, sys
import torch
from jacap_nb import scoring
from seed0_prompts import CapacityJacap, top_share_scan

NOISE = [1.0]                       # the multiple of the "auto" noise variance the patched capacity step uses
_capacity_from_gram = scoring._capacity_from_gram
def _scaled_capacity(gram, noise_var):
    a, s2 = _capacity_from_gram(gram, noise_var)
    if NOISE[0] == 1.0 or not isinstance(noise_var, str): return a, s2
    s2 = s2 * NOISE[0]
    return gram / s2[..., None] + torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device), s2
scoring._capacity_from_gram = _scaled_capacity

VARIANTS = {"default": dict()}
VARIANTS.update({f"breadth={c}": dict(breadth=c) for c in (0.5, 2, 4, 8, 16)})
VARIANTS.update({f"noise={m}x": dict(noise=m) for m in (0.01, 0.1, 10, 100)})
VARIANTS.update({f"prior_weight={p}": dict(prior_weight=p) for p in (0.0, 0.25, 0.75, 0.9, 1.0)})
VARIANTS["prior alone"] = dict(prior_weight=1.0, score="attention")

LOG = []
class Recording(CapacityJacap):
    "The capacity score (the default then); records every variant's scores of the same layer inputs."
    def __call__(self, view):
        out, rec = super().__call__(view), {}
        for name, kw in VARIANTS.items():
            kw = dict(kw); NOISE[0] = kw.pop("noise", 1.0)
            rec[name] = CapacityJacap(**kw)(view).float(); NOISE[0] = 1.0
        rec["rank union: prior alone or default"] = scoring.rank_union(rec["prior alone"], rec["default"])
        LOG.append(rec)
        return out

out, n, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = top_share_scan(models, n, Recording(), LOG)
for name, per_model in res.items():
    for v, r in per_model.items(): print(name, v, r, flush=True)
json.dump(res, open(out, "w"), indent=1)
