"""Research harness of the seed-0 selection (kept for provenance; not part of the package, not run by the tests):
one captured prefill per (example, format), many scorers replayed, greedy answers. It ran against jacap_nb at commit
5309fac (put a checkout of that commit first on sys.path); `scorers.py` defines every variant of ../summary.csv,
`build_summary.py` turned its rows into that file. The chosen default lives in jacap_nb.scoring."""
import os, json, math, time, random, re, sys
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error"); os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
import torch, torch.nn.functional as F
from transformers import DynamicCache
from transformers.utils import logging as hflog
hflog.disable_progress_bar(); hflog.set_verbosity_error()
from jacap_nb.models import load_smollm2, model_adapters, cache_kwarg
from jacap_nb.bench import capture_prefill, greedy_answer, cache_from_layers
from jacap_nb import tasks as T

def prompt_texts(tok, context, question, answer_prefix="", sep="\n\n"):
    marker = "\u2063" * 3 + "QUESTION" + "\u2063" * 3
    text = tok.apply_chat_template([{"role": "user", "content": context + sep + marker + question}],
                                   add_generation_prompt=True, tokenize=False)
    c, q = text.split(marker)
    return c, q + answer_prefix

def prompt_ids(tok, *a, **k):
    enc = lambda t: torch.tensor([tok(t, add_special_tokens=False)["input_ids"]], dtype=torch.long)
    return tuple(enc(t) for t in prompt_texts(tok, *a, **k))

def needle_positions(tok, ctx_text, answer):
    spans = [(m.start(), m.end()) for m in re.finditer(re.escape(answer), ctx_text)]
    offs = tok(ctx_text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return [i for i, (a, b) in enumerate(offs) if any(a < e and b > s for s, e in spans)]

# ---------------------------------------------------------------- multi-question task
FACTS = [("pass key", "The pass key is {v}. Remember it. {v} is the pass key."),
         ("door code", "The door code is {v}. Remember it. {v} is the door code."),
         ("room number", "The room number is {v}. Remember it. {v} is the room number."),
         ("ticket number", "The ticket number is {v}. Remember it. {v} is the ticket number.")]

def multiq_examples(lengths=(1024, 2048), n=5, fillers=("britannica", "pydoc"), seed=0, n_facts=3, count=T.approx_tokens):
    out = []
    for filler in fillers:
        for length in lengths:
            for i in range(n):
                rng = random.Random(T.example_seed("multiq", seed, filler, length, n_facts, i))
                facts = rng.sample(FACTS, n_facts)
                vals = [str(rng.randrange(10000, 100000)) for _ in facts]
                sents = facts_text = [f.format(v=v) for (_, f), v in zip(facts, vals)]
                filler_s = T.filler_sentences(filler, max(1, length - sum(count(" " + s) for s in sents)), rng, count)
                # facts at evenly spread random depths
                cuts = sorted(rng.sample(range(1, len(filler_s)), n_facts))
                parts, prev = [], 0
                for c, s in zip(cuts, sents): parts += filler_s[prev:c] + [s]; prev = c
                parts += filler_s[prev:]
                ctx = " ".join(parts)
                qs = [dict(question=f"What is the {name} mentioned in the text?", answer=v, answer_prefix=f"The {name} is ",
                           depth=round(ctx.index(s) / len(ctx), 3)) for (name, _), v, s in zip(facts, vals, sents)]
                out.append(dict(uid=f"multiq-{filler}-L{length}-i{i}-s{seed}", context=ctx, questions=qs,
                                meta=dict(filler=filler, length=length, seed=seed)))
    return out

def passkey_examples(lengths=(1024, 2048), depths=(0.0, 0.25, 0.5, 0.75, 1.0), fillers=("britannica", "pydoc"), seed=0, n=1, count=T.approx_tokens):
    out = []
    for f in fillers:
        for e in T.passkey_examples(lengths=list(lengths), depths=list(depths), n=n, filler=f, seed=seed, count_tokens=count):
            out.append(dict(uid=e.uid, context=e.context, questions=[dict(question=e.question, answer=e.answer,
                            answer_prefix=e.answer_prefix, depth=e.meta["depth"])], meta=e.meta))
    return out

# ---------------------------------------------------------------- RoPE helpers
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1); return torch.cat((-x2, x1), dim=-1)

def unrope(k, cos, sin):
    "pre-RoPE keys from post-RoPE keys (B, H, N, d), cos/sin (B, N, d)"
    c, s = cos[:, None].to(k.dtype), sin[:, None].to(k.dtype)
    return k * c - rotate_half(k) * s

def layer_queries(ad, lay, post=True):
    q = ad.queries(lay["hidden_states"])  # (1, H, N, d) pre-RoPE
    if post: q = ad.rotate(q, *lay["position_embeddings"])
    return q

# ---------------------------------------------------------------- selection
def select(scores, budget, n_sink=4, window=0):
    "scores (B, H, N) -> kept indices (B, H, budget) sorted"
    n = scores.shape[-1]
    s = scores.float().clone()
    big = torch.finfo(s.dtype).max
    s[..., :n_sink] = big
    if window: s[..., n - window:] = big
    return s.topk(budget, -1).indices.sort(-1).values

def gather(k, idx):
    return k.gather(2, idx[..., None].expand(-1, -1, -1, k.shape[-1]))

