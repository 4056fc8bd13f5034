"""What kvpress 0.5.5 does on a hybrid model: Gemma-3-270M (15 sliding-window layers of 512, 3 full ones), one 1K passkey, ratio 0.5.

Run in the kvpress environment (.venv-kvpress with the [gemma3] extra): python nbs/results/gemma3_kvpress/kvpress_on_gemma3.py"""
import torch, warnings; warnings.simplefilter("ignore")
torch.set_num_threads(1)
from jacap_nb.models import load_model, sliding_window_layers
from jacap_nb.pipeline import prompt_texts
from jacap_nb.tasks import passkey_examples
from jacap_nb.texts import token_counter
from kvpress import KnormPress, SnapKVPress
from transformers import pipeline
m, tok = load_model("gemma3-270m")
print("sliding layers", sliding_window_layers(m), "window", m.config.get_text_config().sliding_window)
ex = passkey_examples(lengths=[1024], depths=[0.5], filler="pydoc", count_tokens=token_counter(tok))[0]
print("expected", ex.answer, "| prompt tokens", len(tok(ex.context).input_ids))
pipe = pipeline("kv-press-text-generation", model=m, tokenizer=tok)
for press in (None, KnormPress(0.5), SnapKVPress(0.5)):
    try:
        from transformers import DynamicCache
        out = pipe(ex.context, question="\n\n" + ex.question, answer_prefix=ex.answer_prefix, press=press, max_new_tokens=8)
        print(type(press).__name__, repr(out["answer"]))
    except Exception as e: print(type(press).__name__, "ERROR", type(e).__name__, str(e)[:300])
# cache sizes after a kvpress prefill
from transformers import DynamicCache
ids = tok(ex.context, return_tensors="pt").input_ids
for press in (KnormPress(0.5),):
    cache = DynamicCache(config=m.config)
    try:
        with torch.no_grad(), press(m): m(ids, past_key_values=cache)
        print("tokens", ids.shape[1], "layer sizes", [l.keys.shape[2] for l in cache.layers], [type(l).__name__ for l in cache.layers][:6])
    except Exception as e: print("direct ERROR", type(e).__name__, str(e)[:300])
