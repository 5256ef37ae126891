"""The kernels (autograd_lite/kernels): choosing the backend, the compiled kernels against the
numpy ones through the ops (values and gradients, float32 and float64, masks and rows that
need the shift, non-contiguous inputs), numba's thread pool never started, the row kernels
in shares giving their serial bits at 1 to 8 threads, and the compile cache falling back
where no folder is writable. (Each fused op's kernels against its
composed reference, to second order, are in test_op_table.py.)"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite import kernels
from helpers.references import central_jacobian, compare_with_torch
from helpers.threads import THREAD_COUNTS, pool_runs, split_at

# The kernels run inside the ops' fast rules: on, whatever AUTOGRAD_LITE_FAST_RULES says.
pytestmark = pytest.mark.usefixtures("fast_rules_on")

numba = pytest.importorskip("numba")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def backends():
    """Calls f() with the numba kernels, then the numpy kernels; restores the choice."""
    before = kernels.backend()

    def run(f):
        results = []
        for name in ("numba", "numpy"):
            kernels.select(name)
            results.append(f())
        return results
    yield run
    kernels.select(before)


def run_python(script, **environment):
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **environment})


@pytest.mark.parametrize("setting, expected", [("numpy", "numpy"), ("", "numba"),
                                                ("NumPy", "numpy"), ("numba", "numba")])
def test_the_environment_variable_chooses_the_backend(setting, expected):
    out = run_python("import autograd_lite as ag; print(ag.kernels.backend())",
                     AUTOGRAD_LITE_KERNELS=setting)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


def test_an_unknown_backend_is_a_clear_error():
    out = run_python("import autograd_lite as ag; ag.kernels.backend()",
                     AUTOGRAD_LITE_KERNELS="cuda")
    assert out.returncode != 0
    assert "AUTOGRAD_LITE_KERNELS='cuda': expected one of ('numba', 'numpy')" in out.stderr
    with pytest.raises(ValueError, match="kernels.select: 'torch'"):
        kernels.select("torch")


def scores(rng, shape, dtype, spread=3.0):
    return (spread * rng.standard_normal(shape)).astype(dtype)


def value_and_gradients(f, *args):
    """f's value and its gradients in every float argument, with random weights on the output."""
    weights = np.random.default_rng(7).standard_normal(np.shape(f(*args))).astype(args[0].dtype)
    return ag.value_and_gradient(lambda *a: ag.sum(f(*a) * weights), *args)


def assert_same_results(got, want, dtype):
    tolerance = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for a, b in zip(ag.tree_leaves(got), ag.tree_leaves(want)):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(a, b, **tolerance)


