"""The checks of a GPU machine (numpy, CuPy, numba and torch installed), in one run of at
most about 6 minutes: `python tests/gpu/check.py [--skip translate,step]`.

    op table   every row of helpers/op_table.py on CuPy against numpy, float32 and float64:
               values, gradients of Σ f ⊙ w, Hessian-vector products (helpers/device_checks.py)
    kernels    cupy_kernels.py against numpy_kernels.py: the optimizers' updates (the ops'
               kernels run in the op table's softmax, layer norm and cross-entropy rows)
    translate  python -m demos.translate --device cuda (the default run): its held-out exact
               match and its time
    step       the w3 training step (D 512, 6 + 6 blocks, vocab 8000, B 16, T 64, float32) and
               the lm step (the character LM, B 16, T 64), each with an inference forward,
               ours on CuPy against the PyTorch twin on the same GPU: the gradients'
               agreement and the ratio of the times (medians)

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
STEP_TARGET_RATIO = 2.0  # w3
LM_STEP_TARGET_RATIO = 3.0
# float32 gradients, norm-wise: workloads.PARITY_TOLERANCES' (a relu input within rounding of
# zero can fall on the other side in one library: w3's twin on the CPU differs by 1.5e-3)
GRADIENT_TOLERANCE = 1e-2


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


# ---------------------------------------------------------------- steps against PyTorch

def w3_step_figures(torch, repeats=10, twin_device="cuda"):
    """The w3 step (workloads.py's draws): ours on CuPy, the PyTorch twin on the same GPU."""
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

    on = torch.device(twin_device)
    _positions_on_gpu(torch, twins, length + 1, 512, twin_device)
    logits = lambda w: twins.transformer_logits(  # noqa: E731
        torch, w, src=torch.from_numpy(src).to(on),
        tgt=torch.from_numpy(np.ascontiguousarray(tgt[:, :-1])).to(on), src_pad=0,
        n_heads=8, n_encoder=6, n_decoder=6, max_len=length + 1)
    return step_figures(
        torch, params,
        loss=lambda q: ag.cross_entropy(transformer.apply(q, src_d, tgt_in, src_pad=0),
                                        tgt_out),
        forward=lambda q: transformer.apply(q, src_d, tgt_in, src_pad=0),
        twin=_twin_on_gpu(torch, twins, torch_bridge.to_torch(p), logits, tgt[:, 1:],
                          twin_device),
        to_torch=torch_bridge.to_torch, repeats=repeats)


def lm_step_figures(torch, repeats=10, twin_device="cuda"):
    """The lm step (workloads.py's character LM, B 16, 64 tokens): ours on CuPy, the PyTorch
    twin on the same GPU (on `twin_device`: "cpu" in the test on the CuPy double)."""
    import twins
    from models import lm, torch_bridge
    rng = np.random.default_rng(0)  # the draws of workloads.build("lm")
    p = lm.init(rng, 65, 64, 4, 256, 2, 64)
    ids = rng.integers(0, 65, (16, 65))
    params = ag.to_device(p, "cuda")
    x_d, y_d = ag.to_device((ids[:, :-1], ids[:, 1:]), "cuda")

    _positions_on_gpu(torch, twins, 64, 64, twin_device)
    x_t = torch.from_numpy(np.ascontiguousarray(ids[:, :-1])).to(torch.device(twin_device))
    logits = lambda w: twins.lm_logits(torch, w, ids=x_t, n_heads=4, n_layers=2,  # noqa: E731
                                       max_len=64)
    return step_figures(
        torch, params, loss=lambda q: ag.cross_entropy(lm.apply(q, x_d), y_d),
        forward=lambda q: lm.apply(q, x_d),
        twin=_twin_on_gpu(torch, twins, torch_bridge.lm_to_torch(p), logits, ids[:, 1:],
                          twin_device),
        to_torch=torch_bridge.lm_to_torch, repeats=repeats)


def _positions_on_gpu(torch, twins, max_len, d_model, device="cuda"):
    """Puts the twins' float32 position table for (max_len, d_model) on the GPU."""
    table = twins.positions(torch, max_len, d_model, max_len, torch.float32)
    twins._POSITION_TABLES[(max_len, d_model, torch.float32)] = table.to(torch.device(device))


def _twin_on_gpu(torch, twins, state, logits, labels, device="cuda"):
    on = torch.device(device)
    twin = twins.Twin(torch, {k: v.to(on) for k, v in state.items()}, logits, labels)
    twin.labels = twin.labels.to(on)
    return twin


def step_figures(torch, params, loss, forward, twin, to_torch, repeats):
    """Ours (params on CuPy, loss(params) and forward(params) over the batch) against the
    twin on the same GPU, from the same weights: the losses, the worst gradient error
    (norm-wise), and the median seconds of a training step (gradient and Adam) and of an
    inference forward, each side's."""
    import cupy
    import twins
    value, grads = ag.value_and_gradient(loss, params, argnums=0)
    for t in twin.weights.values():
        t.grad = None
    their_loss = twin.loss()
    their_loss.backward()
    ours = {k: v.numpy() for k, v in to_torch(ag.to_device(grads, "cpu")).items()}
    errors = twins.gradient_errors(ours, {k: t.grad.cpu().numpy()
                                          for k, t in twin.weights.items()})
    worst = max(errors, key=errors.get)

    optimizer = ag.optim.adam(1e-4)
    state = optimizer.init(params)

    def our_step():
        nonlocal params, state
        _, g = ag.value_and_gradient(loss, params, argnums=0)
        params, state = optimizer.update(params, g, state, in_place=True)
        cupy.cuda.Device().synchronize()

    def their_synchronize():
        if twin.labels.is_cuda:
            torch.cuda.synchronize()

    def their_step():
        twin.step()
        their_synchronize()

    def our_inference():
        forward(params)
        cupy.cuda.Device().synchronize()

    def their_inference():
        twin.infer()
        their_synchronize()

    return {"loss": float(value), "their_loss": their_loss.item(),
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
    verdict = "PASS"
    for name, figures_of, target in (("w3", w3_step_figures, STEP_TARGET_RATIO),
                                     ("lm", lm_step_figures, LM_STEP_TARGET_RATIO)):
        figures = figures_of(torch)
        (ours, theirs), (our_inf, their_inf) = figures["step"], figures["inference"]
        worst, error = figures["worst_gradient"]
        print(f"  {name} loss {figures['loss']:.6f} (PyTorch {figures['their_loss']:.6f}); "
              f"worst gradient {worst}: {error:.1e} norm-wise")
        print(f"  {name} step: ours {1000 * ours:.1f} ms, PyTorch {1000 * theirs:.1f} ms, "
              f"ratio {ours / theirs:.2f} (target <= {target})")
        print(f"  {name} inference: ours {1000 * our_inf:.1f} ms, PyTorch "
              f"{1000 * their_inf:.1f} ms, ratio {our_inf / their_inf:.2f}")
        if error >= GRADIENT_TOLERANCE:
            verdict = f"FAIL ({name}'s gradients disagree)"
    return verdict


if __name__ == "__main__":
    sys.exit(main())
