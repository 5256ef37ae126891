"""Shared fixtures. The optional parts skip the tests that need them where they are missing,
with the reason, and fail them instead where AUTOGRAD_LITE_REQUIRE_<PART>=1 (set by .ci/run):
`torch`, the independent reference of many tests (REQUIRE_TORCH); `browser`, headless
Chromium (REQUIRE_BROWSER); `dot`, Graphviz's program that draws the pictures (REQUIRE_DOT);
`numba`, the `fast` extra's compiler (REQUIRE_NUMBA); `installed_version`, the package's
metadata from `pip install -e .` (REQUIRE_INSTALL); `transformers`, Hugging Face's GPT-2, the
reference of tests/test_gpt2.py (REQUIRE_TRANSFORMERS, its own fixture there)."""
import importlib.util
import os
import signal
from importlib import metadata

import numpy as np
import pytest

import autograd_lite as ag


def missing(part, reason):
    """Skip the test for want of an optional part, or fail it where the environment requires
    the part (AUTOGRAD_LITE_REQUIRE_<part>=1)."""
    variable = f"AUTOGRAD_LITE_REQUIRE_{part}"
    if os.environ.get(variable) == "1":
        pytest.fail(f"{reason}, and {variable}=1 requires it")
    pytest.skip(reason)


# A shell that starts pytest as a background job starts it with SIGINT ignored, and the children
# it spawns inherit that. The Ctrl-C tests send real SIGINTs to this process and to the demos'
# processes, so they need Python's own handler (KeyboardInterrupt) wherever pytest is started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def torch():
    try:
        import torch as torch_module
    except ImportError:
        missing("TORCH", "torch is not installed")
    torch_module.set_num_threads(1)
    return torch_module


@pytest.fixture
def fast_rules_on():
    """For the tests of the fast rules themselves: rules on, whatever AUTOGRAD_LITE_FAST_RULES
    says for the run (.ci/run runs the model tests with it 0 too)."""
    with ag.fast_rules(True):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def dropout_sites(monkeypatch):
    """(shape, rate) of every ag.dropout call, recorded around the real dropout. The models
    call it as `ag.dropout` (autograd_lite's attribute), so this patch sees every call of
    their plain functions, which run with the fast rules off here (a rule draws the same
    masks itself: tests/test_fast_rules_models.py)."""
    sites, real = [], ag.dropout

    def recording(x, rate, rng):
        sites.append((np.shape(x), float(rate)))
        return real(x, rate, rng)
    monkeypatch.setattr(ag, "dropout", recording)
    with ag.fast_rules(False):
        yield sites


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (Debian's, through selenium) for every browser test of the run.
    Skips where there is none, unless AUTOGRAD_LITE_REQUIRE_BROWSER=1 (set by .ci/run)."""
    from demos.support import browser as chromium
    absent = None
    try:
        import selenium  # noqa: F401
    except ImportError:
        absent = "selenium is not installed"
    if absent is None and chromium.chromium_paths() is None:
        absent = "no chromium and chromedriver on PATH"
    if absent:
        missing("BROWSER", absent)
    driver = chromium.headless_chromium()
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def dot():
    """The path of Graphviz's `dot`, for the tests that draw pictures or lay out explorers.
    Skips where it is not on PATH, unless AUTOGRAD_LITE_REQUIRE_DOT=1 (set by .ci/run)."""
    path = ag.viz.dot.dot_executable()
    if path is None:
        missing("DOT", "Graphviz's dot is not on PATH")
    return path


@pytest.fixture(scope="session")
def numba():
    """For the tests of numba's kernels being there: skips where numba is not installed,
    unless AUTOGRAD_LITE_REQUIRE_NUMBA=1 (set by .ci/run). Imports nothing."""
    if importlib.util.find_spec("numba") is None:
        missing("NUMBA", "numba is not installed (the `fast` extra)")


@pytest.fixture(scope="session")
def installed_version():
    """The version pip installed autograd-lite as (its metadata). Skips in a source tree that
    was never installed, unless AUTOGRAD_LITE_REQUIRE_INSTALL=1 (set by .ci/run)."""
    try:
        return metadata.version("autograd-lite")
    except metadata.PackageNotFoundError:
        missing("INSTALL", "autograd-lite is not installed (pip install -e .): no package "
                           "metadata")


@pytest.fixture
def device_double():
    """The CuPy double (helpers/device_double.py) registered as device "cuda", through the
    hook CuPy's device is registered by; the previous "cuda" put back afterwards. -> its
    module (what ag.array_module gives for its arrays)."""
    from autograd_lite.core import devices
    from helpers.device_double import DEVICE
    previous = devices.register_device(DEVICE)
    try:
        yield DEVICE.module
    finally:
        devices.unregister_device("cuda", previous)
