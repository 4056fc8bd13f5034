import os, sys, pathlib, importlib.util
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests/readme.py, tests/tinytools.py

# tests/test_kvpress_compat.py needs kvpress (its own environment: kvpress 0.5.5 pins transformers < 5.3). Where kvpress
# is not importable the file is not collected at all, so the main environment's run neither fails on it nor reports it
# as skipped tests; CI runs it in the kvpress environment.
collect_ignore = [] if importlib.util.find_spec("kvpress") is not None else ["test_kvpress_compat.py"]

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long CPU tests (the real model, long prompts); `bash tests/run.sh --slow` runs them")
    config.addinivalue_line("markers", "gpu: needs a CUDA device")


import pytest

@pytest.fixture(autouse=True, scope="module")
def _own_budget_cache(tmp_path_factory):
    """Each test module measures `budget="auto"` budgets into a folder of its own: a budget measured for a random model
    with a stand-in tokenizer in one module must not become another module's budget for the same random model."""
    old = os.environ.get("JACAP_NB_BUDGETS")
    os.environ["JACAP_NB_BUDGETS"] = str(tmp_path_factory.mktemp("budgets"))
    yield
    if old is None: os.environ.pop("JACAP_NB_BUDGETS", None)
    else: os.environ["JACAP_NB_BUDGETS"] = old
