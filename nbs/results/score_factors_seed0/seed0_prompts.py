"""The seed-0 passkey prompts this folder's scripts read (1K tokens of Britannica, five needle depths,
`blank` format), each compressed once by the default press around a scorer that records what it needs, and where the
key ranks under a score (`key_percentile`, and `top_share_scan` for the scans). The scorer they record is the capacity
score (`CapacityJacap`), `make_press("jacap", r)`'s when they ran (`../README.md`)."""
import statistics
from dataclasses import dataclass
import torch
from jacap_nb import scoring
from jacap_nb.bench import answer_token_positions
from jacap_nb.cache import compress_layers
from jacap_nb.capture import capture_prefill
from jacap_nb.models import load_model
from jacap_nb.pipeline import encode_prompt, PROMPT_FORMATS
from jacap_nb.presses import EvictionPress
from jacap_nb.scorers import Jacap
from jacap_nb.tasks import passkey_examples

@dataclass(frozen=True)
class CapacityJacap(Jacap):
    "Jacap with the capacity score: the default when these scans ran (the co-occurrence score is the default now)."
    score: str = "capacity"
    lookup_breadth: float = 16.0
    pivots: int|None = None

LOG = []   # what a `WeightsRecording` scorer recorded, one entry per compressed layer (`each_prompt` clears it per prompt)

class WeightsRecording(CapacityJacap):
    "The capacity score; per layer, appends `self.record(view, out, w)` to LOG, w the mixture weights its value step read."
    def record(self, view, out, w) -> dict: raise NotImplementedError
    def __call__(self, view):
        seen, real = [], scoring.centred_leverage                       # the value step, wrapped for this call only
        scoring.centred_leverage = lambda w, values, noise_var="auto": (seen.append(w), real(w, values, noise_var))[1]
        try: out = super().__call__(view)
        finally: scoring.centred_leverage = real
        LOG.append(self.record(view, out, seen[-1]))
        return out

def each_prompt(models:list, n:int, scorer, log:list):
    "For each model and each of the first `n` prompts: clear `log`, compress with `scorer`; yield (model, key positions)."
    torch.set_num_threads(1)
    exs = passkey_examples(lengths=(1024,), depths=(0.1, 0.3, 0.5, 0.7, 0.9), n=1, filler="britannica", seed=0)[:n]
    sep = PROMPT_FORMATS["blank"]
    for name in models:
        model, tok = load_model(name)
        for ex in exs:
            ids, _ = encode_prompt(tok, ex.context, [ex.question], "", sep)
            log.clear()
            compress_layers(EvictionPress(scorer, 0.75, **Jacap.press_defaults), model, capture_prefill(model, ids))
            yield name, torch.tensor(answer_token_positions(tok, ex, sep))
        del model

def key_percentile(x, pos):
    "Mean over the key's positions `pos` of the share of tokens that score below each (1 = the top) under `x` (N,)."
    return float((x[None, :] < x[pos][:, None]).float().mean(-1).mean())

def top_share(s, pos, keep):
    "Share of the key's positions `pos` among each head's top `keep` of the tokens under scores `s` (heads, N), mean over heads."
    thr = s.topk(max(1, int(keep * s.shape[-1])), -1).values[..., -1:]
    return float((s[..., pos] >= thr).float().mean())

def top_share_scan(models:list, n:int, scorer, log:list) -> dict:
    """Per model and variant (the scorer appends one {variant: scores (1, heads, N)} per compressed layer to `log`): the
    key's share of each head's top 25% and 10%, mean over layers and prompts, and the top-25% share per layer."""
    acc = {}
    for name, pos in each_prompt(models, n, scorer, log):
        for layer, rec in enumerate(log):
            for v, s in rec.items():
                acc.setdefault(name, {}).setdefault(v, {}).setdefault(layer, []).append((top_share(s[0], pos, 0.25), top_share(s[0], pos, 0.10)))
    return {name: {v: {"top25": round(statistics.mean(statistics.mean(r[0] for r in rs) for rs in d.values()), 3),
                       "top10": round(statistics.mean(statistics.mean(r[1] for r in rs) for rs in d.values()), 3),
                       "top25_per_layer": [round(statistics.mean(r[0] for r in rs), 3) for rs in d.values()]}
                   for v, d in per_model.items()} for name, per_model in acc.items()}
