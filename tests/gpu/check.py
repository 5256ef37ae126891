"""The checks of a GPU machine (numpy, CuPy, numba and torch installed), in one run of at
most about 6 minutes: `python tests/gpu/check.py [--skip translate,step]`.

    op table   every row of helpers/op_table.py on CuPy against numpy, float32 and float64:
               values, gradients of Σ f ⊙ w, Hessian-vector products (helpers/device_checks.py)
    kernels    cupy_kernels.py against numpy_kernels.py: the optimizers' updates (the ops'
               kernels run in the op table's softmax, layer norm and cross-entropy rows)
    translate  python -m demos.translate --device cuda (the default run): its held-out exact
               match and its time
    step       the w3 training step (D 512, 6 + 6 blocks, vocab 8000, B 16, T 64, float32) and
               an inference forward, ours on CuPy against the PyTorch twin on the same GPU:
               the gradients' agreement and the ratio of the times (medians)

Each check prints its lines and one verdict ("PASS" or "FAIL ..."); the exit status is 1 if
any failed. The parts that need no GPU (the op table's comparison, the kernels' comparison)
take the device as an argument, so tests/test_gpu_check.py runs them on the CuPy double.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
for folder in (ROOT, ROOT / "tests", ROOT / "tests" / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import autograd_lite as ag  # noqa: E402
from autograd_lite import kernels  # noqa: E402
from autograd_lite.core import devices  # noqa: E402

TOLERANCE = {np.float64: 1e-8, np.float32: 2e-3}  # the GPU's exp, log and sums round otherwise
KERNEL_TOLERANCE = 1e-5  # float32 updates: the relative error of the worst entry
TRANSLATE_TARGET_SECONDS = 60
TRANSLATE_TARGET_MATCH = 99.9  # the README's spread of fresh runs: 99.9 - 100.0%
STEP_TARGET_RATIO = 2.0


# ---------------------------------------------------------------- op table

def op_table_failures(device, dtypes=(np.float32, np.float64)):
    """[(row name, dtype, error line)] of the op table on `device` against numpy."""
    from helpers.device_checks import compare_case
    from helpers.op_table import CASES
    from test_devices import HOST_CONSTANT_ROWS
    failures = []
    for dtype in dtypes:
        for case in CASES:
            if case.name in HOST_CONSTANT_ROWS:
                continue
            try:
                compare_case(case, device, dtype, np.random.default_rng(0), TOLERANCE[dtype])
            except Exception as error:  # noqa: BLE001  (every row is reported)
                failures.append((case.name, np.dtype(dtype).name,
                                 f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"))
    return failures


# ---------------------------------------------------------------- update kernels

def update_kernel_errors(device, kernels_module, n=10_001, seed=0):
    """{update: relative error} of kernels_module's adam_update (Adam and AdamW) and
    sgd_update (Nesterov momentum, weight decay) on `device`'s arrays against numpy_kernels'
    on the host: one float32 step from random p, g, m, v."""
    rng = np.random.default_rng(seed)
    host = {name: rng.standard_normal(n).astype(np.float32) for name in ("p", "g", "m")}
    host["v"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
    errors = {}
    for name, update in UPDATES.items():
        want = update(kernels.numpy_kernels, {k: a.copy() for k, a in host.items()}, np)
        got = update(kernels_module, {k: device.to_device(a) for k, a in host.items()},
                     device.module)
        errors[name] = max(float(np.max(np.abs(device.to_host(x) - y)) / np.max(np.abs(y)))
                           for x, y in zip(got, want))
    return errors


def _adam(kernels_module, a, xp, decoupled):
    out = [xp.empty_like(a["p"]) for _ in range(3)]
    kernels_module.adam_update(a["p"], a["g"], a["m"], a["v"], *out, 1e-3, 0.9, 0.999, 1e-8,
                               0.01 if decoupled else 0.0, decoupled, 3)
    return out


def _sgd(kernels_module, a, xp):
    out = [xp.empty_like(a["p"]), xp.empty_like(a["m"])]
    kernels_module.sgd_update(a["p"], a["g"], a["m"], *out, 0.1, 0.9, True, 1e-4)
    return out


UPDATES = {"adam": lambda k, a, xp: _adam(k, a, xp, False),
           "adamw": lambda k, a, xp: _adam(k, a, xp, True), "sgd": _sgd}


def device_kernels(device):
    """The kernels the ops use on `device`'s arrays: its backend's, or numpy's written ones
    for a device without kernels (the double)."""
    return kernels.numpy_kernels if device.kernels is None else kernels.of(device.kernels)


# ---------------------------------------------------------------- translate --device cuda

def translate_run(out):
    """(exact match line, seconds) of `python -m demos.translate --device cuda --out out`."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "demos.translate", "--device", "cuda", "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"translate failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1], seconds


# ---------------------------------------------------------------- w3 step against PyTorch

