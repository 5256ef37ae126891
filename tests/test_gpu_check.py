"""tests/gpu/check.py, the GPU machine's checks, in the parts that need no GPU: it imports
without CuPy, and its comparisons (the op table on a device against numpy, the update
kernels on a device against numpy's) run on the CuPy double and find nothing wrong; a
kernel that computes something else is found."""
import numpy as np
import pytest

from autograd_lite import kernels
from autograd_lite.core import devices
from helpers.scripts import load_script


@pytest.fixture(scope="module")
def check():
    return load_script("gpu/check.py", "gpu_check")


def test_the_op_table_comparison_passes_on_the_double(check, device_double):
    assert check.op_table_failures(devices.device("cuda"), dtypes=(np.float32,)) == []


def test_the_update_kernels_comparison_passes_on_the_double_and_finds_a_wrong_kernel(
        check, device_double):
    device = devices.device("cuda")
    errors = check.update_kernel_errors(device, check.device_kernels(device))
    assert set(errors) == {"adam", "adamw", "sgd"} and max(errors.values()) == 0.0

    class WrongAdam:  # the numpy kernels, with Adam's bias correction of step 1, not 3
        sgd_update = staticmethod(kernels.numpy_kernels.sgd_update)

        @staticmethod
        def adam_update(*args):
            return kernels.numpy_kernels.adam_update(*args[:-1], 1)
    errors = check.update_kernel_errors(device, WrongAdam)
    assert errors["sgd"] == 0.0
    assert min(errors["adam"], errors["adamw"]) > check.KERNEL_TOLERANCE


def test_without_cupy_the_check_ends_in_one_line_saying_what_to_install(check, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # as where it is missing
    with pytest.raises(SystemExit) as stop:
        check.main(["--skip", "translate,step"])
    assert stop.value.code.startswith("check.py: CuPy does not import (")
    assert stop.value.code.endswith("install the `gpu` extra there (pip install -e \".[gpu]\"; "
                                    "for CUDA 13, cupy-cuda13x)") and "\n" not in stop.value.code


def test_the_lm_step_comparison_agrees_with_the_twin_on_the_double(check, device_double, torch,
                                                                   monkeypatch):
    """The lm step's figures, with ours on the double and the twin on the CPU: the losses
    and gradients agree, and each side's times are measured."""
    import types
    synchronize = types.SimpleNamespace(synchronize=lambda: None)
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda: synchronize))
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy)
    figures = check.lm_step_figures(torch, repeats=1, twin_device="cpu")
    assert abs(figures["loss"] - figures["their_loss"]) < 1e-5 * figures["their_loss"]
    assert figures["worst_gradient"][1] < 1e-3
    assert all(seconds > 0 for pair in (figures["step"], figures["inference"])
               for seconds in pair)
