"Tests of jacap_nb.models: the attention adapter on tiny configs, and SmolLM2 loading."
import pytest, torch
from transformers import GPT2Config, GPT2LMHeadModel
from jacap_nb.models import tiny_model, model_adapters, attention_adapter, sliding_window_layers, output_cache, load_smollm2


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2", "qwen3"])
def test_adapter_reproduces_attention_output(arch):
    m = tiny_model(arch)
    ad = model_adapters(m)[1]
    seen = {}
    hd = ad.module.register_forward_hook(lambda mod, a, kw, out: seen.update(h=kw["hidden_states"], pe=kw["position_embeddings"], out=out[0]), with_kwargs=True)
    ids = torch.randint(3, 128, (2, 9), generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad(): res = m(ids, use_cache=True)
    finally: hd.remove()
    layer = output_cache(res).layers[1]
    with torch.no_grad():
        q = ad.rotate(ad.queries(seen["h"]), *seen["pe"])
        o = torch.nn.functional.scaled_dot_product_attention(q, layer.keys.repeat_interleave(ad.group, 1),
                                                             layer.values.repeat_interleave(ad.group, 1), is_causal=True)
        o = ad.module.o_proj(o.transpose(1, 2).reshape(2, 9, -1))
    torch.testing.assert_close(o, seen["out"], atol=1e-5, rtol=1e-5)
    assert (ad.q_norm is not None) == (arch == "qwen3")


def test_unsupported_architecture_lists_supported():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    with pytest.raises(ValueError, match="supported.*LlamaAttention, MistralAttention, Qwen2Attention, Qwen3Attention"):
        model_adapters(gpt2)
    assert sliding_window_layers(tiny_model("mistral", sliding_window=8)) == [0, 1]


def test_load_smollm2_from_copy():
    m, tok = load_smollm2()
    assert type(m.model.layers[0].self_attn).__name__ == "LlamaAttention" and len(m.model.layers) == 30
    ad = model_adapters(m)[0]
    assert (ad.num_heads, ad.num_kv_heads, ad.head_dim) == (9, 3, 64)
    assert tok.decode(tok("hello world").input_ids) == "hello world"