CAUSAL = np.tril(np.ones((6, 6), dtype=bool))
PADDING = np.array([True] * 4 + [False] * 2).reshape(1, 1, 1, 6)
PER_HEAD = np.random.default_rng(3).random((2, 3, 1, 6)) < 0.6  # broadcast along the queries
PER_HEAD[1, 2] = False  # a head whose rows have nothing kept
PER_BATCH = np.random.default_rng(4).random((2, 1, 6, 6)) < 0.6  # broadcast along the heads
SOFTMAXES = {  # name: (scores shape, mask, axis, scale of the scores)
    "rows": ((5, 7), None, -1, 3.0),
    "causal": ((2, 3, 6, 6), CAUSAL, -1, 3.0),
    "padding": ((2, 3, 6, 6), PADDING, -1, 3.0),
    "a mask per batch and head": ((2, 3, 6, 6), PER_HEAD, -1, 3.0),
    "a mask per batch and query": ((2, 3, 6, 6), PER_BATCH, -1, 30.0),
    "fully masked rows": ((3, 6), np.array([[True] * 6, [False] * 6, [True, False] * 3]), -1, 3.0),
    "beyond the no-shift bound": ((4, 6), CAUSAL[:4], -1, 300.0),
    "axis 0": ((6, 4), None, 0, 3.0),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", SOFTMAXES)
def test_softmax_kernels_agree(case, dtype, rng, backends):
    shape, mask, axis, spread = SOFTMAXES[case]
    x = scores(rng, shape, dtype, spread)
    numba_result, numpy_result = backends(
        lambda: value_and_gradients(lambda x: ag.softmax(x, axis, mask), x))
    assert_same_results(numba_result, numpy_result, dtype)


def test_softmax_rows_with_nan_or_inf_are_nan_in_both(backends):
    x = np.array([[0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, 1.0]], np.float32)
    mask = np.array([[True, True, True], [True, True, True], [True, True, False]])
    numba_y, numpy_y = backends(lambda: ag.softmax(x, mask=mask))
    np.testing.assert_array_equal(np.isnan(numba_y), np.isnan(numpy_y))
    assert np.isnan(numba_y).all(axis=1).tolist() == [True, True, True]


def test_masked_inf_and_nan_change_nothing_in_either_backend(backends):
    """exp32 turns a masked inf into inf · 0 = NaN: the row is redone shifted, not NaN."""
    x = np.array([[1.0, np.inf, 2.0, np.nan], [0.5, -1.0, np.inf, 3.0]], np.float32)
    mask = np.array([[True, False, True, False], [True, True, False, True]])
    kept = np.where(mask, x, -np.inf).astype(np.float64)
    want = np.exp(kept - kept.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    for y in backends(lambda: ag.softmax(x, mask=mask)):
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=0)
        assert (y[~mask] == 0).all()


def float32_samples(step=997):
    """Every step-th float32 bit pattern (all signs, exponents, subnormals, infs and NaNs)."""
    return np.arange(0, 2**32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)


def test_exp32_is_within_3_ulp_of_numpys_exp_over_the_float32_range():
    from autograd_lite.kernels.numba_exp import exp_float32
    x = float32_samples()
    got = exp_float32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    numbers = ~np.isnan(want)
    ulps = np.abs(got[numbers].view(np.int32).astype(np.int64)
                  - want[numbers].view(np.int32).astype(np.int64))
    assert ulps.max() <= 3
    special = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 88.72283, 88.7229, -87.4, -103.0,
                        -104.5, 1e-45], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        assert exp_float32(special).tolist()[:2] == [0.0, np.inf]
        np.testing.assert_allclose(exp_float32(special)[3:], np.exp(special)[3:], rtol=4e-7,
                                   atol=0)
    assert np.isnan(exp_float32(special)[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 16), (2, 5, 33), (3, 1)])
def test_layer_norm_kernels_agree(shape, dtype, rng, backends):
    x = (rng.standard_normal(shape) * 4 + 2).astype(dtype)
    scale, bias = (rng.standard_normal(shape[-1]).astype(dtype) for _ in range(2))
    x_transposed = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, 0, -1)), 0, -1)  # strided
    for operand in (x, x_transposed):
        numba_result, numpy_result = backends(
            lambda: value_and_gradients(ag.layer_norm, operand, scale, bias))
        assert_same_results(numba_result, numpy_result, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 16), (2, 5, 33), (3, 1)])
