import os, sys, pathlib
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests/readme.py

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long CPU tests (the real model, long prompts); `bash tests/run.sh --slow` runs them")
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
