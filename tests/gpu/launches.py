"""How many CUDA kernels one training step launches on the GPU, and how long the step takes. A
script for the GPU machine (CuPy, and a CUDA build of torch for the count):

    python tests/gpu/launches.py [--workload w2] [--warmup 3] [--repeats 10] [--top 15]

The step is workloads.py's (forward, cross-entropy, backward, Adam in place), with our
parameters and batch on the GPU (`workloads.build(key, device="cuda")`). After --warmup steps
(CuPy compiles its kernels and fills its memory pool), the step's time is the median of
--repeats steps, each ended by synchronizing CuPy's stream. Then one more step runs under
torch.profiler with the CUDA activity: CUPTI records every kernel the process launches,
CuPy's and cuBLAS's included, and the device's copies and fills ("Memcpy ...", "Memset ...")
apart. Printed: the kernels launched most, then one line

    w2 training step on <GPU>: N kernel launches, T ms

or, where torch cannot count them, "not counted: <why>" in place of the count. Launches are
what replaying a recorded step (a CUDA graph) would remove.
"""
import argparse
import collections
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
for folder in (ROOT, ROOT / "tests" / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

TRANSFER_PREFIXES = ("Memcpy", "Memset")  # CUPTI's names of the device's copies and fills
KERNEL_ACTIVITY = "kernel"  # FunctionEvent.activity_type of a kernel, where torch has it


class NotCounted(Exception):
    """The kernels cannot be counted here; the message says why."""


def device_work(events, cuda):
    """(kernels, transfers): collections.Counter of launches by name, over the profiler's
    events that ran on the device (`device_type == cuda`, torch.autograd.DeviceType.CUDA).
    Copies and fills (named "Memcpy ..." and "Memset ...") are transfers, not kernels; a
    device event whose activity_type (torch 2.12 on) is neither a kernel nor a transfer (a
    range annotated on the GPU's timeline) is neither."""
    kernels, transfers = collections.Counter(), collections.Counter()
    for event in events:
        if event.device_type != cuda:
            continue
        if event.name.startswith(TRANSFER_PREFIXES):
            transfers[event.name] += 1
        elif getattr(event, "activity_type", None) in (None, KERNEL_ACTIVITY):
            kernels[event.name] += 1
    return kernels, transfers


def profiled_work(step, sync, torch):
    """device_work of one call of step() (then sync()) under torch.profiler's CUDA activity.
    Raises NotCounted where torch has no CUDA profiler, where the profiler fails (CUPTI
    refused, say), or where it saw no kernel."""
    activity = getattr(torch.profiler.ProfilerActivity, "CUDA", None)
    if activity is None or activity not in torch.profiler.supported_activities():
        raise NotCounted(f"torch {torch.__version__} has no CUDA profiler here (its CUDA: "
                         f"{torch.version.cuda}, available: {torch.cuda.is_available()})")
    sync()
    try:
        with torch.profiler.profile(activities=[activity]) as profiler:
            step()
            sync()
        events = profiler.events()
    except Exception as error:  # noqa: BLE001  (the step ran before: the profiler failed)
        first_line = (str(error).splitlines() or [""])[0][:200]
        raise NotCounted(f"torch.profiler failed: {type(error).__name__}: {first_line}") from None
    kernels, transfers = device_work(events, torch.autograd.DeviceType.CUDA)
    if not kernels:
        raise NotCounted("the profiler recorded no kernel of the step (CUPTI did not see "
                         "CuPy's launches)")
    return kernels, transfers


def median_ms(step, sync, repeats):
    """The median milliseconds of `repeats` calls of step(), each followed by sync()."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def kernel_table(kernels, transfers, top):
    """Lines: the `top` kernels by launches, then the transfers by name."""
    lines = [f"  {'kernel':64s} {'launches':>8s}"]
    lines += [f"  {name[:64]:64s} {n:8d}" for name, n in kernels.most_common(top)]
    if len(kernels) > top:
        rest = sum(kernels.values()) - sum(n for _, n in kernels.most_common(top))
        lines.append(f"  {f'({len(kernels) - top} more kernels)':64s} {rest:8d}")
    lines += [f"  {name[:64]:64s} {n:8d}" for name, n in sorted(transfers.items())]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="w2", help="workloads.py's key (w2)")
    parser.add_argument("--warmup", type=int, default=3, help="steps before any is measured")
    parser.add_argument("--repeats", type=int, default=10, help="steps timed (their median)")
    parser.add_argument("--top", type=int, default=15, help="kernels listed")
    args = parser.parse_args(argv)
    try:
        import cupy
    except ImportError as error:
        sys.exit(f"launches.py: CuPy does not import ({error}): this is a GPU machine's "
                 f"script; install the `gpu` extra there")
    import workloads
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    step = workloads.OurStep(workloads.build(args.workload, device="cuda"))
    sync = cupy.cuda.get_current_stream().synchronize
    for _ in range(args.warmup):
        step.step()
    sync()
    ms = median_ms(step.step, sync, args.repeats)
    try:
        import torch
        kernels, transfers = profiled_work(step.step, sync, torch)
    except ImportError as error:
        count = f"not counted: torch does not import ({error})"
    except NotCounted as error:
        count = f"not counted: {error}"
    else:
        print(kernel_table(kernels, transfers, args.top))
        print(f"  {len(kernels)} kernels, {sum(kernels.values())} launches; "
              f"{sum(transfers.values())} copies and fills; the time: median of {args.repeats}")
        count = f"{sum(kernels.values())} kernel launches"
    print(f"{args.workload} training step on {gpu}: {count}, {ms:.1f} ms")


if __name__ == "__main__":
    main()
