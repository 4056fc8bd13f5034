"""`jacap-nb gpu-check --dry-run` on the CPU: the kernels through Triton's interpreter (set per process, so the command
runs in its own), every check's line printed, nothing reported as passed, the numbers written as JSON."""
import json, os, subprocess, sys
import pytest


def test_gpu_check_dry_run_under_the_interpreter(tmp_path):
    pytest.importorskip('triton')
    out = tmp_path / 'g.json'
    env = dict(os.environ, TRITON_INTERPRET='1', OMP_NUM_THREADS='1')
    p = subprocess.run([sys.executable, '-c', 'import sys; from jacap_nb.cli import main; sys.exit(main(sys.argv[1:]))',
                        'gpu-check', '--dry-run', '--out', str(out)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [l for l in p.stdout.splitlines() if l[:4] in ('DRY ', 'SKIP', 'PASS', 'MISS')]
    heads = [l.split(':')[0][6:] for l in lines]
    assert heads == ['kernels, jacap capacity score (fused)', 'bandwidth, jacap capacity score (fused)',
                     'kernels, jacap co-occurrence (default, 16 pivots)', 'bandwidth, jacap co-occurrence (default, 16 pivots)',
                     'kernels, jacap (paper preset)',
                     'bandwidth, jacap (paper preset)', 'kernels, capkv', 'bandwidth, capkv', 'pivot kernel', 'prefill share',
                     'same tokens'], p.stdout
    assert not any(l.startswith('PASS') for l in lines)
    res = json.loads(out.read_text())
    assert res['dry_run'] and set(res['kernels']) == {'jacap capacity score (fused)', 'jacap co-occurrence (default, 16 pivots)',
                                                      'jacap (paper preset)', 'capkv'}
    assert all(r['correlation'] > 0.999 for r in res['kernels'].values())        # the kernels score what torch scores
    assert res['pivot_fallbacks'] == {}                                           # the interpreter ran every pivot step
    assert res['kept_tokens']['min'] == 1.0 and res['prefill']['n_tokens'] == 256


def test_gpu_check_refuses_without_cuda():
    import torch
    if torch.cuda.is_available(): pytest.skip('this machine has CUDA')
    from jacap_nb.gpu_check import gpu_check
    with pytest.raises(SystemExit, match='needs a CUDA device'): gpu_check()
