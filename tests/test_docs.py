"""The docs site, checked without Quarto.

The notebooks save no `show_doc` output: nbdev renders every API entry when the site is built (its `exec_show_docs`
runs the export cells, the import-only cells and the `show_doc` cells, nothing else), so an entry and its [source]
link always match the code exported at that commit. The API tests render the notebooks the same way
(`tests/nbtools.py render`, in a subprocess) and check what the site would show; the other tests read nbs/*.ipynb
(JSON), jacap_nb/*.py (ast), README.md, settings.ini and nbs/sidebar.yml, and say in each failure what to change."""
import ast, atexit, base64, difflib, functools, importlib.util, json, os, pathlib, re, shutil, struct, subprocess, sys, tempfile
import pytest
import nbtools
from nbtools import ROOT, DOCS_URL, GIT_URL, BRANCH, COLAB_EXCEPTIONS, src

NBS, LIB = ROOT/'nbs', ROOT/'jacap_nb'

def notebooks() -> list: return sorted(p.name for p in NBS.glob('*.ipynb'))

@functools.lru_cache(None)
def load_nb(path) -> dict: return json.loads(pathlib.Path(path).read_text(encoding='utf-8'))

def rel(p) -> str: return pathlib.Path(p).resolve().relative_to(ROOT).as_posix()

def fail_if(problems:list, header:str):
    "Fail with `header` and one problem per line (no traceback: the message says what to fix)."
    if problems: pytest.fail(header + '\n' + '\n'.join(problems), pytrace=False)

def directives(s:str) -> dict:
    "`#| key: value` lines of a cell source -> {key: value}."
    out = {}
    for l in s.splitlines():
        m = re.match(r'\s*#\|\s*([\w-]+):?\s*(.*?)\s*$', l)
        if m: out[m.group(1)] = m.group(2)
    return out

def hidden_by(s:str) -> str|None:
    "The directive that keeps this cell's output off the docs page, if any."
    d = directives(s)
    if 'hide' in d: return '#| hide'
    for k in ('output', 'include'):
        if d.get(k, '').lower() == 'false': return f'#| {k}: false'
    return None

def markdown_output(cell) -> str:
    return '\n'.join(''.join(o['data']['text/markdown']) if isinstance(o['data']['text/markdown'], list)
                     else o['data']['text/markdown'] for o in cell.get('outputs', [])
                     if o.get('output_type') in ('execute_result', 'display_data') and 'text/markdown' in o.get('data', {}))

# ---------------------------------------------------------------------------------------------------------------------
# The modules and what they define (the way nbdev.doclinks._get_exps finds source lines)

_header_re = re.compile(r'File to edit: (\S+?\.ipynb)')

def generated_modules() -> list:
    "[(module path, notebook path)] for every module whose header names the notebook it is exported from."
    res = []
    for py in sorted(LIB.rglob('*.py')):
        m = _header_re.search(py.read_text(encoding='utf-8')[:1000])
        if m: res.append((py, (py.parent/m.group(1)).resolve()))
    return res

def _targets(node) -> list:
    ts = node.targets if isinstance(node, ast.Assign) else [node.target]
    out = []
    for t in ts:
        if isinstance(t, ast.Name): out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)): out += [e.id for e in t.elts if isinstance(e, ast.Name)]
    return out

@functools.lru_cache(None)
def module_info(py) -> tuple:
    """(__all__, defs, assigns) of module `py`. `defs` is nbdev's own map for [source] links: top-level def/class ->
    the line of the `def`/`class` keyword (ast lineno: decorators are *not* counted), `Class.method` -> its def line.
    `assigns`: top-level names bound by assignment (also inside top-level if/try) -> first line."""
    tree = ast.parse(pathlib.Path(py).read_text(encoding='utf-8'))
    all_, defs, assigns = [], {}, {}
    fdefs = ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef
    for node in tree.body:
        if isinstance(node, fdefs):
            defs[node.name] = node.lineno
            if isinstance(node, ast.ClassDef):
                defs.update({f'{node.name}.{m.name}': m.lineno for m in node.body if isinstance(m, fdefs)})
    def walk(body):
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for n in _targets(node): assigns.setdefault(n, node.lineno)
                if _targets(node) == ['__all__']: all_[:] = ast.literal_eval(node.value)
            elif isinstance(node, ast.If): walk(node.body); walk(node.orelse)
            elif isinstance(node, ast.Try): walk(node.body); [walk(h.body) for h in node.handlers]; walk(node.orelse)
    walk(tree.body)
    return tuple(all_), defs, assigns

