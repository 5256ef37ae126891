"""autograd_lite.memory: freed blocks are reused instead of returned to the system."""
import os
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag

on_glibc_linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                    reason="mallopt is glibc's (CI runs on Linux)")

PAGE_FAULTS = """
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

GRADIENT_BYTES = """
import numpy as np, autograd_lite as ag
x = np.random.default_rng(0).standard_normal((300, 1000)).astype(np.float32)
(g,) = ag.gradient(lambda x: ag.sum(ag.softmax(ag.tanh(x) @ x.T, axis=-1) ** 2), x)
print(g.dtype, g.tobytes().hex()[:4000], float(g.sum()))
"""


def run(script, keep):
    """Run `script` in a fresh interpreter with the setting on ("1") or off ("0"), and with
    no malloc tuning inherited from this process's environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "LD_PRELOAD") and not k.startswith("MALLOC_")}
    env["AUTOGRAD_LITE_KEEP_FREED_MEMORY"] = keep
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


@on_glibc_linux
def test_keeping_freed_memory_removes_the_page_faults_of_large_temporaries():
    kept, released = int(run(PAGE_FAULTS, "1")), int(run(PAGE_FAULTS, "0"))
    # each gradient makes several 2 MiB temporaries = 512 pages each when freshly mapped
    assert released > 20 * 512
    assert kept < released / 20


def test_the_setting_changes_no_result():
    """Same bits with and without it, on arrays large enough to go through mmap without it."""
    on, off = run(GRADIENT_BYTES, "1"), run(GRADIENT_BYTES, "0")
    assert on == off and "float32" in on


@on_glibc_linux
def test_glibc_accepts_the_setting():
    assert ag.memory.keep_freed_memory() is True


def test_the_variable_turns_it_off(monkeypatch):
    calls = []
    monkeypatch.setattr(ag.memory, "keep_freed_memory", lambda: calls.append(1))
    monkeypatch.setenv("AUTOGRAD_LITE_KEEP_FREED_MEMORY", "0")
    ag.memory.apply_default()
    assert calls == []
    monkeypatch.setenv("AUTOGRAD_LITE_KEEP_FREED_MEMORY", "1")
    ag.memory.apply_default()
    assert calls == [1]
