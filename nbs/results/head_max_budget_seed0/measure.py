"""A layer budget measured as the default's (`measured_layer_budget`: re-reading attention on `budget_texts`), except that
a layer's kept share at each threshold is its most demanding KV head's, not the mean over its heads: what the per-prompt
allocation `budget="layers"` gives each layer (`allocation.head_budgets(per_layer=True)`), measured once per model.
Seed 0 only (a candidate; 16_results, "Where KVzip's lead on SmolLM2's needle comes from"). It first ran its own copy of
`layer_budget_from_ids`' loop; since that function took `heads="max"` it calls it, and gives the same files.
Usage: python measure.py MODEL OUT.json"""
import sys, torch
from jacap_nb.models import load_model
from jacap_nb.budgets import budget_texts, layer_budget_from_ids
from jacap_nb.texts import token_counter
from jacap_nb.allocation import LayerBudget

name, out = sys.argv[1], sys.argv[2]
model, tok = load_model(name)
prompts = [torch.tensor([tok(t)["input_ids"]], dtype=torch.long) for t in budget_texts(token_counter(tok))]
layer_budget_from_ids(model, prompts, heads="max",
                      source=f"re-reading attention on {len(prompts)} pydoc texts, each layer's most demanding KV head").save(out)
print(out, LayerBudget.load(out).shares(0.1).numpy().round(2))
