"""Build README.md from nbs/index.ipynb without Quarto (which `nbdev_readme` needs and which is not installable offline).

Markdown cells are copied, visible code cells become ```python blocks followed by their text/markdown outputs;
cells flagged `#| hide` are left out; cells flagged `#| echo: false` show their outputs without the code (as on the site). `python tests/readme.py` writes README.md; tests/test_package.py checks it is current."""
import json, pathlib, re

ROOT = pathlib.Path(__file__).resolve().parents[1]

def _src(cell): return ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']

def _hidden(src): return any(re.fullmatch(r'#\|\s*hide\s*', l.strip()) for l in src.splitlines())

def _no_echo(src): return any(re.fullmatch(r'#\|\s*echo:\s*false\s*', l.strip()) for l in src.splitlines())

def _outputs(cell):
    out = []
    for o in cell.get('outputs', []):
        if o.get('output_type') == 'stream': out.append('    ' + ''.join(o['text']).rstrip().replace('\n', '\n    '))
        elif 'text/markdown' in o.get('data', {}): out.append(''.join(o['data']['text/markdown']).rstrip())
    return out

def readme_text(nb_path=ROOT/'nbs'/'index.ipynb'):
    "The README.md text generated from the index notebook."
    parts = []
    for cell in json.loads(pathlib.Path(nb_path).read_text())['cells']:
        src = _src(cell)
        if cell['cell_type'] == 'markdown': parts.append(src.strip())
        elif cell['cell_type'] == 'code' and not _hidden(src):
            code = '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()
            if code and not _no_echo(src): parts.append(f'```python\n{code}\n```')
            parts += _outputs(cell)
    return '\n\n'.join(p for p in parts if p) + '\n'

if __name__ == '__main__': (ROOT/'README.md').write_text(readme_text()); print('wrote README.md')
