"""A layer budget measured from question-time attention instead of re-reading (a candidate for `budget="auto"`).

Each of `budget_texts`' four pydoc texts is followed, in the model's chat prompt, by one generic question that names
nothing in the text. Per layer, each (context token, KV head) scores the largest softmax attention that any of the
question's queries (every query head of the group) gives it; `LayerBudget`'s curves are the shares of pairs above
each threshold, as `layer_budget_from_ids` computes them for the re-reading score.
Usage: python measure.py MODEL OUT.json   (MODEL: smollm2 | qwen2.5-coder-0.5b | gemma3-270m)
"""
import math, sys
from dataclasses import dataclass
import torch
from transformers import DynamicCache
from jacap_nb.allocation import LayerBudget
from jacap_nb.budgets import ReplayAttentionProbe, budget_texts
from jacap_nb.models import load_model, model_adapters, cache_kwarg
from jacap_nb.pipeline import encode_prompt
from jacap_nb.texts import token_counter
from jacap_nb.view import StatsConfig

QUESTIONS = ("What is the text above about?", "Which names, terms or numbers does the text above mention?",
             "Summarise the text above in one sentence.", "What is the main point of the text above?")

@dataclass
class QuestionAttentionProbe(ReplayAttentionProbe):
    "Records, per layer, each context slot's largest attention from the last `n_question` queries (no re-reading)."
    n_question: int = 1
    replay: bool = False
    def __post_init__(self): self.stats = StatsConfig(recent=self.n_question, moments=False)
    def scores(self, view):
        b, hkv, p, d = view.keys.shape
        w = self.n_question
        q = view.recent_queries(w).float().reshape(b, hkv, view.group, w, d)
        logits = q @ view.keys.float()[:, :, None].transpose(-1, -2) / math.sqrt(d)         # (B, Hkv, G, W, P)
        qpos = torch.arange(p - w, p)[:, None]
        logits = logits.masked_fill(torch.arange(p)[None, :] > qpos, float("-inf"))
        s = torch.softmax(logits, -1).amax((2, 3))                                           # (B, Hkv, P)
        self.seen[view.adapter.layer_idx] = s[..., : p - w].cpu()                             # the context's slots only
        return s

def measure(model, tok, grid=torch.logspace(-6, 0, 121, dtype=torch.float64), n_sink=4):
    n_layers, kept = len(model_adapters(model)), 0.0
    texts = budget_texts(token_counter(tok))
    for text, question in zip(texts, QUESTIONS):
        ctx, (qids,) = encode_prompt(tok, text, [question], "", "\n\n")
        ids = torch.cat([ctx, qids], 1)
        probe = QuestionAttentionProbe(n_sink=n_sink, n_question=qids.shape[1])
        with torch.no_grad(), probe(model):
            getattr(model, "model", model)(input_ids=ids, **{cache_kwarg(model): DynamicCache()})
        assert len(probe.seen) == n_layers
        frac = [(probe.seen[i][:, :, n_sink:, None].double() >= grid).double().mean((0, 1, 2)) for i in sorted(probe.seen)]
        kept = kept + torch.stack(frac) / len(texts)
        print(f"text of {ctx.shape[1]} tokens, question of {qids.shape[1]}", flush=True)
    return LayerBudget(tuple(grid.tolist()), tuple(map(tuple, kept.clamp(0, 1).tolist())),
                       f"question-time attention on {len(texts)} pydoc texts (results/question_budget_seed0/measure.py)")

if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tok = load_model(sys.argv[1])
    lb = measure(model, tok)
    lb.save(sys.argv[2])
    print(lb, [round(x, 3) for x in lb.shares(0.1).tolist()])
