import os
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long CPU tests (a real model, long prompts); CI runs them in tests/run.sh --slow only")
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