def w3_step_figures(torch, repeats=10):
    """Ours on CuPy and the PyTorch twin on the same GPU, from the same weights and batch: the
    loss and worst gradient errors, and the median seconds of a step and of an inference."""
    import cupy
    import twins
    import workloads
    from models import torch_bridge, transformer
    rng = np.random.default_rng(0)  # the draws of workloads.build("w3")
    vocab, length, batch = 8000, 64, 16
    p = transformer.init(rng, vocab, vocab, d_model=512, n_heads=8, d_ff=2048, n_encoder=6,
                         n_decoder=6, max_len=length + 1, dropout=0.0)
    src = workloads.padded_source(rng, vocab, batch, length)
    tgt = rng.integers(1, vocab, (batch, length + 1))
    params = ag.to_device(p, "cuda")
    src_d, tgt_in, tgt_out = ag.to_device((src, tgt[:, :-1], tgt[:, 1:]), "cuda")

    def loss(q):
        return ag.cross_entropy(transformer.apply(q, src_d, tgt_in, src_pad=0), tgt_out)

    cuda = torch.device("cuda")
    table = twins.positions(torch, length + 1, 512, length + 1, torch.float32)
    twins._POSITION_TABLES[(length + 1, 512, torch.float32)] = table.to(cuda)
    logits = lambda w: twins.transformer_logits(  # noqa: E731
        torch, w, src=torch.from_numpy(src).to(cuda),
        tgt=torch.from_numpy(np.ascontiguousarray(tgt[:, :-1])).to(cuda), src_pad=0,
        n_heads=8, n_encoder=6, n_decoder=6, max_len=length + 1)
    twin = twins.Twin(torch, {k: v.to(cuda) for k, v in torch_bridge.to_torch(p).items()},
                      logits, tgt[:, 1:])
    twin.labels = twin.labels.to(cuda)

    value, grads = ag.value_and_gradient(loss, params)
    for t in twin.weights.values():
        t.grad = None
    their_loss = twin.loss()
    their_loss.backward()
    ours = {k: v.numpy() for k, v in torch_bridge.to_torch(ag.to_device(grads, "cpu")).items()}
    errors = twins.gradient_errors(ours, {k: t.grad.cpu().numpy()
                                          for k, t in twin.weights.items()})
    worst = max(errors, key=errors.get)

    optimizer = ag.optim.adam(1e-4)
    state = optimizer.init(params)

    def our_step():
        nonlocal params, state
        _, g = ag.value_and_gradient(loss, params)
        params, state = optimizer.update(params, g, state, in_place=True)
        cupy.cuda.Device().synchronize()

    def their_step():
        twin.step()
        torch.cuda.synchronize()

    def our_inference():
        transformer.apply(params, src_d, tgt_in, src_pad=0)
        cupy.cuda.Device().synchronize()

    def their_inference():
        twin.infer()
        torch.cuda.synchronize()

    return {"loss": float(value), "their_loss": float(their_loss),
            "worst_gradient": (worst, errors[worst]),
            "step": (_median_seconds(our_step, repeats), _median_seconds(their_step, repeats)),
            "inference": (_median_seconds(our_inference, repeats),
                          _median_seconds(their_inference, repeats))}


def _median_seconds(fn, repeats):
    fn()  # warm-up: compiles CuPy's kernels, fills the memory pools
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


# ---------------------------------------------------------------- the run

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", default="", help="comma-separated checks to leave out: "
                                                   "optable, kernels, translate, step")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("runs/gpu-check"),
                        help="translate's run folder (runs/gpu-check)")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    try:
        import cupy
    except ImportError as error:
        sys.exit(f"check.py: CuPy does not import ({error}): these are the checks of a GPU "
                 f"machine; install the `gpu` extra there (pip install -e \".[gpu]\"; for CUDA "
                 f"13, cupy-cuda13x)")
    print(f"CuPy {cupy.__version__}, {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
          f", numpy {np.__version__}")
    device = devices.device("cuda")
    verdicts = {}
    checks = {"optable": lambda: check_op_table(device),
              "kernels": lambda: check_kernels(device),
              "translate": lambda: check_translate(args.out),
              "step": check_step}
    for name, check in checks.items():
        if name in skip:
            continue
        start = time.perf_counter()
        try:
            verdicts[name] = check()
        except Exception:  # noqa: BLE001  (a check that crashes is a failed check)
            traceback.print_exc()
            verdicts[name] = "FAIL (crashed)"
        print(f"{name}: {verdicts[name]} ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0 if all(v == "PASS" for v in verdicts.values()) else 1


def check_op_table(device):
    failures = op_table_failures(device)
    for name, dtype, line in failures[:40]:
        print(f"  {name} [{dtype}]: {line}")
    return "PASS" if not failures else f"FAIL ({len(failures)} rows)"


def check_kernels(device):
    errors = update_kernel_errors(device, device_kernels(device))
    for name, error in errors.items():
        print(f"  {name}: relative error {error:.1e}")
    return "PASS" if max(errors.values()) < KERNEL_TOLERANCE else "FAIL"


def check_translate(out):
    line, seconds = translate_run(out)
    print(f"  {line}; {seconds:.0f} s (target <= {TRANSLATE_TARGET_SECONDS} s)")
    match = float(re.search(r"exact match: ([\d.]+)%", line).group(1))
    return ("PASS" if match >= TRANSLATE_TARGET_MATCH else
            f"FAIL (exact match below {TRANSLATE_TARGET_MATCH}%, the README's spread)")


def check_step():
    import torch
    figures = w3_step_figures(torch)
    (ours, theirs), (our_inf, their_inf) = figures["step"], figures["inference"]
    worst, error = figures["worst_gradient"]
    print(f"  loss {figures['loss']:.6f} (PyTorch {figures['their_loss']:.6f}); worst "
          f"gradient {worst}: {error:.1e} norm-wise")
    print(f"  w3 step: ours {1000 * ours:.1f} ms, PyTorch {1000 * theirs:.1f} ms, ratio "
          f"{ours / theirs:.2f} (target <= {STEP_TARGET_RATIO})")
    print(f"  w3 inference: ours {1000 * our_inf:.1f} ms, PyTorch {1000 * their_inf:.1f} ms, "
          f"ratio {our_inf / their_inf:.2f}")
    return "PASS" if error < 1e-3 else "FAIL (gradients disagree)"


if __name__ == "__main__":
    sys.exit(main())
