"""The seed-0 passkey prompts `factor_spread.py` and `knob_scan.py` read (1K tokens of Britannica, five needle depths,
`blank` format), each compressed once by the default press around a scorer that records what it needs, and where the
key ranks under a score."""
import torch
from jacap_nb.bench import answer_token_positions
from jacap_nb.cache import compress_layers
from jacap_nb.capture import capture_prefill
from jacap_nb.models import load_model
from jacap_nb.pipeline import encode_prompt, PROMPT_FORMATS
from jacap_nb.presses import EvictionPress, Jacap
from jacap_nb.tasks import passkey_examples

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
