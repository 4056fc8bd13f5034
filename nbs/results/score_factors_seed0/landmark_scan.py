"""Does the co-occurrence leverage through m pivots (`cooccurrence.cooccurrence_leverage(..., pivots=m)`, a partial
Cholesky) rank like the exact one? Seed-0 passkey prompts as `cooccurrence_scan.py`; in every compressed layer, the
exact leverage at lookup breadth c = 4 of the default's mixture weights against m = 0, 4, 16, 64 pivots (PIVOTS in the
environment changes the list): the share of the exact top 25% / 10% each keeps per head, the key's share of each
head's top 25% / 10%, and the time of each as a ratio to the exact one (one process). m is chosen on SmolLM2 and Qwen.
Usage (main environment): python landmark_scan.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, os, statistics, sys, time
import torch
from jacap_nb.cooccurrence import cooccurrence_leverage
from seed0_prompts import LOG, WeightsRecording, each_prompt, top_share

M = tuple(int(x) for x in os.environ.get("PIVOTS", "0 4 16 64").split())
T = {}
def timed(name, f):
    "f(), its seconds added to T[name]."
    t = time.perf_counter(); out = f(); T[name] = T.get(name, 0) + time.perf_counter() - t; return out

class Recording(WeightsRecording):
    "The exact and pivoted co-occurrence scores of the capacity score's mixture weights, on the same layer inputs."
    def record(self, view, out, w):
        k, v = view.keys_pre, view.values
        rec = {"exact": timed("exact", lambda: cooccurrence_leverage(w, v, k, breadth=4, log=True))}
        for m in M: rec[f"m={m}"] = timed(f"m={m}", lambda: cooccurrence_leverage(w, v, k, breadth=4, log=True, pivots=m))
        return rec

def kept(a, e, keep):
    "The share of the exact top `keep` of each head (e: heads, N) that the top `keep` under `a` holds, mean over heads."
    b = max(1, int(keep * a.shape[-1]))
    ia, ie = a.topk(b, -1).indices, e.topk(b, -1).indices
    return float(torch.stack([torch.isin(ia[h], ie[h]).float().mean() for h in range(a.shape[0])]).mean())

out, n, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
acc = {}
for name, pos in each_prompt(models, n, Recording(), LOG):
    for rec in LOG:
        e = rec["exact"][0]
        for v, s in rec.items():
            r = acc.setdefault(name, {}).setdefault(v, {"agree25": [], "agree10": [], "key25": [], "key10": []})
            r["agree25"].append(kept(s[0], e, .25)); r["agree10"].append(kept(s[0], e, .10))
            r["key25"].append(top_share(s[0], pos, .25)); r["key10"].append(top_share(s[0], pos, .10))
    res = {nm: {v: {k2: round(statistics.mean(x), 4) for k2, x in r.items()} for v, r in d.items()} for nm, d in acc.items()}
    res["time_vs_exact"] = {k2: round(t / T["exact"], 3) for k2, t in T.items()}
    json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