# ---------------------------------------------------------------------------------------------------------------------
# show_doc cells and their entries, as the docs build renders them

_showdoc_re = re.compile(r'show_doc\(\s*([A-Za-z_][\w.]*)\s*(?:,[^()]*)?\)')
_heading_re = re.compile(r'^#{1,6}\s+(.+?)\s*$', re.M)

def _code_lines(s:str) -> str:
    return '\n'.join(l for l in s.splitlines() if l.strip() and not l.lstrip().startswith('#'))

def showdoc_cells(nb, rendered:dict) -> list:
    """[(cell index, symbol, rendered markdown, hidden-by or None, renamed)] of the cells that are one `show_doc(...)`
    call; `rendered` maps each call to its markdown as the docs build renders it (`rendered_entries`)."""
    res = []
    for i, c in enumerate(nb['cells']):
        if c['cell_type'] != 'code': continue
        call = _code_lines(src(c)).strip()
        m = _showdoc_re.fullmatch(call)
        if m: res.append((i, _unwrapped(m.group(1)), rendered.get(call, ''), hidden_by(src(c)), 'name=' in m.group(0)))
    return res

# What a notebook's export cells import beyond the main environment: it is rendered where that is installed (.ci/run
# renders 09 in the kvpress environment, and so does the docs workflow).
RENDER_NEEDS = {'09_kvpress_compat.ipynb': 'kvpress'}

def renderable(name:str) -> bool: return name not in RENDER_NEEDS or importlib.util.find_spec(RENDER_NEEDS[name]) is not None

@functools.lru_cache(None)
def rendered_dir() -> pathlib.Path:
    "Every notebook this environment can render, processed as the docs build does (`tests/nbtools.py render`)."
    out = pathlib.Path(tempfile.mkdtemp(prefix='jacap_nb_rendered_'))
    atexit.register(shutil.rmtree, out, True)
    names = [n for n in notebooks() if renderable(n)]
    r = subprocess.run([sys.executable, str(ROOT/'tests'/'nbtools.py'), 'render', str(out), *(str(NBS/n) for n in names)],
                       cwd=ROOT, capture_output=True, text=True, env={**os.environ, 'MPLBACKEND': 'Agg'})
    if r.returncode: pytest.fail(f'rendering the notebooks as the docs build does failed (python tests/nbtools.py render '
                                 f'DIR nbs/NAME.ipynb shows it):\n{r.stderr[-3000:]}', pytrace=False)
    return out

def rendered_entries(name:str) -> dict:
    "{`show_doc(...)` call: its markdown} of notebook `name` as the docs site shows it."
    if not renderable(name): pytest.skip(f'{name}: its export cells import {RENDER_NEEDS[name]}, which is not installed here '
                                         f'(the kvpress environment renders it)')
    nb = load_nb(rendered_dir()/name)
    return {call: markdown_output(c) for c in nb['cells'] if c['cell_type'] == 'code'
            and _showdoc_re.fullmatch(call := _code_lines(src(c)).strip())}

def _unwrapped(sym:str) -> str:
    "`LayerView.keys_pre.func` (how a cached_property is documented) -> `LayerView.keys_pre`."
    return re.sub(r'\.(func|fget|__func__|__wrapped__)$', '', sym)

def entry_name(md:str) -> str|None:
    "The name in the heading of a show_doc output (`### Jacap` -> `Jacap`)."
    m = _heading_re.search(md)
    return m.group(1).strip('`') if m else None

def _names_match(sym:str, head:str) -> bool:
    return head == sym or sym.endswith('.' + head) or head.endswith('.' + sym)

