"""Where a training step's time goes, op by op: the "before" profile for optimizing. A script:

    python3 tests/benchmarks/profile_step.py [--threads 2] [--only w1,w2] [--steps 5] [--cprofile]
        [--torch-profile] [--inference] [--split-from N]

For each workload of workloads.py:

1. The step in parts, without any hook (medians over --steps steps): our forward + backward
   (ag.value_and_gradient) and Adam, against the PyTorch twin's forward, backward and
   Adam step.
2. Time by op, from a timer on the engine's recording hook (`Trace(on_op=...)`, core/tracer.py):
   each op's forward time is the interval since the previous op was recorded (its body, the
   engine's wrapper, and the model code between the two; the first op's also holds the
   boxing of the parameters); its pullback, and the lazy
   cotangents the pullback returns, are timed in the backward pass. Ops are grouped by name
   and the ranks of their array operands ("matmul 4·4": a batched product of per-head
   arrays; "add 3·1": a bias; "add 3·3": a residual). The backward pass minus its pullbacks
   is the engine's walk and the gradient trees.
3. The engine's cost per op (forward and backward of a chain of tiny ops, less the bare numpy
   op), times the step's op count: the share of tracing in the step.
4. With --cprofile, the functions with the most time of their own (numpy calls included)
   over the steps, from cProfile.
5. With --torch-profile, the PyTorch twin's step by op, from torch.profiler (each aten op's
   time of its own, forward and backward together, per step): the other side of 2.

With --inference, the inference forward instead: ours on plain arrays against the twin's
under torch.no_grad() (medians), ours by op (the forward intervals of hooked steps: the same
fused bodies and kernels as a plain forward, plus the loss's op), and, with --torch-profile,
the twin's inference forward by aten op.

Hooked and cProfiled steps run a little slower than plain ones; the plain times of part 1
are the step, and the percentages are of it.
"""
import argparse
import collections
import contextlib
import cProfile
import io
import pathlib
import pstats
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402  (standard library only: numpy is not loaded yet)

THREADS = timing.pin_threads(timing.threads_from_argv())
import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
import autograd_lite.core.differentiate as differentiate  # noqa: E402
from autograd_lite.core.tracer import Box, Trace  # noqa: E402

import workloads  # noqa: E402


class OpStats:
    __slots__ = ("count", "forward", "backward")

    def __init__(self):
        self.count, self.forward, self.backward = 0, 0.0, 0.0


def op_key(op_name, values):
    """The op's name and the ranks of its array operands: "matmul 4·4", "add 3·1"."""
    ranks = [str(v.ndim) for v in values if isinstance(v, np.ndarray)]
    return f"{op_name} {'·'.join(ranks)}" if ranks else op_name


class OpTimer:
    """The recording hook: times each op's forward interval and wraps its pullback in a
    timer. Totals by op_key over every step profiled; `forward` and `backward` total the two
    passes (the backward starts at the first pullback)."""

    def __init__(self):
        self.ops = collections.defaultdict(OpStats)
        self.last = 0.0  # when the previous op was recorded, or the trace opened
        self.forward = self.backward = 0.0
        self.opened = self.backward_start = None

    def trace_opened(self):
        self.opened = self.last = time.perf_counter()
        self.backward_start = None

    def gradient_returned(self):
        end = time.perf_counter()
        self.forward += self.backward_start - self.opened
        self.backward += end - self.backward_start

    def on_op(self, op, args, kwargs, box):
        now = time.perf_counter()
        values = [a.value if type(a) is Box and a.trace is box.trace else a for a in args]
        stats = self.ops[op_key(op.op_name, values)]
        stats.count += 1
        stats.forward += now - self.last
        box.node.pullback = self.timed(stats, box.node.pullback)
        self.last = time.perf_counter()

    def timed(self, stats, pullback):
        def timed_pullback(g):
            start = time.perf_counter()
            if self.backward_start is None:
                self.backward_start = start
            grads = pullback(g)
            if type(grads) is tuple:
                grads = tuple(self.timed_lazy(stats, c) if callable(c) else c for c in grads)
            stats.backward += time.perf_counter() - start
            return grads
        return timed_pullback

    def timed_lazy(self, stats, cotangent):
        def timed_cotangent():
            start = time.perf_counter()
            value = cotangent()
            stats.backward += time.perf_counter() - start
            return value
        return timed_cotangent