def test_the_residual_layer_norm_kernel_is_the_layer_norm_of_the_sum(shape, dtype, rng, backends):
    """Each backend's residual_layer_norm_forward(x, y) against its layer_norm_forward(x + y):
    the same bits (the sum rounded as numpy's), saved values included; and the two backends
    agree."""
    x, y = ((rng.standard_normal(shape) * 4 + 2).astype(dtype) for _ in range(2))
    scale, bias = (rng.standard_normal(shape[-1]).astype(dtype) for _ in range(2))
    y_transposed = np.swapaxes(np.ascontiguousarray(np.swapaxes(y, 0, -1)), 0, -1)  # strided

    def both():
        return [(kernels.residual_layer_norm_forward(x, other, scale, bias, 1e-5),
                 kernels.layer_norm_forward(x + other, scale, bias, 1e-5))
                for other in (y, y_transposed)]
    for results in backends(both):
        for (out, saved), (want_out, want_saved) in results:
            assert out.dtype == dtype and out.shape == shape
            for got, want in zip(ag.tree_leaves((out, saved)), ag.tree_leaves((want_out,
                                                                               want_saved))):
                np.testing.assert_array_equal(got, want)
    numba_result, numpy_result = backends(lambda: both()[0][0][0])
    assert_same_results(numba_result, numpy_result, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ignore_index, smoothing", [(None, 0.0), (2, 0.1), (None, 0.3)])
def test_cross_entropy_kernels_agree(ignore_index, smoothing, dtype, rng, backends):
    logits = scores(rng, (4, 6, 11), dtype)
    labels = rng.integers(0, 11, (4, 6))
    numba_result, numpy_result = backends(lambda: value_and_gradients(
        lambda x: ag.cross_entropy(x, labels, ignore_index, smoothing), logits))
    assert_same_results(numba_result, numpy_result, dtype)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("make", [lambda: ag.optim.adam(1e-2, weight_decay=0.1),
                                  lambda: ag.optim.adamw(1e-2),
                                  lambda: ag.optim.sgd(0.1, momentum=0.9, nesterov=True),
                                  lambda: ag.optim.sgd(0.1, weight_decay=0.01)])
def test_optimizer_kernels_give_the_same_bits(make, in_place, rng, backends):
    """numba's update loops (a separate one for in_place: numba_updates.py) round as numpy's."""
    params = {"w": rng.standard_normal((50, 30)).astype(np.float32),
              "b": rng.standard_normal(30), "scalar": 0.5}
    grads = ag.tree_map(lambda p: np.asarray(rng.standard_normal(np.shape(p)),
                                             np.asarray(p).dtype), params)

    def three_steps():
        optimizer = make()
        p = ag.tree_map(np.copy, params)  # in_place writes into them
        state = optimizer.init(p)
        for _ in range(3):
            p, state = optimizer.update(p, grads, state, in_place=in_place)
        return p
    numba_params, numpy_params = backends(three_steps)
    for a, b in zip(ag.tree_leaves(numba_params), ag.tree_leaves(numpy_params)):
        np.testing.assert_array_equal(a, b)


def test_the_compiled_kernels_start_no_numba_thread_pool():
    """numba's parallel runtime is never used (kernels/__init__.py: its pool starves
    OpenBLAS's threads on 2 cores): after a training step of every fused op in a fresh
    process, it was never started."""
    out = run_python(
        "import os, numpy as np, autograd_lite as ag\n"
        "import numba.np.ufunc.parallel as parallel\n"
        "ag.kernels.select('numba')\n"
        "x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)\n"
        "s, b, labels = np.ones(32, np.float32), np.zeros(32, np.float32), np.arange(64) % 32\n"
        "loss = lambda x: ag.cross_entropy(ag.softmax(ag.layer_norm(x, s, b)) * x, labels)\n"
        "g, = ag.gradient(loss, x)\n"
        "adam = ag.optim.adam(1e-3); p = {'x': x}\n"
        "p, _ = adam.update(p, {'x': g}, adam.init(p))\n"
        "print(ag.kernels.backend(), parallel._is_initialized)\n",
        AUTOGRAD_LITE_KERNELS="numba")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numba", "False"]


def test_a_kernel_compiles_without_a_writable_cache_folder():
    """A function numba can find no cache folder for (here: source without a file, as in a
    read-only install with no user cache) is compiled in memory instead."""
    from autograd_lite.kernels.numba_compile import compiled
    namespace = {}
    exec("def twice(x):\n    return 2 * x\n", namespace)  # a file named "<string>"
    with pytest.raises(RuntimeError, match="cannot cache"):
        numba.njit(cache=True)(namespace["twice"])
    twice = compiled()(namespace["twice"])
    assert twice(21) == 42


def test_the_compiling_notice_comes_once_and_counts_what_this_process_compiled(tmp_path):
    """notify_compiling's line comes at the first kernel this process compiles, and
    compiled_summary counts exactly the kernels it compiled: a layer norm forward compiles
    one in an empty cache, then a second process loads it from there (no line, no count);
    numpy's kernels: none either."""
    script = ("import numpy as np, autograd_lite as ag\n"
              "ag.kernels.notify_compiling(lambda line: print('notice:', line))\n"
              "x = np.ones((2, 3), np.float32)\n"
              "ag.layer_norm(x, x[0], x[0]); ag.layer_norm(x, x[0], x[0])\n"
              "print(ag.kernels.compiled_summary())\n")
    first = run_python(script, AUTOGRAD_LITE_KERNELS="numba", NUMBA_CACHE_DIR=str(tmp_path),
                       AUTOGRAD_LITE_FAST_RULES="1")  # layer_norm's rule calls the kernel
    assert first.returncode == 0, first.stderr
    notice, summary = first.stdout.splitlines()
    assert notice == ("notice: compiling numba's kernels on their first call, once (about half "
                      "a second each; numba caches them on disk) ...")
    assert re.fullmatch(r"numba compiled 1 of the kernels in [\d.]+ s; later runs load them "
                        r"from its cache", summary), summary
    again = run_python(script, AUTOGRAD_LITE_KERNELS="numba", NUMBA_CACHE_DIR=str(tmp_path),
                       AUTOGRAD_LITE_FAST_RULES="1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["None"]
    numpy = run_python(script, AUTOGRAD_LITE_KERNELS="numpy")
    assert numpy.stdout.splitlines() == ["None"]


def test_ctrl_c_while_a_kernel_compiles_is_raised_once_it_is_compiled(tmp_path):
    """A SIGINT that arrives while numba compiles a kernel (here: sent from numba's own
    compile event) is held until the kernel is ready, then raised as KeyboardInterrupt, and
    never dropped; the kernel then works."""
    script = ("import os, signal, numba.core.event as ev, numpy as np\n"
              "from tests_kernel_module import twice\n"
              "class Ctrl_C(ev.Listener):\n"
              "    def on_start(self, event): os.kill(os.getpid(), signal.SIGINT)\n"
              "    def on_end(self, event): print('compiled')\n"
              "ev.register('numba:compile', Ctrl_C())\n"
              "try:\n"
              "    twice(np.ones(3))\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted')\n"
              "print(twice(np.ones(3)))\n")
    (tmp_path / "tests_kernel_module.py").write_text(
        "from autograd_lite.kernels.numba_compile import compiled\n"
        "@compiled()\ndef twice(x):\n    return 2 * x\n")
    out = run_python(script, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                     PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert out.returncode == 0, out.stderr
    *compiles, interrupted, result = out.stdout.splitlines()  # numba compiles helpers too
    assert compiles and set(compiles) == {"compiled"}
    assert (interrupted, result) == ("interrupted", "[2. 2. 2.]")
    assert "Exception ignored" not in out.stderr


# ---- embedding, dropout and activation kernels ------------------------------------------------

def test_the_numba_module_lists_kernels_of_the_interface():
    from autograd_lite.kernels import numba_kernels
    assert set(numba_kernels.__all__) <= set(kernels.NAMES)
    assert all(callable(getattr(numba_kernels, name)) for name in numba_kernels.__all__)


def rows_in_order(values, ids, n):
    """The embedding adjoint written out: row i added into out[ids[i]] in the order of i,
    each addition rounded in the values' dtype (the first row of an index copied)."""
    flat = ids.reshape(-1)
    rows = values.reshape((flat.size,) + values.shape[ids.ndim:])
    out, seen = np.zeros((n,) + rows.shape[1:], values.dtype), set()
    for row, k in zip(rows, flat):
        out[k] = out[k] + row if k in seen else row
        seen.add(k)
    return out


EMBEDDINGS = {  # name: (table shape, indices)
    "repeated": ((9, 4), np.array([[2, 7, 2, 2], [0, 7, 2, 8]])),
    "long runs": ((5, 3), np.random.default_rng(1).integers(0, 3, (40, 50))),
    "each once": ((6, 2, 3), np.array([5, 1, 0, 3])),
    "vector table": ((7,), np.array([[6, 6, 1], [0, 6, 6]])),
    "int32 scalar index": ((4, 5), np.array(3, np.int32)),
    "empty": ((5, 3), np.zeros((0, 4), np.int64)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", EMBEDDINGS)
def test_gather_and_scatter_add_kernels_agree(case, dtype, rng, backends):
    """Values and gradients through the ops (gather's pullback is scatter_add's kernel and
    the other way round), with the sums checked against rows added in order."""
    shape, ids = EMBEDDINGS[case]
    table = rng.standard_normal(shape).astype(dtype)
    numba_result, numpy_result = backends(lambda: value_and_gradients(
        lambda t: ag.gather(t, ids), table))
    assert_same_results(numba_result, numpy_result, dtype)
    values = rng.standard_normal(ids.shape + shape[1:]).astype(dtype)
    numba_result, numpy_result = backends(lambda: value_and_gradients(
        lambda v: ag.scatter_add(v, ids, shape[0]), values))
    assert_same_results(numba_result, numpy_result, dtype)
    numba_out, numpy_out = backends(lambda: ag.scatter_add(values, ids, shape[0]))
    np.testing.assert_array_equal(numba_out, rows_in_order(values, ids, shape[0]))
    assert_same_results(numba_out, numpy_out, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_add_of_strided_values_sums_them_in_order(dtype, rng, backends):
    """Values that are a transposed view (a cotangent can be one), and -0.0 copied as it is."""
    ids = np.array([3, 0, 3, 3, 1, 0])
    values = np.ascontiguousarray(rng.standard_normal((5, 6)).astype(dtype).T)[:, ::2]
    values = np.swapaxes(np.swapaxes(values, 0, 1).copy(), 0, 1)  # (6, 3), not C-contiguous
    values[4] = -0.0
    assert not values.flags.c_contiguous
    numba_out, numpy_out = backends(lambda: ag.scatter_add(values, ids, 5))
    np.testing.assert_array_equal(numba_out, rows_in_order(values, ids, 5))
    assert np.signbit(numba_out[1]).all() and np.signbit(numpy_out[1]).all()
    assert_same_results(numba_out, numpy_out, dtype)


def test_segment_sum_gives_the_same_bits_every_run(rng):
    from autograd_lite.kernels import numba_kernels
    ids = rng.integers(0, 4, (64, 200))  # runs of thousands
    values = rng.standard_normal((64, 200, 16)).astype(np.float32)
    first = numba_kernels.segment_sum(values, ids, 4)
    np.testing.assert_array_equal(first, numba_kernels.segment_sum(values, ids, 4))
    np.testing.assert_array_equal(first, rows_in_order(values, ids, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rate", [0.1, 0.7, ag.Hyper(0.7), np.float64(0.3)])
@pytest.mark.parametrize("shape", [(33, 17), (2, 3, 4), (0, 3), ()])
def test_dropout_masks_have_the_same_bits_for_one_seed(shape, rate, dtype, backends):
    """The same draws from the generator under both backends, compared with the rate in the
    dtype numpy compares in (float32 for a Python float: 0.7 rounds down there)."""
    x = np.ones(shape, dtype)
    numba_out, numpy_out = backends(lambda: ag.dropout(x, rate, np.random.default_rng(4)))
    assert numba_out.dtype == numpy_out.dtype == dtype
    np.testing.assert_array_equal(numba_out, numpy_out)
    draws = np.random.default_rng(4).random(shape, dtype=np.float32)
    np.testing.assert_array_equal(numba_out != 0, draws >= rate)
    np.testing.assert_array_equal(numba_out[numba_out != 0], dtype(1 / (1 - rate)))


class FixedDraws:
    """A generator whose draws are all `value` (float32): the draws at the rate itself."""

    def __init__(self, value):
        self.value = np.float32(value)

    def random(self, shape, dtype):
        assert dtype == np.float32
        return np.full(shape, self.value, np.float32)


@pytest.mark.parametrize("rate, kept", [(0.7, True), (ag.Hyper(0.7), False),
                                        (np.float64(0.7), False), (np.float32(0.7), True)])
def test_dropout_compares_draws_with_the_rate_in_numpys_dtype(rate, kept, backends):
    """A draw equal to float32(0.7) lies below 0.7: kept where numpy compares in float32 (a
    Python float, weak), dropped where it compares in float64 (a float subclass, float64)."""
    x = np.ones(5, np.float32)
    numba_out, numpy_out = backends(lambda: ag.dropout(x, rate, FixedDraws(0.7)))
    np.testing.assert_array_equal(numba_out, numpy_out)
    assert (numba_out != 0).all() if kept else (numba_out == 0).all()


SPECIALS = [-np.inf, -1e30, -3.0, -1.0, -0.0, 0.0, 1e-30, 0.5, 3.0, 1e30, np.inf, np.nan]


def activation_inputs(rng, dtype):
    """Normal numbers and the special values, C-contiguous and as a strided view."""
    x = (3 * rng.standard_normal((8, 2 * len(SPECIALS)))).astype(dtype)
    x[1, :len(SPECIALS)] = SPECIALS
    x[3, len(SPECIALS):] = np.negative(SPECIALS)
    return {"contiguous": x, "strided": x.T[::2], "0-d": x[0, 0].copy().reshape(())}


def assert_same_numbers(a, b):
    """The same values, NaN where NaN, the same signs (of zeros too) outside NaN."""
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    numbers = ~np.isnan(a)
    np.testing.assert_array_equal(np.signbit(a[numbers]), np.signbit(b[numbers]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_activation_kernels_give_numpys_bits(name, dtype, rng, backends):
    op = getattr(ag, name)
    for layout, x in activation_inputs(rng, dtype).items():
        w = rng.standard_normal(x.shape).astype(dtype)
        with np.errstate(all="ignore"):
            numba_result, numpy_result = backends(
                lambda: (op(x), ag.grad(lambda x: ag.sum(op(x) * w))(x)))
        for got, want in zip(numba_result, numpy_result):
            assert_same_numbers(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_activation_kernels_against_torch(name, dtype, rng, torch):
    """relu and gelu under the numba kernels against torch, values and gradients (off
    relu's kink)."""
    theirs = {"relu": torch.relu,
              "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[name]
    x = (3 * rng.standard_normal((5, 7))).astype(dtype)
    x[np.abs(x) < 0.1] = 0.5
    before = kernels.backend()
    kernels.select("numba")
    try:
        compare_with_torch(torch, getattr(ag, name), theirs, x)
        compare_with_torch(torch, getattr(ag, name), theirs, x.T)  # a transposed view
    finally:
        kernels.select(before)


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_activation_gradients_against_central_differences(name, rng, backends):
    """First order of each backend's kernels, and the traced cotangent's path (the
    derivative of a gradient in its weights), against central differences in float64."""
    op = getattr(ag, name)
    x = rng.standard_normal((3, 4))
    x[np.abs(x) < 0.1] = 0.5  # off relu's kink
    w = rng.standard_normal((3, 4))
    loss = lambda x: np.sum(np.asarray(op(x)) * w)  # noqa: E731
    through_weights = lambda w: np.sum(ag.grad(lambda x: ag.sum(op(x) * w))(x))  # noqa: E731

    def gradients():
        return (ag.grad(lambda x: ag.sum(op(x) * w))(x),
                ag.grad(lambda w: ag.sum(ag.grad(lambda x: ag.sum(op(x) * w))(x)))(w))
    for by_x, by_w in backends(gradients):
        np.testing.assert_allclose(by_x, central_jacobian(loss, x), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(by_w, central_jacobian(through_weights, w), rtol=1e-7,
                                   atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_and_relu_kernels_give_numpys_bits(dtype, rng, backends):
    """The feed-forward's bias + relu forward and its backward (relu's mask, the bias's sum)
    in one compiled pass each: numpy's bits, but the sum (BLAS in numpy: float rounding)."""
    z = rng.standard_normal((33, 17)).astype(dtype)
    z[0, :3] = [np.nan, -0.0, 0.0]
    b = rng.standard_normal(17).astype(dtype)
    b[:3] = 0
    g = rng.standard_normal((33, 17)).astype(dtype)
    g[1, 0] = np.inf

    def run():
        h = kernels.bias_relu_forward(z.copy(), b)
        with np.errstate(invalid="ignore"):  # inf · 0 at g[1, 0], where relu is off: NaN
            d_z, d_b = kernels.bias_relu_backward(g.copy(), h)
        return h, d_z, d_b, kernels.add_bias(z.copy(), b)
    (h, d_z, d_b, plus), (h_np, d_z_np, d_b_np, plus_np) = backends(run)
    assert_same_numbers(h, h_np)
    assert_same_numbers(d_z, d_z_np)
    assert_same_numbers(plus, plus_np)
    np.testing.assert_array_equal(plus_np, z + b)
    np.testing.assert_array_equal(h_np, np.maximum(z + b, 0))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(d_z_np, g * (np.maximum(z + b, 0) > 0))
    assert d_b.dtype == d_b_np.dtype == dtype
    np.testing.assert_allclose(d_b, d_z_np.astype(np.float64).sum(axis=0),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


# ---- the row kernels in shares (kernels/parallel.py) ------------------------------------------

def split_kernel_calls(rng, dtype):
    """{name: call}: each call runs one compiled kernel that parallel.split_rows splits, on
    fixed inputs (fresh copies of those it writes into), and returns what it gives. Row
    counts that no share count divides; a row of cross-entropy redone shifted."""
    from autograd_lite.kernels import numba_kernels as nk

    def normal(*shape, spread=3.0):
        return (spread * rng.standard_normal(shape) + 1).astype(dtype)
    x, y, g = normal(37, 11), normal(37, 11), normal(37, 11)
    scale, bias = normal(11), normal(11)
    tall_g, tall_scale = normal(229, 5), normal(5)  # 8 blocks of rows for the backward
    tall_saved = nk.layer_norm_forward(normal(229, 5), tall_scale, normal(5), 1e-5)[1]
    logits, labels = normal(37, 13), rng.integers(0, 13, 37)
    logits[4] += 1000  # beyond the unshifted exp: redone shifted
    entropy_saved = nk.cross_entropy_forward(logits, labels)[2]
    weights = normal(37)
    p, grad, m, v = normal(101), normal(101), normal(101), np.abs(normal(101))

    def copies(*arrays):
        return [a.copy() for a in arrays]

    def adam(in_place):
        state = copies(p, m, v)
        outputs = state if in_place else [np.empty_like(a) for a in state]
        nk.adam_update(state[0], grad, state[1], state[2], *outputs, 1e-2, 0.9, 0.99, 1e-8,
                       0.1, False, 3)
        return outputs

    def sgd(in_place, momentum):
        state = copies(p, m)
        b = state[1] if momentum else None
        outputs = [state[0], b] if in_place else [np.empty_like(p), None if b is None
                                                   else np.empty_like(m)]
        nk.sgd_update(state[0], grad, b, *outputs, 0.1, momentum, bool(momentum), 0.01)
        return [out for out in outputs if out is not None]
    return {
        "layer_norm_forward": lambda: nk.layer_norm_forward(x, scale, bias, 1e-5),
        "residual_layer_norm_forward": lambda: nk.residual_layer_norm_forward(x, y, scale,
                                                                              bias, 1e-5),
        "layer_norm_backward": lambda: nk.layer_norm_backward(tall_g, tall_saved, tall_scale),
        "add_bias": lambda: nk.add_bias(x.copy(), bias),
        "bias_relu_forward": lambda: nk.bias_relu_forward(x.copy(), bias),
        "relu_forward": lambda: nk.relu_forward(x),
        "relu_backward": lambda: nk.relu_backward(g, x > 0),
        "cross_entropy_forward": lambda: nk.cross_entropy_forward(logits, labels),
        "cross_entropy_backward": lambda: nk.cross_entropy_backward(entropy_saved, labels, 0.1,
                                                                    weights),
        "adam_update": lambda: adam(in_place=False),
        "adam_update in place": lambda: adam(in_place=True),
        "sgd_update with momentum": lambda: sgd(in_place=False, momentum=0.9),
        "sgd_update in place": lambda: sgd(in_place=True, momentum=0.0),
    }


SPLIT_KERNELS = list(split_kernel_calls(np.random.default_rng(0), np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", SPLIT_KERNELS)
def test_each_split_kernel_gives_its_serial_bits(name, dtype, monkeypatch):
    """The kernel at 1 to 8 threads, the split forced on these small arrays (each count's
    shares handed to the pool), against its serial call: the same bits, the same dtypes."""
    call = split_kernel_calls(np.random.default_rng(5), dtype)[name]
    with split_at(1):
        serial = ag.tree_leaves(call())
    runs = pool_runs(monkeypatch)
    for n in THREAD_COUNTS:
        with split_at(n):
            split = ag.tree_leaves(call())
        assert len(split) == len(serial)
        for got, want in zip(split, serial):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{name} at {n} threads")
    assert set(runs) == set(THREAD_COUNTS) - {1}
