"Shared test doubles: a character tokenizer for tiny models, a model that must not run, a call counter."
import torch
from torch import nn


class CharTokenizer:
    """Characters -> ids 3..122 (no chat template, eos = 2, like `tiny_model`'s config). `decode` maps every id above
    the special ones to its own character, so two different token sequences never decode to the same text."""
    chat_template, bos_token, eos_token_id = None, None, 2
    def __call__(self, text, add_special_tokens=False, **kw): return {"input_ids": [3 + ord(c) % 120 for c in text]}
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x4E00 + int(i)) for i in (ids.tolist() if hasattr(ids, "tolist") else ids) if int(i) > 2)


class NoModel(nn.Module):
    "A model that fails the test if anything calls it: proves a check ran before any model work."
    def forward(self, *a, **k): raise AssertionError("the model was called")


def count_attention_calls(model) -> tuple:
    "(list that grows by one per attention-layer call, hook handles to remove)."
    calls = []
    hds = [l.self_attn.register_forward_pre_hook(lambda *a: calls.append(1)) for l in model.model.layers]
    return calls, hds


def rand_ids(n:int, seed:int=0, b:int=1) -> torch.Tensor:
    return torch.randint(3, 120, (b, n), generator=torch.Generator().manual_seed(seed))


def physical(cache) -> list:
    "Physical tokens per layer (first batch row / head count ignored)."
    return [l.keys.shape[2] for l in cache.layers]


def held(cache) -> int:
    "Valid (head, slot) pairs of the first batch row over every layer: a per-head budget's padding is not counted."
    return sum(int(l.slot_valid[0].sum()) if getattr(l, "slot_valid", None) is not None else l.keys.shape[1] * l.keys.shape[2]
               for l in cache.layers)
