"""Layer budgets between the default's and the head-max one: at each threshold a layer's kept share is
(1 - lam) * (mean over its KV heads) + lam * (its most demanding KV head's), both measured as the default's
(`layer_budget_from_ids` on `budget_texts`, re-reading attention). lam = 0 is the default's budget, lam = 1 the
head-max budget of ../head_max_budget_seed0. A blend of non-increasing curves is non-increasing, so each is a
`LayerBudget`. Seed 0 only (a candidate).
Usage: python measure.py MODEL OUT_PREFIX LAM [LAM ...]   (writes OUT_PREFIX_lLAM.json for each, e.g. smollm2_l0.5.json)"""
import sys, torch
from jacap_nb.models import load_model
from jacap_nb.budgets import budget_texts, layer_budget_from_ids
from jacap_nb.texts import token_counter
from jacap_nb.allocation import LayerBudget

name, prefix, lams = sys.argv[1], sys.argv[2], [float(a) for a in sys.argv[3:]]
model, tok = load_model(name)
prompts = [torch.tensor([tok(t)["input_ids"]], dtype=torch.long) for t in budget_texts(token_counter(tok))]
mean, most = (layer_budget_from_ids(model, prompts, heads=h) for h in ("mean", "max"))
for lam in lams:
    kept = (1 - lam) * torch.tensor(mean.kept, dtype=torch.float64) + lam * torch.tensor(most.kept, dtype=torch.float64)
    b = LayerBudget(mean.thresholds, tuple(map(tuple, kept.tolist())),
                    f"re-reading attention on {len(prompts)} pydoc texts, (1 - {lam}) * mean + {lam} * most demanding KV head")
    b.save(f"{prefix}_l{lam}.json")
    print(f"{prefix}_l{lam}.json", b.shares(0.1).numpy().round(2))
