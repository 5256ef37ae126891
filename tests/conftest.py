"""Shared fixtures. `torch` is the independent reference for many tests: with
AUTOGRAD_LITE_REQUIRE_TORCH=1 (set by .ci/run) its absence is a failure, not a skip; the
same for `browser` (headless Chromium) with AUTOGRAD_LITE_REQUIRE_BROWSER=1."""
import os

import numpy as np
import pytest

import autograd_lite as ag


@pytest.fixture(scope="session")
def torch():
    try:
        import torch as torch_module
    except ImportError:
        if os.environ.get("AUTOGRAD_LITE_REQUIRE_TORCH") == "1":
            pytest.fail("torch is required (AUTOGRAD_LITE_REQUIRE_TORCH=1) but not installed")
        pytest.skip("torch is not installed")
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
    call it as `ag.dropout` (autograd_lite's attribute), so this patch sees every call."""
    sites, real = [], ag.dropout

    def recording(x, rate, rng):
        sites.append((np.shape(x), float(rate)))
        return real(x, rate, rng)
    monkeypatch.setattr(ag, "dropout", recording)
    return sites


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (Debian's, through selenium) for every browser test of the run.
    Skips where there is none, unless AUTOGRAD_LITE_REQUIRE_BROWSER=1 (set by .ci/run)."""
    from demos import browser as chromium
    missing = None
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing = "selenium is not installed"
    if missing is None and chromium.chromium_paths() is None:
        missing = "no chromium and chromedriver on PATH"
    if missing:
        if os.environ.get("AUTOGRAD_LITE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"a browser is required (AUTOGRAD_LITE_REQUIRE_BROWSER=1): {missing}")
        pytest.skip(missing)
    driver = chromium.headless_chromium()
    yield driver
    driver.quit()
