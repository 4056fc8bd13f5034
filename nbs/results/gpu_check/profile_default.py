"""Where the default scorer's time goes on a GPU (the first gpu-check run: `make_press("jacap", 0.75)` added 144% to an
8K-token prefill of an 8B-shaped Llama on an H200, and its fused scorer ran at 1.36x eager torch at 32K tokens).
Times each stage of `fused.triton_context_scores` at one layer's shape (8 KV heads x 4 query heads, d = 128, bf16),
then lists the CUDA kernels of the whole scorer and of one pressed prefill layer by device time (torch.profiler)."""
import sys, time
import torch
from torch.profiler import profile, ProfilerActivity
from jacap_nb import fused as F, kernels as K, scoring
from jacap_nb.gpu_check import median_seconds

def shapes(n, h=8, g=4, d=128, dtype=torch.bfloat16):
    gen = torch.Generator().manual_seed(0)
    mk = lambda *s: torch.randn(*s, generator=gen).to("cuda", dtype)
    return mk(1, h, n, d), mk(1, h, n, d), mk(1, h, g, n - 4, d), mk(1, h, n, d)

def stages(n):
    k, v, q, kp = shapes(n)
    worst = F.triton_band_attention(k, q)
    w = worst / worst.sum(-1, keepdim=True)
    x = F._as_rows(v); wr = w.reshape(-1, n).float().contiguous()
    mu, gram = F.weighted_moments(x, wr)
    linv, inv_noise, _ = K.capacity_factor(gram[:, None], "auto")
    calls = {"whole scorer (triton_context_scores)": lambda: F.triton_context_scores(k, v, q, kp),
             "torch scorer (jacap_context_scores)": lambda: scoring.jacap_context_scores(k, v, q, kp, block=16, halo=16),
             "band (triton_band_attention)": lambda: F.triton_band_attention(k, q),
             "prior (triton_prior_attention)": lambda: F.triton_prior_attention(kp),
             "value leverage (triton_centred_leverage)": lambda: F.triton_centred_leverage(w, v),
             "  weighted_moments kernel": lambda: F.weighted_moments(x, wr),
             "  capacity_factor (torch Cholesky)": lambda: K.capacity_factor(gram[:, None], "auto"),
             "  whitened_norms kernel": lambda: F.whitened_norms(x, mu, linv[:, 0], inv_noise[:, 0], wr),
             "  inverse Cholesky of the prior": lambda: F._inverse_cholesky(gram + torch.eye(128, device="cuda"))}
    for name, fn in calls.items(): print(f"N={n:6d}  {name:45s} {median_seconds(fn, 10) * 1e3:8.3f} ms", flush=True)
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(3): F.triton_context_scores(k, v, q, kp)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=15, max_name_column_width=60))

def pressed_prefill(n=8192, layers=4):
    "One pressed prefill of a 4-layer 8B-shaped Llama (random bf16 weights): its share, and its kernels by device time."
    from transformers import LlamaConfig, LlamaForCausalLM
    from jacap_nb.gpu_check import LLAMA_8B, prefill_share
    from jacap_nb.presses import make_press
    from jacap_nb.models import cache_kwarg, empty_cache
    shape = {**LLAMA_8B, "num_hidden_layers": layers}
    print(f"{layers}-layer 8B shape, {n} tokens:", prefill_share(shape, n), flush=True)
    with torch.device("cuda"): model = LlamaForCausalLM(LlamaConfig(**shape, attn_implementation="sdpa")).to(torch.bfloat16).eval()
    ids = torch.randint(0, shape["vocab_size"], (1, n), device="cuda")
    run = lambda: model.model(input_ids=ids, **{cache_kwarg(model): empty_cache(model)})
    with torch.no_grad(), make_press("jacap", 0.75, budget="uniform")(model): run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        with torch.no_grad(), make_press("jacap", 0.75, budget="uniform")(model): run()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=20, max_name_column_width=60))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12, max_name_column_width=60))

if __name__ == "__main__":
    print(torch.cuda.get_device_name(), "triton path:", K.available())
    for n in (8192, 32768): stages(n)
    pressed_prefill()
    sys.stdout.flush()