def _module_notebooks() -> list: return sorted({nbp.name for _, nbp in generated_modules()})

def test_show_doc_outputs_are_not_saved():
    "A saved show_doc output would go stale at the next moved line; nbdev renders them when the site is built."
    saved = [f'nbs/{name} cell {i}: {_code_lines(src(c)).strip()}' for name in notebooks()
             for i, c in enumerate(load_nb(NBS/name)['cells']) if c['cell_type'] == 'code' and c.get('outputs')
             and _showdoc_re.fullmatch(_code_lines(src(c)).strip())]
    fail_if(saved, 'show_doc cells with saved outputs (clear them; the docs build renders them):')

def test_docs_build_runs_only_imports_exports_and_show_docs():
    """nbdev's `exec_show_docs` runs, in a notebook with exports or show_doc cells, every cell that has an export
    directive, an import anywhere in it, or a show_doc call: a cell there that mixes an import with other work would run
    at docs build time (a model load, a benchmark). Notebooks with neither (the results, the home page) run nothing."""
    import warnings
    from nbdev.process import NBProcessor
    from nbdev.processors import _do_eval, add_show_docs
    bad = []
    for name in notebooks():
        proc = NBProcessor(NBS/name, procs=[add_show_docs]); proc.process()
        if not proc.nb.has_docs_: continue
        for i, c in enumerate(proc.nb.cells):
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                if c.cell_type != 'code' or not _do_eval(c) or c.directives_.keys() & {'export', 'exports', 'exporti'}: continue
            body = ast.parse(c.source).body
            if all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body) or _showdoc_re.fullmatch(_code_lines(c.source).strip()):
                continue
            bad.append(f'nbs/{name}: the cell that starts {c.source.strip().splitlines()[0][:80]!r}')
    fail_if(bad, 'cells the docs build would run although they do more than import (move their imports into a cell of '
                 'their own above them, and out of functions):')

@pytest.mark.parametrize('name', _module_notebooks())
def test_every_public_name_has_an_api_entry(name):
    """Every name in a generated module's __all__ has an entry on its notebook's rendered page, headed `### name`: the
    one nbdev adds after the visible export cell that defines a function or class, or a visible `show_doc(name)` cell
    (methods, names defined in hidden cells, an entry placed elsewhere). A constant (a name bound by assignment, whose
    show_doc would print `dict instance: ...`) has a markdown cell headed `### NAME` instead."""
    report = []
    for py, nbp in generated_modules():
        if nbp.name != name: continue
        where = f'{rel(nbp)} (module {rel(py)})'
        if not nbp.exists(): report.append(f'{where}: the notebook named in the module header does not exist'); continue
        names, defs, assigns = module_info(py)
        nb = load_nb(nbp)
        documented, broken = set(), []
        for i, sym, md, hidden, renamed in showdoc_cells(nb, rendered_entries(name)):
            head = entry_name(md) if md.strip() else None
            if hidden: broken.append((sym, f'cell {i} `show_doc({sym})` is {hidden}, so the page does not show it'))
            elif not md.strip():
                broken.append((sym, f'cell {i} `show_doc({sym})` renders nothing in the docs build (is {sym} defined by '
                                    f'an export cell above it, or imported by an import-only cell?)'))
            elif head is None or not (renamed or _names_match(sym, head)):
                hint = f' (a cached_property is documented by `show_doc({sym}.func)`)' if 'cached_property' in str(head) else ''
                broken.append((sym, f'cell {i} `show_doc({sym})` renders a heading {head!r}, not {sym!r}{hint}'))
            else:
                documented |= {sym, head}
                if sym.split('.')[0] not in defs: documented.add(sym.split('.')[-1])   # show_doc(presses.Jacap)
        for call, md in rendered_entries(name).items():                # the entries nbdev adds after export cells
            m, head = _showdoc_re.fullmatch(call), entry_name(md)
            if m and head and _names_match(_unwrapped(m.group(1)), head): documented |= {_unwrapped(m.group(1)), head}
        covered = {s for s, _ in broken} | {s.split('.')[-1] for s, _ in broken}
        md_heads = {m.group(1).strip('`') for c in nb['cells'] if c['cell_type'] == 'markdown'
                    for m in _heading_re.finditer(src(c))}
        missing_fn, missing_const = [], []
        for n in names:
            if n in documented or n in covered: continue
            is_const = n not in defs and n in assigns
            if is_const and n in md_heads: continue
            (missing_const if is_const else missing_fn).append(n)
        if missing_fn or missing_const or broken:
            lines = [f'{where}: {len(missing_fn) + len(missing_const)} of {len(names)} public names have no API entry'
                     + (f', {len(broken)} entries are broken' if broken else '')]
            if missing_fn: lines.append('  define it in a visible export cell (nbdev adds its entry there), or add a code '
                                        'cell `show_doc(NAME)` below it (not run: the docs build renders it), for: '
                                        + ', '.join(missing_fn))
            if missing_const: lines.append('  constants: add a markdown cell "### `NAME`" + what it holds below the '
                                           'definition, or make the name private (_NAME) so it leaves __all__, for: '
                                           + ', '.join(missing_const))
            lines += ['  ' + m for _, m in broken]
            report.append('\n'.join(lines))
    fail_if(report, 'public names without a rendered API entry, per notebook:')

