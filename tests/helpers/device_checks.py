"""The op table (helpers/op_table.py) on a device against numpy: for one row, the value,
the gradients of Σ f ⊙ w and, where the row is cheap at second order, Hessian-vector
products, computed on the device's arrays and on numpy's, compared on the host. The device's
results must be its own arrays, of the inputs' dtype: nothing came back to the host on the
way. Used by tests/test_devices.py on the CuPy double, and by tests/gpu/check.py on CuPy.
"""
import numpy as np

import autograd_lite as ag
from helpers.references import assert_close


def on_device(device, tree):
    """The tree's numpy arrays (floats, masks, labels, indices) on `device`."""
    return ag.tree_map(lambda a: device.to_device(a) if isinstance(a, np.ndarray) else a, tree)


def _host(device, tree):
    return ag.tree_map(lambda a: device.to_host(a) if type(a) is device.array_type else a, tree)


def _weighted_sum(case, weights):
    return lambda *a: ag.sum(case.ours(*a) * weights)


def _squashed(case):
    return lambda *a: ag.sum(ag.tanh(case.ours(*a)) ** 2)


def _assert_on_device(device, tree, dtype, what):
    for leaf in ag.tree_leaves(tree):
        if leaf is not None and not isinstance(leaf, (float, int)):
            assert type(leaf) is device.array_type, f"{what}: a {type(leaf).__name__} came back"
            assert leaf.dtype == dtype, f"{what}: {leaf.dtype}, expected {dtype}"


def compare_case(case, device, dtype, rng, rtol, second_order=True):
    """Row `case` on `device` against numpy in `dtype`, within rtol (assert_close's)."""
    args = case.arguments(rng, dtype)
    out = case.ours(*args)
    weights = rng.standard_normal(np.shape(out)).astype(dtype)
    device_args = on_device(device, args)
    device_out = case.ours(*device_args)
    _assert_on_device(device, device_out, dtype, f"{case.name}: value")
    assert_close(device.to_host(device_out), out, rtol, f"{case.name}: value")

    value, grads = ag.value_and_gradient(_weighted_sum(case, weights), *args)
    device_value, device_grads = ag.value_and_gradient(
        _weighted_sum(case, device.to_device(weights)), *device_args)
    assert_close(device.to_host(device_value), value, rtol, f"{case.name}: Σ f ⊙ w")
    for i, (g, device_g) in enumerate(zip(grads, device_grads)):
        assert (g is None) == (device_g is None), f"{case.name}: gradient {i}"
        if g is not None:
            _assert_on_device(device, device_g, dtype, f"{case.name}: gradient {i}")
            assert_close(device.to_host(device_g), g, rtol, f"{case.name}: gradient {i}")

    if not (second_order and case.second_order):
        return
    directions = [rng.standard_normal(np.shape(a)).astype(dtype) if ag.is_differentiable(a)
                  and isinstance(a, np.ndarray) else None for a in args]
    _, hv = ag.hvp(_squashed(case), tuple(args), tuple(directions))
    _, device_hv = ag.hvp(_squashed(case), tuple(device_args),
                          tuple(on_device(device, directions)))
    for i, (h, device_h) in enumerate(zip(hv, device_hv)):
        if h is not None:
            _assert_on_device(device, device_h, dtype, f"{case.name}: Hessian-vector {i}")
            assert_close(_host(device, device_h), h, rtol, f"{case.name}: Hessian-vector {i}")