@contextlib.contextmanager
def hooked_traces(timer):
    """Every trace that ag.value_and_gradient opens inside the block carries timer.on_op.
    The seam: core/differentiate.py opens its traces as `Trace(caller=...)`; the name is swapped
    for one that adds the hook, and put back after."""
    if differentiate.Trace is not Trace:
        raise RuntimeError("profile_step: autograd_lite.core.differentiate no longer opens its "
                           "traces through tracer.Trace; update hooked_traces")

    def hooked_trace(*args, **kwargs):
        timer.trace_opened()
        return Trace(*args, on_op=timer.on_op, **kwargs)
    differentiate.Trace = hooked_trace
    try:
        yield timer
    finally:
        differentiate.Trace = Trace


# ---- the step in parts --------------------------------------------------------------------

def median_ms(samples):
    return 1e3 * statistics.median(samples)


def our_parts(workload, steps):
    """{part: median ms} of our step: forward + backward, and Adam (in place, as the timed
    step and torch.optim update)."""
    step = workloads.OurStep(workload)
    step.step()  # warm-up
    gradient, adam = [], []
    for _ in range(steps):
        start = time.perf_counter()
        _, grads = ag.value_and_gradient(step.loss, step.params, argnums=0)
        middle = time.perf_counter()
        step.params, step.state = step.optimizer.update(step.params, grads, step.state,
                                                        in_place=True)  # as OurStep.step
        gradient.append(middle - start)
        adam.append(time.perf_counter() - middle)
    return {"forward + backward": median_ms(gradient), "Adam": median_ms(adam),
            "step": median_ms([a + b for a, b in zip(gradient, adam)])}


def twin_parts(twin, steps):
    """{part: median ms} of the PyTorch twin's step: forward (with the loss), backward, Adam."""
    twin.step()  # warm-up: Adam's state
    parts = collections.defaultdict(list)
    for _ in range(steps):
        twin.optimizer.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss = twin.loss()
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        twin.optimizer.step()
        end = time.perf_counter()
        parts["forward"].append(forward - start)
        parts["backward"].append(backward - forward)
        parts["forward + backward"].append(backward - start)
        parts["Adam"].append(end - backward)
        parts["step"].append(end - start)
    return {part: median_ms(samples) for part, samples in parts.items()}


def profiled_ops(workload, steps):
    """An OpTimer over `steps` hooked steps (gradient and Adam)."""
    step = workloads.OurStep(workload)
    step.step()
    timer = OpTimer()
    with hooked_traces(timer):
        for _ in range(steps):
            _, grads = ag.value_and_gradient(step.loss, step.params, argnums=0)
            timer.gradient_returned()
            step.params, step.state = step.optimizer.update(step.params, grads, step.state,
                                                        in_place=True)  # as OurStep.step
    return timer


def cprofile_table(workload, steps, top=20):
    """cProfile's functions with the most time of their own over `steps` steps, as text."""
    step = workloads.OurStep(workload)
    step.step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        step.step()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def inference_parts(workload, twin, steps):
    """(ours, PyTorch's): median ms of an inference forward, ours on plain arrays and the
    twin's under torch.no_grad()."""
    ours = lambda: workload.forward(workload.params)  # noqa: E731
    times = []
    for run in (ours, twin.infer):
        run()  # warm-up
        times.append(median_ms([timing.seconds_of(run) for _ in range(steps)]))
    return tuple(times)


