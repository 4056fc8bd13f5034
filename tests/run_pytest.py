"""`python tests/run_pytest.py ARGS...`: `python -m pytest ARGS...` that fails unless at least one test ran and passed.

pytest exits 0 when every selected test was skipped (an import that failed under `importorskip`, a marker that
deselected the rest) and 5 when it collected nothing: neither is a check that passed. tests/run.sh and .ci/run call
pytest through this, so a suite that silently stopped running turns CI red instead of green."""
import os, sys
import pytest

class _Count:
    "Counts the tests whose call phase passed (xdist forwards its workers' reports to this hook in the controller)."
    def __init__(self): self.passed = 0
    def pytest_runtest_logreport(self, report):
        if report.when == 'call' and report.passed: self.passed += 1

def main(args):
    sys.path.insert(0, os.getcwd())               # what `python -m pytest` does
    count = _Count()
    rc = int(pytest.main(args, plugins=[count]))
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"run_pytest: FAILED: pytest collected no tests (exit 5) for: {' '.join(args)}"); return 1
    if rc == 0 and count.passed == 0:
        print(f"run_pytest: FAILED: no test passed (all skipped or deselected) for: {' '.join(args)}"); return 1
    return rc

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
