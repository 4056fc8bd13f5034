"""The notebooks' `#| gpu` cells, run here on tiny configurations.

A `#| gpu` cell is what a GPU Colab user runs: nbdev_test skips it, so without this file nothing would notice when one
stops matching the library. Each cell is run as written except for the sizes in `TINY` (GPU-sized context lengths and
grids become CPU-sized), and `default_model()` is made to name SmolLM2 (what it is on a CPU anyway), so the model cells
run with the embedded model on any machine, a GPU one included. Every gpu cell of every notebook must be covered: a new one fails `test_every_gpu_cell_is_covered`
until it has an entry in `CELLS`.

Not covered, and why: 04_kernel_bench's cell runs `kernel_bench.main`, which measures CUDA events and refuses to run
without a GPU (its pieces are tested in that notebook); 03_kernels' cell compares compiled kernels with torch, and
its CPU twin runs in test_kernels.py (it needs Triton's interpreter, set per process); 03b_fused's likewise in test_fused.py.
"""
import json, os, re, pathlib
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NBS = ROOT / 'nbs'
NOT_HERE = {'03_kernels.ipynb': 'tests/test_kernels.py::test_gpu_cell_on_cpu',
            '03b_fused.ipynb': 'tests/test_fused.py::test_gpu_cell_on_cpu',
            '04_kernel_bench.ipynb': 'CUDA events only: kernel_bench.main refuses without a GPU'}


def gpu_cells(name:str) -> list:
    "Sources of the `#| gpu` code cells of notebook `name`."
    nb = json.loads((NBS / name).read_text())
    srcs = [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code']
    return [s for s in srcs if re.search(r'^#\|\s*gpu\s*$', s, re.M)]


# (notebook, cell index among its gpu cells) -> (replacements that make it tiny, text its output must contain)
CELLS = {
    ('08_pipeline.ipynb', 0): ({'lengths=[16384]': 'lengths=[320]'}, ['ratio 0.9:', 'tokens kept']),
    ('12_bench.ipynb', 0): ({'lengths=[8192, 16384]': 'lengths=[256]', 'depths=[0.1, 0.5, 0.9], n=2': 'depths=[0.5], n=1',
                             '"runs/gpu_passkey"': 'OUT'}, ['| jacap |', 'blank 0.9', 'kvpress 0.75']),
    ('15_speed.ipynb', 0): ({'[8192, 16384]': '[256]'}, ['| jacap |', 'pct_of_prefill']),
    ('15b_gpu_check.ipynb', 0): ({'gpu_check(out="results/gpu_check/gpu_check.json")': 'gpu_check(dry_run=True, out=OUT + "/g.json")'},
                                 ['DRY   prefill share', 'same tokens']),
}


def tiny(src:str, repl:dict) -> str:
    "The cell with every replacement applied (each must match, so a changed cell fails here rather than running big)."
    for a, b in repl.items():
        assert a in src, f'the gpu cell no longer contains {a!r}: update CELLS in tests/test_gpu_cells.py'
        src = src.replace(a, b)
    return src


def test_every_gpu_cell_is_covered():
    names = sorted(p.name for p in NBS.glob('*.ipynb'))
    found = {(n, i) for n in names if n not in NOT_HERE for i in range(len(gpu_cells(n)))}
    assert found == set(CELLS), f'gpu cells without a tiny check: {sorted(found - set(CELLS))}; stale entries: {sorted(set(CELLS) - found)}'
    assert all(gpu_cells(n) for n in NOT_HERE), 'a notebook in NOT_HERE has no gpu cell any more'


@pytest.fixture(scope='module')
def smollm2():
    pytest.importorskip('gguf')
    from jacap_nb.models import load_smollm2
    return load_smollm2()


@pytest.mark.parametrize('key', sorted(CELLS), ids=lambda k: f'{k[0]}[{k[1]}]')
def test_gpu_cell_runs_tiny(key, smollm2, tmp_path, capsys, monkeypatch):
    import jacap_nb.bench, jacap_nb.models, jacap_nb.pipeline, jacap_nb.presses, jacap_nb.report, jacap_nb.speed, jacap_nb.tasks
    import jacap_nb.texts, jacap_nb.gpu_check, jacap_nb.provenance
    monkeypatch.setattr(jacap_nb.models, 'default_model', lambda: 'smollm2')   # the cells' own load_model(default_model())
    name, i = key
    repl, expected = CELLS[key]
    src = tiny(gpu_cells(name)[i], repl)
    monkeypatch.chdir(tmp_path)
    ns = {}
    for mod in (jacap_nb.models, jacap_nb.texts, jacap_nb.tasks, jacap_nb.presses, jacap_nb.pipeline, jacap_nb.bench, jacap_nb.report,
                jacap_nb.speed, jacap_nb.gpu_check, jacap_nb.provenance):
        ns.update({k: getattr(mod, k) for k in mod.__all__})          # what the notebook has imported by then (its import cells)
    model, tok = smollm2
    ns.update(model=model, tok=tok, tokenizer=tok, OUT=str(tmp_path / 'out'))
    exec(compile(src, f'{name}:gpu[{i}]', 'exec'), ns)
    out = capsys.readouterr().out
    for e in expected: assert e in out, f'{e!r} not in the output of {name} gpu cell {i}:\n{out}'
