"""Devices (core/devices.py): the engine on a device module's arrays, through the CuPy double
(helpers/device_double.py, registered as "cuda" by the `device_double` fixture as CuPy's
device is registered): ag.array_module, ag.to_device, the mixed numpy/device error naming
the op, and the whole op table on the double against numpy to second order. The double
refuses every implicit conversion to the host, so a row that passes converted nothing."""
import subprocess
import sys

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core import devices
from helpers.device_checks import compare_case
from helpers.device_double import DeviceArray, HostConversionError, MixedArraysError
from helpers.op_table import CASES

# Rows whose function closes over a numpy array (a mask, labels, indices, a constant
# operand): on the device they meet a host array, which must be refused, not converted.
HOST_CONSTANT_ROWS = {
    "plain * x", "plain - x", "plain / x", "plain ** x", "x ** plain", "plain @ x",
    "x @ plain", "cross_entropy label_smoothing traced ignore_index=2", "np.concatenate(plain)",
    "np.where(plain)", "np.take", "np.take_along_axis", "r_",
    *(f"take_along_axis {name}" for name in ("axis 1", "axis 0", "broadcast indices",
                                              "negative indices", "3-d", "axis None")),
}
ON_DEVICE = [case for case in CASES if case.name not in HOST_CONSTANT_ROWS]
TOLERANCE = {np.float64: 1e-9, np.float32: 1e-4}


def by_name(cases):
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])


def test_every_host_constant_row_is_a_row():
    assert HOST_CONSTANT_ROWS <= {case.name for case in CASES}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@by_name(ON_DEVICE)
def test_the_op_table_on_the_device_matches_numpy(case, dtype, device_double):
    """Value, gradients of Σ f ⊙ w and Hessian-vector products, each a device array of the
    row's dtype, against the same on numpy (which test_op_table checks against central
    differences and torch)."""
    compare_case(case, devices.device("cuda"), dtype, np.random.default_rng(0),
                 TOLERANCE[dtype])


@by_name([case for case in CASES if case.name in HOST_CONSTANT_ROWS])
def test_a_row_with_a_host_constant_is_refused_on_the_device(case, device_double):
    with pytest.raises(TypeError):
        compare_case(case, devices.device("cuda"), np.float64, np.random.default_rng(0), 1e-9)


# ---- the double itself: it refuses what CuPy refuses -------------------------------------

def test_the_double_refuses_implicit_conversion_and_mixed_operands(device_double):
    x = DeviceArray(np.arange(3.0))
    with pytest.raises(HostConversionError):
        np.asarray(x)
    with pytest.raises(MixedArraysError):
        np.add(x, np.ones(3))
    assert type(np.exp(x)) is DeviceArray and type(x.sum()) is DeviceArray
    assert float(x.sum()) == 3.0  # explicit, as in CuPy


# ---- array_module and the mixed error ----------------------------------------------------

def test_array_module_follows_the_operands(device_double):
    x = DeviceArray(np.ones(2))
    assert ag.array_module(np.ones(2)) is np and ag.array_module(1.0, None) is np
    assert ag.array_module(np.ones(2), x) is device_double
    traced = []
    ag.gradient(lambda x: traced.append(ag.array_module(x)) or ag.sum(x), x)
    assert traced == [device_double]


@pytest.mark.parametrize("op, args", [
    ("add", lambda d, h: ag.add(d, h)),
    ("matmul", lambda d, h: ag.matmul(h.reshape(1, 3), d.reshape(3, 1))),
    ("concatenate", lambda d, h: ag.concatenate([d, h])),
    ("where", lambda d, h: ag.where(h > 0, d, 0.0)),
    ("softmax", lambda d, h: ag.softmax(d, -1, h > 0)),  # a fusable op: named, not its parts
    ("layer_norm", lambda d, h: ag.layer_norm(d, h, d)),
])
def test_a_mixed_numpy_and_device_op_names_the_op(op, args, device_double):
    device, host = DeviceArray(np.ones(3)), np.ones(3)
    with pytest.raises(TypeError, match=rf"^{op}: operands on different devices \((numpy|cuda) "
                                        r"\(.*\), (numpy|cuda) \(.*\)\); nothing moves"):
        args(device, host)
    with pytest.raises(TypeError, match=rf"^{op}: operands on different devices"):
        ag.gradient(lambda d: ag.sum(args(d, host)), device)


