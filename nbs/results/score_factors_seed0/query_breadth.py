"""The lookup breadth the models' own queries have: on the seed-0 passkey prompts, per compressed layer and KV head, the
mean squared logit of a context query against the centred pre-RoPE keys, E_t[q_t^T (K~^T K~ / N) q_t] / d. Under the
lookup prior of `cooccurrence.cooccurrence_leverage`, q ~ N(0, c N (K~^T K~)^{-1}), this is c (the mean over the keys of a
logit's variance), so it says which breadth c the models' queries match.
Usage: python query_breadth.py OUT.json N_PROMPTS MODEL [MODEL ...]"""
import json, statistics, sys
import torch
from jacap_nb.capture import capture_prefill
from jacap_nb.models import load_model, model_adapters
from jacap_nb.pipeline import encode_prompt, PROMPT_FORMATS
from jacap_nb.tasks import passkey_examples

def query_breadth(adapter, layer:dict, skip:int=4) -> torch.Tensor:
    "Per KV head (Hkv,): the mean over the context's queries (the sinks' left out) of q^T (K~^T K~ / N) q / d, pre-RoPE."
    h = layer["hidden_states"]; b, n, _ = h.shape; hkv, d = layer["keys"].shape[1], layer["keys"].shape[-1]
    k = layer["k_proj"].view(b, n, hkv, d).transpose(1, 2).double()
    k = k - k.mean(-2, keepdim=True)
    q = adapter.queries(h, layer["q_proj"]).double().reshape(b, hkv, -1, n, d)[..., skip:, :]
    return (torch.einsum("bhgtd,bhde,bhgte->bhgt", q, k.mT @ k / n, q).mean((-1, -2)) / d)[0]

if __name__ == "__main__":
    out, n, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    torch.set_num_threads(1)
    exs = passkey_examples(lengths=(1024,), depths=(0.1, 0.3, 0.5, 0.7, 0.9), n=1, filler="britannica", seed=0)[:n]
    res = {}
    for name in models:
        model, tok = load_model(name)
        per = []                                                       # (prompts, layers, Hkv)
        for ex in exs:
            ids, _ = encode_prompt(tok, ex.context, [ex.question], "", PROMPT_FORMATS["blank"])
            pf = capture_prefill(model, ids)
            per.append(torch.stack([query_breadth(ad, lay) for ad, lay in zip(model_adapters(model), pf.layers)]))
        c = torch.stack(per).mean(0)                                   # (layers, Hkv): mean over the prompts
        flat = sorted(c.flatten().tolist())
        res[name] = {"median": round(statistics.median(flat), 2), "q10": round(flat[len(flat) // 10], 2),
                     "q90": round(flat[(9 * len(flat)) // 10], 2),
                     "median_per_layer": [round(statistics.median(r), 2) for r in c.tolist()]}
        print(name, res[name]["median"], res[name]["q10"], res[name]["q90"], flush=True)
        del model
    json.dump(res, open(out, "w"), indent=1)