# ---------------------------------------------------------------------------------------------------------------------

_source_re = re.compile(r'\[source\]\(([^)\s]+)\)')

@pytest.mark.parametrize('name', _module_notebooks())
def test_source_links_point_at_the_definition(name):
    """Every rendered [source](.../blob/<branch>/<file>.py#L<n>) link points at the definition line, as nbdev
    computes it: the line of `def`/`class` (after any decorators), `Class.method` -> the method's def line; names
    bound by assignment (nbdev gives them no link) are accepted at their assignment line."""
    prefix = f'{GIT_URL}/blob/{BRANCH}/'
    entries = rendered_entries(name)
    stale, n_links = [], 0
    for call, md in entries.items():
        for m in _source_re.finditer(md):
            n_links += 1
            url, head = m.group(1), entry_name(md[m.end():]) or '?'
            at = f'nbs/{name} `{call}` ({head})'
            if not url.startswith(prefix): stale.append(f'{at}: links {url}, which is not under {prefix}'); continue
            path, _, line = url[len(prefix):].partition('#L')
            if not (ROOT/path).is_file(): stale.append(f'{at}: links {path}, which does not exist'); continue
            _, defs, assigns = module_info(ROOT/path)
            want = defs.get(head, assigns.get(head, assigns.get(head.split('.')[-1])))
            if want is None: stale.append(f'{at}: links {path}, where {head} is not defined at the top level')
            elif line != str(want): stale.append(f'{at}: links {path}#L{line}, {head} is defined at line {want}' + (
                ' (nbdev 2.4.14 finds no line for an object imported from another module: document it in the notebook '
                'that exports it)' if line == 'None' else ''))
    if any(md.strip() for md in entries.values()) and not n_links:
        pytest.fail(f'nbs/{name}: its rendered entries have no [source] link: has the output format changed?', pytrace=False)
    fail_if(stale, f'{len(stale)} of {n_links} rendered [source] links are wrong:')

# ---------------------------------------------------------------------------------------------------------------------
# Links. README.md (generated from nbs/index.ipynb by tests/readme.py) is shown at the repository root on GitHub and on
# PyPI, where no relative link works: it links pages of the docs site (DOCS_URL + 'XX_name.html') and repository files
# (GIT_URL + '/blob/main/path'). Notebooks link each other relatively ('XX_name.ipynb'): that works on GitHub (they
# all live in nbs/), in Jupyter, and on the site, where Quarto rewrites .ipynb links to .html.

_fence_re = re.compile(r'^(```|~~~).*?^\1\s*$', re.M | re.S)
_code_span_re = re.compile(r'(`+)[^`].*?\1', re.S)
_target_res = [re.compile(r'\]\(\s*<?([^)\s>]+)>?[^)]*\)'),              # [text](url) and ![alt](img)
               re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)', re.M), # [ref]: url
               re.compile(r'''(?:href|src)\s*=\s*["']([^"']+)["']''')]       # HTML

