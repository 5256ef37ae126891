"""tests/gpu/launches.py, the count of a step's CUDA kernels, in the parts that need no GPU:
the count over a profiler's events (kernels by name; copies and fills apart; host events
and GPU-side annotations left out), the profiling of a step on a fake torch, the reasons it
gives where nothing can be counted, and its one line where CuPy is missing."""
import contextlib
import sys
import types
from collections import Counter

import pytest

from helpers.scripts import load_script

CPU, CUDA = "DeviceType.CPU", "DeviceType.CUDA"  # stand-ins for torch.autograd.DeviceType


@pytest.fixture(scope="module")
def launches():
    return load_script("gpu/launches.py", "gpu_launches")


class Event:
    """A FunctionEvent's fields that the count reads (torch before 2.12 has no activity_type)."""

    def __init__(self, name, device_type, activity_type=None):
        self.name, self.device_type = name, device_type
        if activity_type is not None:
            self.activity_type = activity_type


def step_events():
    """A step's events as torch.profiler lists them: three launches of one CuPy kernel, one
    of another, a cuBLAS product, a copy and a fill, with the host's driver calls, a host op
    and a range annotated on the GPU's timeline."""
    return [Event("cuLaunchKernel", CPU, "cuda_driver"),
            Event("cupy_multiply__float32_float32_float32", CUDA),
            Event("cuLaunchKernel", CPU, "cuda_driver"),
            Event("cupy_multiply__float32_float32_float32", CUDA, "kernel"),
            Event("sm90_xmma_gemm_f32f32_tf32f32_f32_nn", CUDA, "kernel"),
            Event("Memcpy HtoD (Pageable -> Device)", CUDA, "gpu_memcpy"),
            Event("cupy_multiply__float32_float32_float32", CUDA, "kernel"),
            Event("Memset (Device)", CUDA),
            Event("aten::empty", CPU, "cpu_op"),
            Event("step", CUDA, "gpu_user_annotation"),
            Event("cupy_sum", CUDA, "kernel")]


def test_the_count_takes_the_devices_kernels_by_name_and_its_transfers_apart(launches):
    kernels, transfers = launches.device_work(step_events(), CUDA)
    assert kernels == Counter({"cupy_multiply__float32_float32_float32": 3, "cupy_sum": 1,
                               "sm90_xmma_gemm_f32f32_tf32f32_f32_nn": 1})
    assert transfers == Counter({"Memcpy HtoD (Pageable -> Device)": 1, "Memset (Device)": 1})
    table = launches.kernel_table(kernels, transfers, top=1).splitlines()
    assert table[1].split() == ["cupy_multiply__float32_float32_float32", "3"]
    assert table[2].split() == ["(2", "more", "kernels)", "2"]
    assert [line.split()[-1] for line in table[3:]] == ["1", "1"]


class FakeProfiler:
    """torch.profiler as the count calls it: `profile(activities=...)` records `events` and
    notes which calls of the step ran inside it; `supported` are the activities it offers."""

    def __init__(self, supported, events, calls, error=None):
        self.ProfilerActivity = types.SimpleNamespace(CPU="cpu", CUDA="cuda")
        self.supported, self.events, self.calls = supported, events, calls
        self.error = error  # raised when profiling starts, where given

    def supported_activities(self):
        return set(self.supported)

    @contextlib.contextmanager
    def profile(self, activities):
        assert activities == ["cuda"]
        if self.error is not None:
            raise self.error
        self.calls.append("start")
        yield types.SimpleNamespace(events=lambda: self.events)
        self.calls.append("stop")


def fake_torch(supported, events, calls, error=None):
    return types.SimpleNamespace(
        __version__="2.11.0+cpu", version=types.SimpleNamespace(cuda=None),
        cuda=types.SimpleNamespace(is_available=lambda: False),
        autograd=types.SimpleNamespace(DeviceType=types.SimpleNamespace(CUDA=CUDA)),
        profiler=FakeProfiler(supported, events, calls, error))


def test_one_step_and_its_synchronization_are_profiled(launches):
    calls = []
    torch = fake_torch(("cpu", "cuda"), step_events(), calls)
    kernels, transfers = launches.profiled_work(lambda: calls.append("step"),
                                                lambda: calls.append("sync"), torch)
    assert calls == ["sync", "start", "step", "sync", "stop"]
    assert sum(kernels.values()) == 5 and sum(transfers.values()) == 2


def test_without_a_cuda_profiler_or_any_kernel_it_says_why_it_did_not_count(launches):
    calls = []
    with pytest.raises(launches.NotCounted, match=r"^torch 2\.11\.0\+cpu has no CUDA profiler "
                                                  r"here \(its CUDA: None, available: False\)$"):
        launches.profiled_work(lambda: None, lambda: None, fake_torch(("cpu",), [], calls))
    assert calls == []
    only_host = [e for e in step_events() if e.device_type == CPU]
    with pytest.raises(launches.NotCounted, match="recorded no kernel of the step"):
        launches.profiled_work(lambda: None, lambda: None,
                               fake_torch(("cpu", "cuda"), only_host, calls))
    refused = RuntimeError("CUPTI_ERROR_NOT_INITIALIZED\nmore lines")
    with pytest.raises(launches.NotCounted, match=r"^torch.profiler failed: RuntimeError: "
                                                  r"CUPTI_ERROR_NOT_INITIALIZED$"):
        launches.profiled_work(lambda: None, lambda: None,
                               fake_torch(("cpu", "cuda"), step_events(), calls, refused))


def test_without_cupy_the_script_ends_in_one_line_saying_so(launches, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # as where it is missing
    with pytest.raises(SystemExit) as stop:
        launches.main([])
    assert stop.value.code.startswith("launches.py: CuPy does not import (")
    assert "\n" not in stop.value.code
