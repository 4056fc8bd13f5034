"""Gemma-3-270M's GGUF under the installed transformers: the tokenizer it builds (the probe sentence's ids, the first
ids of a budget text) and the model's loss on that text; then the same for that tokenizer saved and loaded again (what
load_model read from its dequantised copy after the first load), and for jacap_nb's own `gemma_gguf_tokenizer`, which
load_model uses since. Loads the GGUF directly, past load_model's check.
Usage: python nbs/results/gemma3_versions/tokenizer_check.py   (run in each environment; output.txt has both)"""
import tempfile, torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from jacap_nb.models import chunked_gguf_path, gemma_gguf_tokenizer, PROBE_TEXT
from jacap_nb.budgets import budget_texts
torch.manual_seed(0)
gguf = chunked_gguf_path("gemma3-270m")
tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
def report(tok, how):
    probe = tok(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    text = budget_texts()[-1]
    ids = torch.tensor([tok(text)["input_ids"][:1000]])
    with torch.no_grad(): logits = model(input_ids=ids).logits[0, :-1]
    nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:])
    print(f"transformers {transformers.__version__}, {how}: tokenizer model {type(tok.backend_tokenizer.model).__name__}; "
          f"probe {len(probe)} ids {probe}; text starts {ids[0, :6].tolist()} ({len(text.split())} words -> "
          f"{len(tok(text)['input_ids'])} ids); loss on its first 1000 ids {float(nll):.2f} nats per token")
report(tok, "from the GGUF")
with tempfile.TemporaryDirectory() as d:
    tok.save_pretrained(d)
    report(AutoTokenizer.from_pretrained(d), "saved and loaded again")
ours = gemma_gguf_tokenizer(gguf)
report(ours, "jacap_nb's gemma_gguf_tokenizer")
with tempfile.TemporaryDirectory() as d:
    ours.save_pretrained(d)
    report(AutoTokenizer.from_pretrained(d), "jacap_nb's, saved and loaded again")