def link_targets(md:str) -> list:
    md = _code_span_re.sub('', _fence_re.sub('', md))
    return [m.group(1) for r in _target_res for m in r.finditer(md)]

def _page_stems() -> dict: return {p.stem: p for p in NBS.glob('*.ipynb')}

def _suggest_page(stem:str) -> str|None:
    "An existing notebook for a link to `stem` (`09_bench` -> `12_bench` after a renumbering)."
    stems = _page_stems()
    if stem in stems: return stem
    bare = {re.sub(r'^\d+_', '', s): s for s in stems}
    m = difflib.get_close_matches(re.sub(r'^\d+_', '', stem), list(bare), n=1, cutoff=0.6)
    return bare[m[0]] if m else None

def check_absolute(url:str) -> str|None:
    "Why an absolute link into this project (docs site, GitHub repo, Colab) is broken, or None."
    base = url.split('#')[0].split('?')[0]
    if base.rstrip('/') + '/' == DOCS_URL: return None
    if base.startswith(DOCS_URL):
        page = base[len(DOCS_URL):]
        if not page.endswith('.html'): return f'a docs page URL ends in .html ({DOCS_URL}XX_name.html)'
        stem = page[:-5]
        if stem == 'index' or (NBS/f'{stem}.ipynb').exists() or (NBS/f'{stem}.qmd').exists(): return None
        s = _suggest_page(stem)
        return f'there is no nbs/{stem}.ipynb' + (f' (renamed to {DOCS_URL}{s}.html?)' if s else '')
    for pre in (f'{GIT_URL}/blob/{BRANCH}/', f'{GIT_URL}/tree/{BRANCH}/',
                f'https://colab.research.google.com/github/{nbtools.USER}/{nbtools.REPO}/blob/{BRANCH}/'):
        if base.startswith(pre):
            path = base[len(pre):]
            return None if (ROOT/path).exists() else f'there is no {path} in the repository'
    return None

def readme_problem(url:str) -> str|None:
    "README.md / nbs/index.ipynb: only absolute links (GitHub and PyPI show README.md at the root)."
    if url.startswith(('#', 'mailto:')): return None
    if re.match(r'[a-z][a-z0-9+.-]*:', url, re.I): return check_absolute(url)
    path = url.split('#')[0]
    if path.endswith('.ipynb'):
        s = _suggest_page(pathlib.Path(path).stem)
        return ('relative links break on PyPI and on GitHub (README is at the root, notebooks in nbs/): link the docs '
                'page ' + (f'{DOCS_URL}{s}.html' if s else f'{DOCS_URL}<page>.html (no notebook matches {path})'))
    for cand in (ROOT/path, NBS/path):
        if path and cand.exists():
            return f'relative links break on PyPI: use {GIT_URL}/blob/{BRANCH}/{rel(cand)}'
    return f'relative link to {path!r}, which exists neither at the root nor in nbs/: use an absolute URL'

def notebook_problem(url:str) -> str|None:
    "Other notebooks: relative links resolve in nbs/ and name the .ipynb (Quarto rewrites it to .html)."
    if url.startswith(('#', 'mailto:')): return None
    if re.match(r'[a-z][a-z0-9+.-]*:', url, re.I): return check_absolute(url)
    if url.startswith('/'): return 'site-absolute path: link the notebook relatively (XX_name.ipynb)'
    path = url.split('#')[0].split('?')[0]
    if path.endswith('.html'):
        s = _suggest_page(pathlib.Path(path).stem)
        return f'link the notebook, not the page: {s or pathlib.Path(path).stem}.ipynb (Quarto makes it .html)'
    if not (NBS/path).exists():
        s = _suggest_page(pathlib.Path(path).stem) if path.endswith('.ipynb') else None
        return f'there is no nbs/{path}' + (f' (renamed to {s}.ipynb?)' if s else '')
    return None

