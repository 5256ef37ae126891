"""autograd_lite.memory (ag.memory): importing the library leaves malloc alone;
keep_freed_memory() (or its GLIBC_TUNABLES equivalent) makes freed blocks reused instead of
returned to the system.

Each case runs in a fresh interpreter: the setting is process-wide and cannot be undone."""
import functools
import os
import pathlib
import subprocess
import sys

import pytest

import autograd_lite as ag

ROOT = pathlib.Path(__file__).resolve().parents[1]  # so that `-c` scripts import this checkout

on_glibc_linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                    reason="mallopt and GLIBC_TUNABLES are glibc's (CI runs on Linux)")

# How the process is set up before its probe runs: glibc's defaults after importing the
# library, the explicit call, or the environment variable without the call.
SETUPS = {
    "import": ("", {}),
    "call": ("assert ag.memory.keep_freed_memory() is True\n", {}),
    "tunables": ("", {"GLIBC_TUNABLES": ag.memory.GLIBC_TUNABLES}),
}

# glibc's own accounting (mallinfo2): is a 16 MiB block served by mmap, and is its memory
# kept in the heap once freed? glibc's defaults: mmap, and given back.
MALLINFO = """
import ctypes
class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena ordblks smblks hblks hblkhd "
                "usmblks fsmblks uordblks fordblks keepcost").split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2
before = libc.mallinfo2()
block = np.ones(2 * 2**20)  # 16 MiB
during = libc.mallinfo2()
del block
after = libc.mallinfo2()
mapped = during.hblkhd - before.hblkhd >= 16 * 2**20
kept = after.fordblks >= 16 * 2**20  # free bytes the heap holds
print(mapped, kept)
"""

PAGE_FAULTS = """
import resource
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
x = np.random.default_rng(0).standard_normal((300, 1000)).astype(np.float32)
(g,) = ag.gradient(lambda x: ag.sum(ag.softmax(ag.tanh(x) @ x.T, axis=-1) ** 2), x)
print(g.dtype, g.tobytes().hex()[:4000], float(g.sum()))
"""


def run(setup, probe):
    """The probe's output in a fresh interpreter set up as SETUPS[setup], with no malloc
    tuning inherited from this process's environment."""
    code, variables = SETUPS[setup]
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "LD_PRELOAD") and not k.startswith("MALLOC_")}
    env.update(variables)
    script = "import numpy as np\nimport autograd_lite as ag\n" + code + probe
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


@functools.lru_cache(maxsize=None)
def probes(setup):
    """{probe: output} of the three probes, run in that order in one process per setup. The
    page-fault and gradient probes free blocks of at most 2 MiB, so glibc's dynamic
    threshold stays below the 16 MiB block that the mallinfo probe allocates last."""
    lines = run(setup, PAGE_FAULTS + GRADIENT_BYTES + MALLINFO).splitlines()
    return dict(zip(["page faults", "gradient bytes", "mallinfo"], lines, strict=True))


@on_glibc_linux
def test_importing_the_library_changes_no_malloc_setting():
    """After `import autograd_lite` a large block is still mmapped and given back when freed
    (glibc's defaults); the explicit call, and its GLIBC_TUNABLES equivalent, keep it."""
    assert probes("import")["mallinfo"] == "True False"
    assert probes("call")["mallinfo"] == "False True"
    assert probes("tunables")["mallinfo"] == "False True"


@on_glibc_linux
def test_the_call_changes_the_setting_in_a_process_that_imported_the_library_first():
    """Before and after the call in one process: a 24 MiB block (above what glibc's dynamic
    threshold learns from freeing the first, 16 MiB one) is mmapped before, not after."""
    probe = MALLINFO.replace("print(mapped, kept)", "print(mapped)")
    second = probe.replace("2 * 2**20", "3 * 2**20").replace("16 * 2**20", "24 * 2**20")
    script = probe + "assert ag.memory.keep_freed_memory() is True\n" + second
    assert run("import", script).split() == ["True", "False"]


@on_glibc_linux
def test_keeping_freed_memory_removes_the_page_faults_of_large_temporaries():
    released = int(probes("import")["page faults"])
    # each gradient makes several 2 MiB temporaries = 512 pages each when freshly mapped
    assert released > 20 * 512
    for setup in ("call", "tunables"):
        assert int(probes(setup)["page faults"]) < released / 20, setup


@on_glibc_linux
def test_the_setting_changes_no_result():
    """Same bits with and without it, on arrays large enough to go through mmap without it."""
    on, off = probes("call")["gradient bytes"], probes("import")["gradient bytes"]
    assert on == off and "float32" in on


def test_the_environment_string_names_the_two_thresholds_of_the_call():
    assert ag.memory.GLIBC_TUNABLES == ("glibc.malloc.mmap_threshold=33554432:"
                                        "glibc.malloc.trim_threshold=268435456")
    assert 33554432 == 32 * 2**20 and 268435456 == 256 * 2**20
