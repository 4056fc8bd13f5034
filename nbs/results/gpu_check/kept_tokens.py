"""SmolLM2's kept tokens on the GPU against the CPU of the same machine: `gpu_check.kept_tokens_check` (the default press,
uniform budget, 1,024 tokens of Python documentation, float32) on a GGUF holding SmolLM2's first layers
(truncate_gguf.py). A layer's kept set depends only on the layers below it, so each layer here is that layer of the
whole model. Usage: python kept_tokens.py PREFIX.gguf OUT.json"""
import json, pathlib, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from jacap_nb.gpu_check import kept_tokens_check

if __name__ == "__main__":
    path, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    res = kept_tokens_check(("cpu", "cuda"), model=model, tokenizer=tok, n_tokens=1024)
    res["layers"] = model.config.num_hidden_layers
    print(f"{'PASS' if res['min'] >= 0.99 else 'MISS'}  same tokens: cuda keeps {res['min']:.2%} of cpu's kept pairs in its "
          f"worst layer ({res['n_tokens']} tokens, SmolLM2's first {res['layers']} layers, float32; target >= 99%)")
    print("per layer:", " ".join(f"{s:.4f}" for s in res["per_layer"]))
    out.write_text(json.dumps(res, indent=1))
    sys.exit(0 if res["min"] >= 0.99 else 1)
