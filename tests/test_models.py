"""jacap_nb.models: loading SmolLM2 offline and checking its dequantised copy. 05_models checks the attention adapter
on the four architectures, the refusal of other models and (slow) the GGUF path."""
import pytest, torch
import jacap_nb.models as M
from jacap_nb.models import load_smollm2, model_adapters, smollm2_cache_dir, _tokenizer_ok, PROBE_TEXT, PROBE_IDS


def test_load_smollm2_from_copy():
    m, tok = load_smollm2()
    assert type(m.model.layers[0].self_attn).__name__ == "LlamaAttention" and len(m.model.layers) == 30
    ad = model_adapters(m)[0]
    assert (ad.num_heads, ad.num_kv_heads, ad.head_dim) == (9, 3, 64)
    assert not m.training and next(m.parameters()).dtype == torch.float32
    assert _tokenizer_ok(tok) and tok.decode(tok("hello world", add_special_tokens=False)["input_ids"]) == "hello world"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_dir_is_keyed_by_dtype_and_transformers_version(dtype, monkeypatch, tmp_path):
    import transformers
    monkeypatch.setenv("JACAP_NB_CACHE", str(tmp_path))
    d = smollm2_cache_dir(dtype)
    assert d.parent == tmp_path
    assert d.name == f"smollm2-{str(dtype).removeprefix('torch.')}-transformers{transformers.__version__}"
    monkeypatch.setattr(transformers, "__version__", "9.9.9")
    assert smollm2_cache_dir(dtype) != d and smollm2_cache_dir(dtype).name.endswith("transformers9.9.9")


class _Tok:
    "A stand-in tokenizer that encodes the probe as `ids`."
    def __init__(self, ids): self.ids = ids
    def __call__(self, text, add_special_tokens=True):
        assert text == PROBE_TEXT and add_special_tokens is False
        return {"input_ids": list(self.ids)}


@pytest.mark.parametrize("ids,ok", [
    (PROBE_IDS, True),
    (PROBE_IDS[:-1], False),                                              # one token short
    ([0 if i == 216 else i for i in PROBE_IDS], False),                   # a space read as <|endoftext|> (5.2 copy read by 5.24)
    (PROBE_IDS[::-1], False),
    ([], False)], ids=["same", "shorter", "space-as-eos", "reordered", "empty"])
def test_tokenizer_probe_rejects_other_encodings(ids, ok):
    assert _tokenizer_ok(_Tok(ids)) is ok


def test_copy_with_a_bad_tokenizer_is_rebuilt_from_the_gguf(monkeypatch, tmp_path):
    "A dequantised copy whose tokenizer fails the probe is not used: the model is loaded from the GGUF and the copy rewritten."
    _, tok = load_smollm2()
    monkeypatch.setenv("JACAP_NB_CACHE", str(tmp_path))
    copy_dir = smollm2_cache_dir()
    tok.save_pretrained(copy_dir); (copy_dir / "model.safetensors").write_bytes(b"")   # a copy that looks complete
    loaded, saved = [], []
    monkeypatch.setattr(M, "_save_dequantised", lambda model, t, path: saved.append((model, path)))
    class _Model:
        def eval(self): return self
    monkeypatch.setattr(M, "_load_gguf", lambda dtype: loaded.append(dtype) or (_Model(), "gguf-tok"))
    monkeypatch.setattr(M, "PROBE_IDS", PROBE_IDS[:-1])                   # the copy's tokenizer now fails the probe
    model, t = load_smollm2()
    assert loaded == [torch.float32] and t == "gguf-tok" and isinstance(model, _Model)
    assert saved == [(model, copy_dir)]
    loaded.clear(); saved.clear()
    load_smollm2(use_cache_dir=False)                                     # no copy read or written
    assert loaded == [torch.float32] and saved == []
