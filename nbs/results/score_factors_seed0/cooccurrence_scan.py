"""Does the co-occurrence leverage keep the key where the default's value step loses it? The same seed-0 passkey
prompts and count as `knob_scan.py` (the share of the key's tokens in each KV head's top 25% / 10%, per compressed
layer), for the default, the prior alone, the rank union and `cooccurrence.cooccurrence_leverage` of the default's mixture
weights at lookup breadths c = 1, 4, 16 (log r, as the press ranks). Two ablations at c = 16 say which part does the
work: without the values (the Gram is the co-occurrence factor alone) and without the off-diagonal co-occurrence (each
token's own factor only, no competition). Nothing is chosen here.
Usage (main environment): python cooccurrence_scan.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, sys
import torch
from jacap_nb import scoring
from jacap_nb.cooccurrence import cooccurrence_leverage, _hat
from jacap_nb.scorers import Jacap
from seed0_prompts import LOG, WeightsRecording, top_share_scan

def ablation(w, values, keys, c, off_diagonal=True, with_values=True):
    "The co-occurrence Gram with one part removed, its log kernel leverage (float64, `noise_var` 'auto' as in the library)."
    w, v, n, d = w.double(), values.double(), keys.shape[-2], keys.shape[-1]
    v = v - (w[..., None, :] @ v) / w.sum(-1)[..., None, None]
    e = c * n / d * _hat(keys.double())
    if not off_diagonal: return (w.log() + 2 * v.norm(dim=-1).log() + e.diagonal(dim1=-2, dim2=-1)).float()   # a diagonal G: r ranks like G_ii
    g = (e - e.amax((-2, -1), keepdim=True)).exp() * w.sqrt()[..., :, None] * w.sqrt()[..., None, :]
    if with_values: g = g * (v @ v.mT)
    a = g + (g.diagonal(dim1=-2, dim2=-1).sum(-1) / v.shape[-1])[..., None, None] * torch.eye(n, dtype=g.dtype)
    return (g * torch.cholesky_inverse(torch.linalg.cholesky(a))).sum(-1).clamp_min(1e-300).log().float()   # log r, as the press

class Recording(WeightsRecording):
    "The variants' scores of the same layer inputs (w: the capacity score's mixture weights)."
    def record(self, view, out, w):
        k, v = view.keys_pre, view.values
        rec = {"default": out.float(), "prior alone": Jacap(prior_weight=1.0, score="attention")(view).float()}
        rec["rank union"] = scoring.rank_union(rec["prior alone"], rec["default"])
        for c in (1, 4, 16): rec[f"cooccurrence c={c}"] = cooccurrence_leverage(w, v, k, breadth=c, log=True)
        rec["c=16 without values"] = ablation(w, v, k, 16, with_values=False)
        rec["c=16 without co-occurrence"] = ablation(w, v, k, 16, off_diagonal=False)
        return rec

out, n, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = top_share_scan(models, n, Recording(), LOG)
for name, per_model in res.items():
    for v, r in per_model.items(): print(name, v, r["top25"], r["top10"], flush=True)
json.dump(res, open(out, "w"), indent=1)
