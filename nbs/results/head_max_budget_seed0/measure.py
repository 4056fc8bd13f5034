"""A layer budget measured as the default's (`measured_layer_budget`: re-reading attention on `budget_texts`), except that
a layer's kept share at each threshold is its most demanding KV head's, not the mean over its heads: what the per-prompt
allocation `budget="layers"` gives each layer (`allocation.head_budgets(per_layer=True)`), measured once per model.
Seed 0 only (a candidate; 16_results, "Where KVzip's lead on SmolLM2's needle comes from").
Usage: python measure.py MODEL OUT.json"""
import sys, torch
from transformers import DynamicCache
from jacap_nb.models import load_model, cache_kwarg
from jacap_nb.budgets import ReplayAttentionProbe, budget_texts, THRESHOLDS
from jacap_nb.texts import token_counter
from jacap_nb.allocation import LayerBudget

name, out = sys.argv[1], sys.argv[2]
model, tok = load_model(name)
texts, kept = budget_texts(token_counter(tok)), 0.0
for text in texts:
    ids = torch.tensor([tok(text)["input_ids"]], dtype=torch.long)
    probe = ReplayAttentionProbe()
    with torch.no_grad(), probe(model):
        getattr(model, "model", model)(input_ids=ids, **{cache_kwarg(model): DynamicCache()})
    share = [(probe.seen[i][0, :, probe.n_sink:, None].double() >= THRESHOLDS).double().mean(1) for i in sorted(probe.seen)]
    kept = kept + torch.stack([s.amax(0) for s in share]) / len(texts)      # (L, M): the layer's most demanding head
LayerBudget(tuple(THRESHOLDS.tolist()), tuple(map(tuple, kept.clamp(0, 1).tolist())),
            f"re-reading attention on {len(texts)} pydoc texts, each layer's most demanding KV head").save(out)
print(out, LayerBudget.load(out).shares(0.1).numpy().round(2))
