"Tests of jacap_nb.demo."
import pytest
from jacap_nb.demo import demo, passkey_prompt
from jacap_nb.models import load_smollm2


def test_passkey_prompt():
    _, tok = load_smollm2()
    p = passkey_prompt(tok, 300, key="12345", depth=0.5)
    assert p.count("12345") == 2 and 280 < len(tok(p).input_ids) < 400
    with pytest.raises(ValueError, match="depth"): passkey_prompt(tok, 300, depth=2)


@pytest.mark.slow
def test_demo_full_cache_answers_and_compression_shrinks():
    res = demo(verbose=False)
    r = res["results"]
    assert r["full"]["correct"]
    assert r["jacap 0.75"]["cache_mib"] < 0.26 * r["full"]["cache_mib"] and r["jacap 0.9"]["tokens_kept"] == int(r["full"]["tokens"] * 0.1)
