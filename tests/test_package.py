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

def test_setup_py_runs_without_pkg_resources():
    "setup.py reads settings.ini itself: it works where pkg_resources (deprecated, absent from new setuptools) is missing."
    code = ("import sys; sys.modules['pkg_resources'] = None; sys.argv = ['setup.py', '--version']\n"
            "exec(compile(open('setup.py').read(), 'setup.py', 'exec'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    assert out.strip().splitlines()[-1] == cfg['DEFAULT']['version']

def test_library_imports_and_scores_without_triton():
    """Triton is Linux-only: with it unimportable the whole library imports, kernels.available() is 'torch',
    backend="auto" scores through torch and backend="triton" says what it needs."""
    code = ("import sys; sys.modules['triton'] = None\n"
            "import torch, jacap_nb.kernels as K, jacap_nb.cache, jacap_nb.presses, jacap_nb.pipeline, jacap_nb.bench\n"
            "from jacap_nb import scoring\n"
            "assert K.available() == 'torch', K.available()\n"
            "k, v, q = torch.randn(1, 2, 1, 9, 8), torch.randn(1, 2, 1, 9, 8), torch.randn(1, 2, 3, 8)\n"
            "s = scoring.capkv_scores(k, v, q, backend='auto')\n"
            "assert s.shape == (1, 2, 3, 9) and torch.equal(s, scoring.capkv_scores(k, v, q, backend='torch'))\n"
            "assert scoring.jacap_scores(k, v, q, q.abs(), backend='auto').shape == (1, 2, 3, 9)\n"
            "for f in (lambda: scoring.capkv_scores(k, v, q, backend='triton'), lambda: scoring.jacap_scores(k, v, q, q.abs(), backend='triton')):\n"
            "    try: f(); raise SystemExit('backend=triton did not raise')\n"
            "    except RuntimeError as e: assert 'Triton' in str(e), e\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": ""})

def test_no_private_name_crosses_a_module():
    "A module uses another module's public names only: `from .scoring import _x` or `scoring._x` elsewhere is a defect."
    import ast
    pkg = ROOT/'jacap_nb'
    mods = {p.stem for p in pkg.glob('*.py')}
    found = []
    for p in sorted(pkg.glob('*.py')):
        if p.stem == '_modidx': continue
        tree, aliases = ast.parse(p.read_text()), {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != '__future__':
                src = (node.module or '').removeprefix('jacap_nb').lstrip('.')
                if node.level or (node.module or '').startswith('jacap_nb'):
                    for a in node.names:
                        if not src and a.name in mods: aliases[a.asname or a.name] = a.name   # from . import scoring
                        elif src and a.name.startswith('_'): found.append(f"{p.name}: from {src} import {a.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
               and node.attr.startswith('_') and not node.attr.startswith('__') and aliases[node.value.id] != p.stem:
                found.append(f"{p.name}: {node.value.id}.{node.attr}")
    assert not found, "private names used across modules:\n" + "\n".join(sorted(set(found)))

def test_no_import_cycle():
    "jacap_nb's modules import each other one way only, lazy (in-function) imports included."
    import ast
    pkg = ROOT/'jacap_nb'
    mods = {p.stem for p in pkg.glob('*.py')} - {'_modidx', '__init__'}
    graph = {}
    for p in pkg.glob('*.py'):
        if p.stem not in mods: continue
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').startswith('jacap_nb')):
                m = (node.module or '').removeprefix('jacap_nb').lstrip('.')
                deps |= {m.split('.')[0]} if m else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split('.')[1] for a in node.names if a.name.startswith('jacap_nb.')}
        graph[p.stem] = (deps & mods) - {p.stem}
    state = {}
    def cycle_from(u, path):
        state[u] = 'open'
        for v in sorted(graph[u]):
            if state.get(v) == 'open': return path + [u, v]
            if v not in state and (c := cycle_from(v, path + [u])): return c
        state[u] = 'done'
    for u in sorted(graph):
        if u not in state and (c := cycle_from(u, [])): raise AssertionError(f"import cycle: {' -> '.join(c)}")