def torch_profile_table(run, torch, steps, top):
    """torch.profiler's aten ops of run() (the twin's step or inference forward; each op's time
    of its own, per call), as text."""
    run()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            run()
    events = sorted(profiler.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total_us = sum(e.self_cpu_time_total for e in events)
    lines = [f"  {'aten op':48s} {'count':>5s} {'ms':>8s} {'%':>6s}"]
    for e in events[:top]:
        lines.append(f"  {e.key[:48]:48s} {e.count // steps:5d} "
                     f"{e.self_cpu_time_total / 1e3 / steps:8.2f} "
                     f"{100 * e.self_cpu_time_total / total_us:5.1f}%")
    lines.append(f"  {'(all ops, as profiled)':48s} {'':5s} {total_us / 1e3 / steps:8.2f}")
    return "\n".join(lines)


# ---- the report -----------------------------------------------------------------------------

def by_name(ops):
    """OpStats merged over the operand ranks: {op name: OpStats}."""
    merged = collections.defaultdict(OpStats)
    for key, s in ops.items():
        m = merged[key.split(" ")[0]]
        m.count += s.count
        m.forward += s.forward
        m.backward += s.backward
    return merged


def op_table(ops, steps, step_ms, top):
    """Ranked lines: per step, count, forward ms, backward ms, total, % of the step."""
    ranked = sorted(ops.items(), key=lambda kv: -(kv[1].forward + kv[1].backward))
    lines = [f"  {'op':22s} {'count':>5s} {'forward':>8s} {'backward':>9s} {'total ms':>9s} "
             f"{'% step':>7s}"]
    for key, s in ranked[:top]:
        total = 1e3 * (s.forward + s.backward) / steps
        lines.append(f"  {key:22s} {s.count // steps:5d} {1e3 * s.forward / steps:8.2f} "
                     f"{1e3 * s.backward / steps:9.2f} {total:9.2f} {100 * total / step_ms:6.1f}%")
    if len(ranked) > top:
        rest = 1e3 * sum(s.forward + s.backward for _, s in ranked[top:]) / steps
        lines.append(f"  {f'({len(ranked) - top} more)':22s} {'':5s} {'':8s} {'':9s} "
                     f"{rest:9.2f} {100 * rest / step_ms:6.1f}%")
    return "\n".join(lines)


def engine_us_per_op(n=300, repeats=15):
    """Microseconds the engine adds to an op, forward and backward: a chain of n tiny
    multiplications differentiated, less the same chain in bare numpy, divided by n."""
    x = np.ones((4, 4), np.float32)

    def chain(x):
        for _ in range(n):
            x = x * 1.0
        return x

    traced = statistics.median(timing.seconds_of(lambda: ag.gradient(lambda x: ag.sum(chain(x)),
                                                                      x)) for _ in range(repeats))
    bare = statistics.median(timing.seconds_of(lambda: chain(x)) for _ in range(repeats))
    return 1e6 * (traced - bare) / n


def report(key, steps, args, torch):
    workload = workloads.build(key)
    ours = our_parts(workload, steps)
    theirs = twin_parts(workload.twin(torch, workload.params), steps)
    timer = profiled_ops(workload, steps)
    n_ops = sum(s.count for s in timer.ops.values()) // steps
    pullbacks = 1e3 * sum(s.backward for s in timer.ops.values()) / steps
    forward, backward = 1e3 * timer.forward / steps, 1e3 * timer.backward / steps
    engine = n_ops * engine_us_per_op() / 1e3
    print(f"\n{key}: {workload.title}; {n_ops} primitives a step")
    print(f"  {'plain steps, median ms':30s} {'ours':>8s} {'PyTorch':>8s}")
    for part in ("forward + backward", "Adam", "step"):
        print(f"  {part:30s} {ours[part]:8.2f} {theirs[part]:8.2f}")
    print(f"  (PyTorch's forward {theirs['forward']:.2f}, backward {theirs['backward']:.2f})")
    print(f"  hooked steps, ms a step: forward {forward:.2f}; backward {backward:.2f}, of which "
          f"pullbacks {pullbacks:.2f}, the walk and the gradient trees {backward - pullbacks:.2f}")
    print(f"  the engine's cost per op (tiny chain) times {n_ops} ops: {engine:.2f} ms, "
          f"{100 * engine / ours['step']:.0f}% of the step; the rest is the rules' numpy work, "
          f"Adam and the model's own code")
    print(f"  by op and operand ranks (% of the plain step, {ours['step']:.2f} ms):")
    print(op_table(timer.ops, steps, ours["step"], args.top))
    print("  by op:")
    print(op_table(by_name(timer.ops), steps, ours["step"], args.top))
    if args.cprofile:
        print(cprofile_table(workload, steps))
    if args.torch_profile:
        print("  PyTorch's step by aten op (torch.profiler; time of its own per step):")
        print(torch_profile_table(workload.twin(torch, workload.params).step, torch, steps,
                                  args.top))


def forward_table(ops, steps, forward_ms, top):
    """Ranked lines of the forward pass: per forward, count, ms, % of the plain forward."""
    ranked = sorted(ops.items(), key=lambda kv: -kv[1].forward)
    lines = [f"  {'op':22s} {'count':>5s} {'ms':>8s} {'% forward':>10s}"]
    for key, s in ranked[:top]:
        ms = 1e3 * s.forward / steps
        lines.append(f"  {key:22s} {s.count // steps:5d} {ms:8.2f} {100 * ms / forward_ms:9.1f}%")
    return "\n".join(lines)


CORE = "attention core (products and softmax)"


@contextlib.contextmanager
def timed_kernels():
    """Inside the block, every kernel the fused ops call (kernels.NAMES) and the attention
    core (sublayers._attend: two batched products and the softmax kernel) add their seconds
    and calls to the {name: [seconds, calls]} yielded; a kernel called inside the core counts
    under "<name> (in the core)"."""
    from autograd_lite import kernels
    from models.fast import sublayers
    kernels.backend()  # choose, so that the names exist
    totals = collections.defaultdict(lambda: [0.0, 0])
    originals = {name: getattr(kernels, name) for name in kernels.NAMES}
    original_core = sublayers._attend
    in_core = [False]

    def timed(name, kernel):
        def timed_kernel(*args, **kwargs):
            key = f"{name} (in the core)" if in_core[0] else name
            in_core[0] = in_core[0] or name == CORE
            start = time.perf_counter()
            try:
                return kernel(*args, **kwargs)
            finally:
                totals[key][0] += time.perf_counter() - start
                totals[key][1] += 1
                in_core[0] = in_core[0] and name != CORE
        return timed_kernel
    for name, kernel in originals.items():
        setattr(kernels, name, timed(name, kernel))
    sublayers._attend = timed(CORE, original_core)
    try:
        yield totals
    finally:
        for name, kernel in originals.items():
            setattr(kernels, name, kernel)
        sublayers._attend = original_core


def kernel_table(workload, steps, forward_ms):
    """Lines: the kernels inside plain forwards, ms and calls per forward, % of the forward;
    what is left is BLAS's products outside the attention core, and the Python around them."""
    with timed_kernels() as totals:
        for _ in range(steps):
            workload.forward(workload.params)
    lines = [f"  {'kernel':40s} {'calls':>5s} {'ms':>8s} {'% forward':>10s}"]
    outside = 0.0
    for name, (seconds, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        ms = 1e3 * seconds / steps
        outside += 0 if name.endswith("(in the core)") else ms
        lines.append(f"  {name:40s} {calls // steps:5d} {ms:8.2f} {100 * ms / forward_ms:9.1f}%")
    rest = forward_ms - outside
    lines.append(f"  {'(the rest: products, Python)':40s} {'':5s} {rest:8.2f} "
                 f"{100 * rest / forward_ms:9.1f}%")
    return "\n".join(lines)


def report_inference(key, steps, args, torch):
    workload = workloads.build(key)
    twin = workload.twin(torch, workload.params)
    ours, theirs = inference_parts(workload, twin, steps)
    timer = profiled_ops(workload, steps)
    print(f"\n{key}: {workload.title}; inference")
    print(f"  plain forward, median ms: ours {ours:.2f}, PyTorch {theirs:.2f} "
          f"(ours / PyTorch {ours / theirs:.2f})")
    print(f"  ours by op (forward intervals of hooked steps; cross_entropy is the loss's, not "
          f"inference's; % of the plain forward, {ours:.2f} ms):")
    print(forward_table(timer.ops, steps, ours, args.top))
    print("  by op:")
    print(forward_table(by_name(timer.ops), steps, ours, args.top))
    print("  inside them, by kernel (plain forwards):")
    print(kernel_table(workload, steps, ours))
    if args.torch_profile:
        print("  PyTorch's inference forward by aten op (torch.profiler; time of its own per "
              "forward):")
        print(torch_profile_table(twin.infer, torch, steps, args.top))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for each library")
    parser.add_argument("--only", default=",".join(workloads.BUILDERS))
    parser.add_argument("--steps", type=int, default=5, help="steps measured, per part")
    parser.add_argument("--top", type=int, default=14, help="rows of each op table")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--torch-profile", action="store_true",
                        help="also the twin's step by aten op, from torch.profiler")
    parser.add_argument("--inference", action="store_true",
                        help="profile the inference forward instead of the training step")
    timing.add_split_option(parser)
    args = parser.parse_args()
    timing.split_setting(args.split_from)
    ag.memory.keep_freed_memory()
    import torch
    timing.torch_threads(torch, THREADS)
    print(timing.describe_environment(timing.environment(torch)))
    for key in args.only.split(","):
        (report_inference if args.inference else report)(key, args.steps, args, torch)
    print(f"\nload average at the end: {timing.load_average():.2f}")


if __name__ == "__main__":
    main()