def compress_scores(pre, scores_per_layer, ratio, n_sink=4, window=0, alloc="uniform"):
    "scores_per_layer: list of (1, Hkv, N). Returns cache, kept dict."
    n = pre.n_tokens
    budget = int(n * (1 - ratio))
    keys, vals, kept = [], [], {}
    if alloc == "uniform":
        budgets = [budget] * len(scores_per_layer)
    elif alloc == "layer":
        # one global budget: top (L * budget * H) scores over all layers and heads (sinks/window excluded), per-layer mean count
        allsc = torch.cat([s.float().flatten() for s in scores_per_layer])
        k = budget * len(scores_per_layer) * scores_per_layer[0].shape[1]
        thr = allsc.topk(k).values[-1]
        budgets = [int(min(n, max(n_sink + window + 1, round(float((s.float() >= thr).sum()) / s.shape[1])))) for s in scores_per_layer]
        # rescale to the exact total
        tot = sum(budgets); tgt = budget * len(budgets)
        budgets = [min(n, max(n_sink + window + 1, int(round(b * tgt / tot)))) for b in budgets]
    else:
        raise ValueError(alloc)
    for l, (lay, s) in enumerate(zip(pre.layers, scores_per_layer)):
        idx = select(s, budgets[l], n_sink, window)
        keys.append(gather(lay["keys"], idx)); vals.append(gather(lay["values"], idx)); kept[l] = idx
    return cache_from_layers(keys, vals), kept

def retention(kept, pos):
    if not pos: return None
    p = torch.tensor(pos)
    r = [float(torch.isin(p, k[0, h]).float().mean()) for k in kept.values() for h in range(k.shape[1])]
    return sum(r) / len(r)

def done_number(t): return re.search(r"\d\D", t) is not None

def correct(pred, ans): return T.first_number(pred) == ans

def load():
    torch.set_num_threads(1)
    return load_smollm2()


class per_layer_masks:
    "Context manager: each attention layer gets a mask for its own physical cache length (batch 1, no padding)."
    def __init__(self, model): self.model = model
    def __enter__(self):
        def pre(mod, args, kwargs):
            cache = kwargs.get("past_key_values", kwargs.get("cache"))
            h = kwargs["hidden_states"]; q = h.shape[1]
            p = cache.layers[mod.layer_idx].keys.shape[2] if cache is not None and cache.layers[mod.layer_idx].keys is not None and cache.layers[mod.layer_idx].keys.numel() else 0
            m = torch.ones(q, p + q, dtype=torch.bool, device=h.device)
            m[:, p:] = torch.tril(torch.ones(q, q, dtype=torch.bool, device=h.device))
            kwargs["attention_mask"] = m[None, None]
            return args, kwargs
        self.hooks = [l.self_attn.register_forward_pre_hook(pre, with_kwargs=True) for l in self.model.model.layers]
        return self
    def __exit__(self, *a):
        for h in self.hooks: h.remove()

REPEAT_PROMPT = "\n\nRepeat the previous context exactly."

@torch.no_grad()
def replay_attention(model, tok, pre, ctx_text, instruction=True):
    "KVzip-style reconstruction pass: per layer (1, Hkv, N) max over repeat queries of their attention on context keys."
    import copy
    ads = model_adapters(model)
    # the chat prefix (before the user's text) is not repeated, as in kvpress's KVzip
    marker = "\u2063" * 3
    full = tok.apply_chat_template([{"role": "user", "content": marker}], add_generation_prompt=True, tokenize=False)
    prefix_text, suffix_text = full.split(marker)
    n_prefix = len(tok(prefix_text, add_special_tokens=False)["input_ids"])
    ctx_ids = pre.ids[0, n_prefix:].tolist()
    rep = (tok(REPEAT_PROMPT, add_special_tokens=False)["input_ids"] + tok(suffix_text, add_special_tokens=False)["input_ids"]
           if instruction else []) + ctx_ids
    n = pre.n_tokens
    cache = cache_from_layers([l["keys"] for l in pre.layers], [l["values"] for l in pre.layers])
    got = {}
    def hook(mod, args, kw, out):
        h = kw["hidden_states"]; ad = ads[mod.layer_idx]
        q = ad.rotate(ad.queries(h), *kw["position_embeddings"])[0]        # (H, R, d)
        k = kw.get("past_key_values", kw.get("cache")).layers[mod.layer_idx].keys[0]   # (Hkv, n + R, d)
        hkv, tot, d = k.shape; r = q.shape[1]; g = ad.group
        lg = torch.einsum("hgrd,hnd->hgrn", q.view(hkv, g, r, d).float(), k.float()) / math.sqrt(d)
        mask = torch.arange(tot)[None, :] > (n + torch.arange(r))[:, None]
        a = torch.softmax(lg.masked_fill(mask, float("-inf")), -1)[..., :n]
        got[mod.layer_idx] = a.amax(2).mean(1)[None]
    hs = [ad.module.register_forward_hook(hook, with_kwargs=True) for ad in ads]
    try:
        ids = torch.tensor([rep])
        model.model(input_ids=ids, position_ids=torch.arange(n, n + ids.shape[1])[None], **{cache_kwarg(model): cache})
    finally:
        for h_ in hs: h_.remove()
    return [got[i] for i in range(len(ads))]