def test_readme_and_notebook_links():
    bad = []
    readme = (ROOT/'README.md').read_text(encoding='utf-8')
    for url in link_targets(readme):
        why = readme_problem(url)
        if why: bad.append(f'README.md: ({url}): {why}')
    if not any(u.split('#')[0].rstrip('/') + '/' == DOCS_URL for u in link_targets(readme)):
        bad.append(f'README.md: no link to the docs site {DOCS_URL} (add one to nbs/index.ipynb)')
    for name in notebooks():
        check = readme_problem if name == nbtools._cfg.get('readme_nb', 'index.ipynb') else notebook_problem
        for i, c in enumerate(load_nb(NBS/name)['cells']):
            if c['cell_type'] != 'markdown': continue
            for url in link_targets(src(c)):
                why = check(url)
                if why: bad.append(f'nbs/{name} cell {i}: ({url}): {why}')
    fail_if(bad, f'{len(bad)} broken links. README.md is built from nbs/index.ipynb: fix the notebook, then '
                 f'`python tests/readme.py`.')

# ---------------------------------------------------------------------------------------------------------------------

def test_colab_badge_and_install_cell():
    """Every notebook except COLAB_EXCEPTIONS (tests/nbtools.py, with the reason for each) has, right after its title
    cell, the Colab badge cell and the hidden, Colab-only install cell (nbtools.badge_source / INSTALL_SOURCE)."""
    names = notebooks()
    gone = [n for n in COLAB_EXCEPTIONS if n not in names]
    assert not gone, f'COLAB_EXCEPTIONS in tests/nbtools.py names notebooks that do not exist: {gone}'
    bad = []
    for name in names:
        if not nbtools.colab_applies(name): continue
        why = nbtools.colab_problem(load_nb(NBS/name), name)
        if why: bad.append(f'nbs/{name}: {why}')
    fail_if(bad, f'{len(bad)} notebooks lack the Colab badge + install cell after their title; '
                 f'`python tests/nbtools.py add-colab nbs/*.ipynb` inserts/refreshes them (exceptions and the cell '
                 f'text: tests/nbtools.py COLAB_EXCEPTIONS, INSTALL_SOURCE):')

def test_nbtools_add_colab_is_idempotent_and_nbdev_clean_stable(tmp_path):
    "The tool only inserts the two cells, a second run changes nothing, and nbdev_clean leaves its output unchanged."
    from nbdev.clean import clean_nb
    from execnb.nbio import nb2str as nbdev_nb2str
    cfg = nbtools._cfg
    for name in notebooks():
        p = tmp_path/name
        shutil.copy(NBS/name, p)
        before = load_nb(NBS/name)
        changed = nbtools.add_colab_file(p)
        once = p.read_text(encoding='utf-8')
        assert not nbtools.add_colab_file(p) and p.read_text(encoding='utf-8') == once, f'{name}: second run changed it'
        nb = json.loads(once)
        if not nbtools.colab_applies(name):
            assert not changed and once == (NBS/name).read_text(encoding='utf-8'); continue
        assert nbtools.colab_problem(nb, name) is None, name
        kept = [c for c in nb['cells'] if not (nbtools.is_badge_cell(c) or nbtools.is_install_cell(c))]
        assert kept == [c for c in before['cells'] if not (nbtools.is_badge_cell(c) or nbtools.is_install_cell(c))]
        clean_nb(nb, clear_all=False, allowed_metadata_keys=cfg.get('allowed_metadata_keys', '').split(),
                 allowed_cell_metadata_keys=cfg.get('allowed_cell_metadata_keys', '').split(), clean_ids=True)
        assert nbdev_nb2str(nb) == once, f'{name}: nbdev_clean would rewrite what add-colab wrote'

# ---------------------------------------------------------------------------------------------------------------------
# Saved outputs

PROGRESS_RES = [re.compile(r'\d%\|'), re.compile(r'(?:it/s|s/it)\]'), re.compile(r'\r(?!\n)')]
MACHINE_DIRS = ('root', 'home', 'work', 'tmp')   # top-level folders of a machine: no user has ours
MACHINE_PATH_RE = re.compile('|'.join(f'/{d}/' for d in MACHINE_DIRS) + r'|\.venv\b|site-packages/')
IMAGE_BUDGET = 1_500_000     # bytes of base64 image data saved in all notebooks together
MAX_IMAGE_WIDTH = 2000       # px

