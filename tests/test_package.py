"The package's own plumbing: README in sync with index.ipynb, _quarto.yml single source, settings read by setup.py."
import configparser, pathlib, importlib
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

def test_library_imports_without_optional_modules():
    for m in ['jacap_nb']: importlib.import_module(m)
