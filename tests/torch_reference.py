"""Helpers shared by the op tests: PyTorch and central differences as independent references.

    compare_with_torch(torch, ag_fn, torch_fn, *arrays)
        values of ag_fn(*arrays) against torch_fn(*tensors), and the gradients of
        Σ f(...) ⊙ w (w random) against torch.autograd; also checks that nothing
        traced gives a plain np.ndarray and that every output and gradient keeps
        its input's dtype and shape.
    check_first_order(f, *arrays)     ag.check_gradients of Σ f(...) ⊙ w, in float64
    check_second_order(f, *arrays)    Hessian-vector products of a scalar f against
                                      central differences of its gradient
"""
import numpy as np

import autograd_lite as ag

RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}
DTYPES = [np.float64, np.float32]


def is_float(a):
    """An array argument that both libraries differentiate (the library's own leaf policy)."""
    return isinstance(a, np.ndarray) and ag.is_differentiable(a)


def assert_close(got, want, rtol, what=""):
    """|got - want| <= rtol·|want| + rtol·max|want|: relative, with an absolute floor at the
    scale of the whole array (elements near zero come from cancellation)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-3),
                               err_msg=what)


def to_tensor(torch, a, requires_grad=False):
    if isinstance(a, np.ndarray):
        t = torch.from_numpy(np.array(a))  # a copy: torch must not share ag's buffers
        return t.requires_grad_(True) if requires_grad else t
    return a


def random_weight(shape, dtype, seed=7):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def torch_value_and_grads(torch, torch_fn, arrays, weight):
    """torch_fn(*tensors) and the gradients of Σ out ⊙ weight for every float array."""
    tensors = [to_tensor(torch, a, requires_grad=is_float(a)) for a in arrays]
    out = torch_fn(*tensors)
    wanted = [t for t, a in zip(tensors, arrays) if is_float(a)]
    loss = (out * torch.from_numpy(weight)).sum()
    grads = iter(torch.autograd.grad(loss, wanted, allow_unused=True)) if wanted else iter(())
    return (out.detach().numpy(),
            [next(grads) if is_float(a) else None for a in arrays])


def compare_with_torch(torch, ag_fn, torch_fn, *arrays, rtol=None):
    """Values and gradients of ag_fn against torch_fn on the same arrays; returns ag's value."""
    dtype = next(a.dtype for a in arrays if is_float(a))
    rtol = RTOL[dtype] if rtol is None else rtol
    out = ag_fn(*arrays)
    assert type(out) is np.ndarray, f"untraced output is {type(out).__name__}, not np.ndarray"
    assert out.dtype == dtype, f"output dtype {out.dtype} for {dtype} inputs"
    weight = random_weight(out.shape, dtype)
    want_out, want_grads = torch_value_and_grads(torch, torch_fn, arrays, weight)
    assert_close(out, want_out, rtol, "value")
    grads = ag.gradient(lambda *a: ag.sum(ag_fn(*a) * weight), *arrays)
    for i, (a, g, want) in enumerate(zip(arrays, grads, want_grads)):
        if not is_float(a):
            assert g is None
            continue
        assert type(g) is np.ndarray and g.dtype == a.dtype and g.shape == a.shape, \
            f"gradient {i}: {type(g).__name__} {getattr(g, 'dtype', None)} " \
            f"{getattr(g, 'shape', None)} for a {a.dtype} {a.shape} argument"
        if want is None:  # the argument does not reach torch's output
            want = np.zeros_like(a)
        assert_close(g, want.numpy() if hasattr(want, "numpy") else want, rtol, f"gradient {i}")
    return out


def check_first_order(f, *arrays, seed=3):
    """Reverse mode of Σ f(*arrays) ⊙ w against central differences (float64)."""
    out = f(*[a.astype(np.float64) if is_float(a) else a for a in arrays])
    weight = random_weight(np.shape(out), np.float64, seed)
    return ag.check_gradients(lambda *a: ag.sum(f(*a) * weight), *arrays)


def check_second_order(f, *arrays, seed=5):
    """Hessian-vector products of scalar f: ∇_x ⟨∇f(x), v⟩ against central differences."""
    rng = np.random.default_rng(seed)
    directions = [rng.standard_normal(a.shape) if is_float(a) else None for a in arrays]

    def hessian_times_v(*a):
        total = 0.0
        for g, v in zip(ag.gradient(f, *a), directions):
            if v is not None:
                total = total + ag.sum(g * v)
        return total
    return ag.check_gradients(hessian_times_v, *arrays)


def second_derivative_torch(torch, torch_fn, x):
    """Elementwise d²/dx² Σ torch_fn(x) (float64), by double backward."""
    t = torch.from_numpy(np.array(x)).requires_grad_(True)
    (g,) = torch.autograd.grad(torch_fn(t).sum(), t, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), t)
    return h.numpy()