def _text(v) -> str: return ''.join(v) if isinstance(v, list) else str(v)

def output_texts(o) -> list:
    "[(kind, text)] of the text a saved output carries."
    t = o.get('output_type')
    if t == 'stream': return [(f'stream:{o.get("name")}', _text(o.get('text', '')))]
    if t == 'error': return [('error', o.get('ename', '') + ': ' + o.get('evalue', '') + '\n' + '\n'.join(o.get('traceback', [])))]
    return [(k, _text(v)) for k, v in o.get('data', {}).items() if k.startswith('text/') or k.endswith('json')]

def all_outputs():
    for name in notebooks():
        for i, c in enumerate(load_nb(NBS/name)['cells']):
            for o in c.get('outputs', []): yield name, i, o

def _snippet(text:str, m) -> str:
    return repr(text[max(0, m.start() - 40): m.end() + 40])

def image_size(mime:str, data:str) -> tuple|None:
    "(width, height) of a base64 PNG or JPEG, None if unreadable."
    try: raw = base64.b64decode(data)
    except Exception: return None
    if mime == 'image/png' and raw[:8] == b'\x89PNG\r\n\x1a\n': return struct.unpack('>II', raw[16:24])
    if mime == 'image/jpeg':
        i = 2
        while i + 9 < len(raw):
            if raw[i] != 0xFF: i += 1; continue
            marker, seglen = raw[i+1], struct.unpack('>H', raw[i+2:i+4])[0]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3):
                h, w = struct.unpack('>HH', raw[i+5:i+9]); return w, h
            i += 2 + seglen
    return None

def _group(found:dict) -> str:
    return '\n'.join(f'nbs/{nb} ({len(v)}): ' + '; '.join(v[:6]) + (' ...' if len(v) > 6 else '')
                     for nb, v in sorted(found.items(), key=lambda kv: -len(kv[1])))

def check_progress() -> str|None:
    found = {}
    for name, i, o in all_outputs():
        if 'application/vnd.jupyter.widget-view+json' in o.get('data', {}):
            found.setdefault(name, []).append(f'cell {i}: an ipywidgets output (a tqdm.auto bar?)'); continue
        for kind, text in output_texts(o):
            for r in PROGRESS_RES:
                m = r.search(text)
                if m: found.setdefault(name, []).append(f'cell {i} {kind}: {_snippet(text, m)}'); break
    if found: return ('progress bars / carriage returns in saved outputs: pass disable=True / leave=False to tqdm '
                      '(or print a summary instead), re-run and save:\n' + _group(found))

def check_machine_paths() -> str|None:
    found = {}
    for name, i, o in all_outputs():
        for kind, text in output_texts(o):
            m = MACHINE_PATH_RE.search(text)
            if m: found.setdefault(name, []).append(f'cell {i} {kind}: {_snippet(text, m)}')
    if found: return ('machine paths in saved outputs (print paths relative to the repository or the file name only; '
                      'silence warnings that print library paths), then re-run and save:\n' + _group(found))

def check_image_budget() -> str|None:
    per_nb, images = {}, []
    for name, i, o in all_outputs():
        for mime, v in o.get('data', {}).items():
            if mime.startswith('image/'):
                n = len(_text(v)); per_nb[name] = per_nb.get(name, 0) + n; images.append((n, name, i, mime))
    total = sum(per_nb.values())
    if total > IMAGE_BUDGET:
        top = ', '.join(f'nbs/{nb} {n/1e6:.2f} MB' for nb, n in sorted(per_nb.items(), key=lambda kv: -kv[1]) if n)
        big = ', '.join(f'nbs/{nb} cell {i} {n/1e3:.0f} kB' for n, nb, i, _ in sorted(images, reverse=True)[:8])
        return (f'saved images total {total/1e6:.2f} MB (base64), over the {IMAGE_BUDGET/1e6:.1f} MB budget: use '
                f'smaller figures / dpi (72-100), set_matplotlib_formats("png") rather than retina, fewer panels, or '
                f'mark exploratory plots #| hide with cleared output.\nPer notebook: {top}\nLargest images: {big}')

