"""autograd_lite.memory: freed blocks are reused instead of returned to the system."""
import os
import subprocess
import sys

import numpy as np

import autograd_lite as ag

SCRIPT = """
import resource, numpy as np, autograd_lite as ag
x = np.ones((256, 1024))  # 2 MiB: above glibc's default mmap threshold
f = lambda x: ag.sum(ag.tanh(x * 2.0) * x)
for _ in range(3):
    ag.gradient(f, x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    ag.gradient(f, x)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults_of_20_gradients(keep):
    env = {**os.environ, "AUTOGRAD_LITE_KEEP_FREED_MEMORY": keep}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


def test_keeping_freed_memory_removes_the_page_faults_of_large_temporaries():
    assert sys.platform.startswith("linux")
    kept, released = page_faults_of_20_gradients("1"), page_faults_of_20_gradients("0")
    # each gradient makes several 2 MiB temporaries = 512 pages each when freshly mapped
    assert released > 20 * 512
    assert kept < released / 20


def test_the_setting_changes_no_result():
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    (g,) = ag.gradient(lambda x: ag.sum(ag.tanh(x) ** 2), x)
    np.testing.assert_allclose(g, 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-12)
    assert ag.memory.keep_freed_memory() is True
