"The package's own plumbing: README in sync with index.ipynb, _quarto.yml single source, settings read by setup.py."
import configparser, os, pathlib, subprocess, sys
from readme import readme_text, ROOT

def test_readme_is_generated_from_index():
    assert (ROOT/'README.md').read_text() == readme_text(), "README.md is stale: run `python tests/readme.py`"

def test_nbs_quarto_yml_follows_top_level():
    assert (ROOT/'nbs'/'_quarto.yml').read_text() == (ROOT/'_quarto.yml').read_text(), \
        "nbs/_quarto.yml must be the top-level _quarto.yml (a symlink): the top level is the source of truth"

def test_version_matches_settings():
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    import jacap_nb
    assert jacap_nb.__version__ == cfg['DEFAULT']['version']

def test_setup_py_does_not_use_pkg_resources():
    assert 'pkg_resources' not in (ROOT/'setup.py').read_text()

def test_library_imports_and_scores_without_triton():
    "Triton is Linux-only: with it unimportable, the kernels module still imports and takes the torch path."
    code = ("import sys; sys.modules['triton'] = None\n"
            "import torch, jacap_nb.kernels as K, jacap_nb.cache\n"
            "assert K.available() == 'torch', K.available()\n"
            "k, v, q = torch.randn(1, 2, 1, 9, 8), torch.randn(1, 2, 1, 9, 8), torch.randn(1, 2, 3, 8)\n"
            "assert K.capkv_scores(k, v, q).shape == (1, 2, 3, 9)\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": ""})