def check_image_width() -> str|None:
    found = {}
    for name, i, o in all_outputs():
        for mime, v in o.get('data', {}).items():
            if mime in ('image/png', 'image/jpeg'):
                wh = image_size(mime, _text(v))
                if wh and wh[0] > MAX_IMAGE_WIDTH: found.setdefault(name, []).append(f'cell {i}: {wh[0]}x{wh[1]} px')
    if found: return f'images wider than {MAX_IMAGE_WIDTH} px (lower figsize x dpi):\n' + _group(found)

OUTPUT_RULES = {'progress': check_progress, 'machine_paths': check_machine_paths,
                'image_budget': check_image_budget, 'image_width': check_image_width}

@pytest.mark.parametrize('rule', list(OUTPUT_RULES))
def test_notebook_outputs_are_clean(rule):
    why = OUTPUT_RULES[rule]()
    if why: pytest.fail(why, pytrace=False)

# ---------------------------------------------------------------------------------------------------------------------

def _sidebar_pages(items) -> list:
    out = []
    for it in items or []:
        if isinstance(it, str): out.append(it)
        elif isinstance(it, dict):
            if 'href' in it or 'file' in it: out.append(it.get('href') or it.get('file'))
            out += _sidebar_pages(it.get('contents'))
    return out

def _nb_order(name:str) -> tuple:
    m = re.match(r'(\d+)[a-z]?_', name)                 # 06b_budgets: between 06_ and 07_
    return (0, -1, name) if name == 'index.ipynb' else (1, int(m.group(1)) if m else 10**6, name)

def test_sidebar_lists_notebooks_only():
    """nbdev's generated sidebar lists every file under nbs/ (nbs/results/*.csv, *.json): the committed nbs/sidebar.yml
    (custom_sidebar = True) lists the notebooks, each once, in their numbered order, in sections."""
    import yaml
    problems = []
    if not nbtools._cfg.getboolean('custom_sidebar', False):
        problems.append('settings.ini: set custom_sidebar = True, or nbdev_docs/nbdev_proc_nbs regenerate nbs/sidebar.yml '
                        '(with every CSV/JSON file under nbs/results/)')
    ign = {l.strip() for l in (ROOT/'.gitignore').read_text().splitlines()}
    if ign & {'nbs/sidebar.yml', 'sidebar.yml', '/nbs/sidebar.yml'}: problems.append('.gitignore: nbs/sidebar.yml is '
                                                                                      'committed, do not ignore it')
    if not re.search(r'metadata-files:.*sidebar\.yml', (ROOT/'_quarto.yml').read_text()):
        problems.append('_quarto.yml: metadata-files must include sidebar.yml')
    if not (NBS/'sidebar.yml').exists(): fail_if(problems + ['nbs/sidebar.yml does not exist'], 'docs sidebar:')
    sb = yaml.safe_load((NBS/'sidebar.yml').read_text(encoding='utf-8'))
    pages = _sidebar_pages(sb['website']['sidebar']['contents'])
    problems += [f'nbs/sidebar.yml: {p}: not a notebook (the sidebar lists notebooks only)' for p in pages
                 if not p.endswith('.ipynb')]
    problems += [f'nbs/sidebar.yml: {p}: listed but nbs/{p} does not exist' for p in pages
                 if p.endswith('.ipynb') and not (NBS/p).exists()]
    problems += [f'nbs/sidebar.yml: {p}: listed {pages.count(p)} times' for p in sorted(set(pages)) if pages.count(p) > 1]
    problems += [f'nbs/sidebar.yml: {n}: missing, add it to its section' for n in notebooks() if n not in pages]
    nbs_pages = [p for p in pages if p.endswith('.ipynb')]
    if nbs_pages != sorted(nbs_pages, key=_nb_order):
        problems.append(f'nbs/sidebar.yml: order {nbs_pages} is not index.ipynb, then by number')
    fail_if(problems, 'docs sidebar:')