def test_fast_rules_on_host_arrays_step_aside_for_device_arrays(device_double):
    """The ops' rules whose kernels are the host's (gather, relu, linear ...) do not apply to a
    device array, and the double has no kernels of its own: the plain functions run."""
    x = DeviceArray(np.linspace(-1, 1, 6).reshape(2, 3))
    for op in (ag.relu, ag.softmax, ag.log_softmax):
        assert not any(rule.applies is None or rule.applies(x) for rule in op.rules)
        assert all(rule.applies(x.get()) for rule in op.rules)



def test_the_registry_answers_each_array_type_with_its_device(device_double):
    """One table, array type -> Device: numpy's arrays (a subclass too) are the host's, the
    double's are "cuda", anything else is no array; the kernels ask it for a device's
    backend, and a device registered in its place is what every op sees from then on."""
    double = devices.device("cuda")
    assert devices.device_of_type(np.ndarray) is devices.HOST
    assert devices.device_of_type(np.ma.MaskedArray) is devices.HOST
    assert devices.device_of_type(DeviceArray) is double
    assert devices.device_of_type(float) is None and devices.device_of_type(type(None)) is None
    assert devices.registered() == {"cpu": devices.HOST, "cuda": double}
    x = DeviceArray(np.ones(3))
    assert ag.kernels.backend(x) == ag.kernels.backend() != "cupy"  # the double has none
    assert devices.kernels_of((x, np.ones(3))) is None  # mixed: no kernels apply
    with_kernels = double._replace(kernels="cupy")
    previous = devices.register_device(with_kernels)
    try:
        assert previous is double and devices.device_of_type(DeviceArray) is with_kernels
        assert ag.kernels.backend(x) == "cupy" and devices.kernels_of((x, x, None)) == "cupy"
    finally:
        devices.unregister_device("cuda", previous)
    assert devices.device_of_type(DeviceArray) is double

# ---- to_device ----------------------------------------------------------------------------

def test_to_device_moves_arrays_and_leaves_static_leaves(device_double):
    tree = {"w": np.arange(4.0).reshape(2, 2), "ids": np.array([1, 2]), "step": np.int64(3),
            "n_heads": 2, "rate": ag.Hyper(0.1), "name": "x", "none": None}
    moved = ag.to_device(tree, "cuda")
    assert type(moved["w"]) is DeviceArray and type(moved["ids"]) is DeviceArray
    assert moved["w"].dtype == np.float64 and moved["ids"].dtype == tree["ids"].dtype
    for key in ("step", "n_heads", "rate", "name", "none"):
        assert moved[key] is tree[key]
    assert ag.to_device(moved, "cuda")["w"] is moved["w"]  # already there: not copied
    back = ag.to_device(moved, "cpu")
    assert type(back["w"]) is np.ndarray and np.array_equal(back["w"], tree["w"])
    assert np.array_equal(back["ids"], tree["ids"]) and back["step"] is tree["step"]


def test_to_device_refuses_an_unknown_name_and_a_traced_value(device_double):
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        ag.to_device(np.ones(2), "gpu")
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        ag.to_device(np.ones(2), 0)
    with pytest.raises(TypeError, match="traced value"):
        ag.gradient(lambda x: ag.sum(ag.to_device(x, "cuda")), np.ones(2))


def test_without_cupy_cuda_says_to_install_the_gpu_extra():
    """In a process where CuPy cannot be imported (here: blocked), "cuda" raises an
    ImportError naming the `gpu` extra and the CuPy packages; numpy works as before."""
    script = ("import sys; sys.modules['cupy'] = None\n"
              "import numpy as np, autograd_lite as ag\n"
              "assert ag.array_module(np.ones(2)) is np\n"
              "try:\n"
              "    ag.to_device(np.ones(2), 'cuda')\n"
              "except ImportError as error:\n"
              "    print(error)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert "`gpu` extra" in out.stdout and "cupy-cuda12x" in out.stdout, out.stdout


def test_importing_the_library_imports_no_cupy():
    script = "import sys, autograd_lite, models; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_jacobian_and_hessian_on_the_device_match_numpys(device_double):
    x = np.random.default_rng(0).standard_normal(4)

    def f(x):
        return ag.sum(ag.tanh(x) ** 3 * x)
    for transform in (ag.jacobian(lambda x: ag.tanh(x) * x[::-1]), ag.hessian(f)):
        want, got = transform(x), transform(ag.to_device(x, "cuda"))
        assert type(got) is DeviceArray and got.shape == want.shape
        np.testing.assert_allclose(ag.to_device(got, "cpu"), want, rtol=1e-12)
