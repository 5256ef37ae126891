"""Independent references: central differences, PyTorch, and the paper's formulas.

    check_first_order(f, *arrays)     reverse mode of Σ f(...) ⊙ w against central differences
                                      (float64; w random)
    check_second_order(f, *arrays)    Hessian-vector products of a scalar f against central
                                      differences of its gradient
    central_jacobian(f, x)            ∂f/∂x by central differences, f(x).shape + x.shape (for a
                                      scalar f, its gradient)
    compare_with_torch(torch, ag_fn, torch_fn, *arrays)
                                      values of ag_fn(*arrays) against torch_fn(*tensors) and
                                      the gradients of Σ f(...) ⊙ w against torch.autograd; also
                                      checks that every output and gradient keeps its input's
                                      dtype and shape and is a plain np.ndarray
    assert_close, relative_error      elementwise and whole-array closeness
    paper_position_encoding(T, D)     §3.5 written out element by element
"""
import math

import numpy as np

import autograd_lite as ag

RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5,
        np.dtype(np.float16): 2e-3}  # float16: two roundings of 2^-11 each
DTYPES = [np.float64, np.float32]


def is_float(a):
    """An array argument that both libraries differentiate (the library's own leaf policy)."""
    return isinstance(a, np.ndarray) and ag.is_differentiable(a)


def float_leaves(tree):
    """{path: array} for the floating arrays of a tree (parameters or their gradients)."""
    return {path: x for path, x in zip(ag.tree_paths(tree), ag.tree_leaves(tree)) if is_float(x)}


def assert_close(got, want, rtol, what="", scale=None):
    """|got - want| <= rtol·|want| + rtol·max|want|: relative, with an absolute floor at the
    scale of the whole array (elements near zero come from cancellation), or at `scale` where
    given (a gradient's largest entry over all its leaves: a leaf whose gradient is zero
    analytically holds rounding noise alone)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if scale is None:
        scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-3),
                               err_msg=what)


def relative_error(got, want):
    """max |got - want| / max |want|, in float64."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def random_weight(shape, dtype, seed=7):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- PyTorch ----------------------------------------------------------------------------------

def to_tensor(torch, a, requires_grad=False):
    """A torch tensor holding a copy of array `a` (torch must not share our buffers); other
    arguments (numbers, shapes) as they are."""
    if isinstance(a, np.ndarray):
        t = torch.from_numpy(np.array(a))
        return t.requires_grad_(True) if requires_grad else t
    return a


def torch_value_and_grads(torch, torch_fn, arrays, weight):
    """torch_fn(*tensors) and the gradients of Σ out ⊙ weight for every float array."""
    tensors = [to_tensor(torch, a, requires_grad=is_float(a)) for a in arrays]
    out = torch_fn(*tensors)
    wanted = [t for t, a in zip(tensors, arrays) if is_float(a)]
    loss = (out * torch.from_numpy(weight)).sum()
    grads = iter(torch.autograd.grad(loss, wanted, allow_unused=True))
    return out.detach().numpy(), [next(grads) if is_float(a) else None for a in arrays]


def compare_with_torch(torch, ag_fn, torch_fn, *arrays, rtol=None, torch_dtype=None):
    """Values and gradients of ag_fn against torch_fn on the same arrays; returns ag's value.
    torch_dtype: run torch on the arrays converted to it (float64: the exact answer for
    float16 arrays, which torch's own float16 kernels round more than once)."""
    dtype = next(a.dtype for a in arrays if is_float(a))
    rtol = RTOL[dtype] if rtol is None else rtol
    out = ag_fn(*arrays)
    assert type(out) is np.ndarray, f"untraced output is {type(out).__name__}, not np.ndarray"
    assert out.dtype == dtype, f"output dtype {out.dtype} for {dtype} inputs"
    weight = random_weight(out.shape, dtype)
    if torch_dtype is not None:
        torch_arrays = [a.astype(torch_dtype) if is_float(a) else a for a in arrays]
        want_out, want_grads = torch_value_and_grads(torch, torch_fn, torch_arrays,
                                                     weight.astype(torch_dtype))
    else:
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
        want = np.zeros_like(a) if want is None else want.numpy()  # None: a does not reach out
        assert_close(g, want, rtol, f"gradient {i}")
    return out


# ---- central differences ----------------------------------------------------------------------

def central_jacobian(f, x, eps=1e-6):
    """∂f/∂x by central differences in float64, of shape f(x).shape + x.shape: for a scalar
    f the gradient, for a scalar x (a Python float) the derivative."""
    x = np.asarray(x, dtype=np.float64)
    columns = []
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        columns.append((np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps))
    return np.stack(columns, axis=-1).reshape(np.shape(columns[0]) + x.shape)


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


# ---- the paper --------------------------------------------------------------------------------

def paper_position_encoding(max_len, d_model):
    """§3.5 written out element by element, in float64:
    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""
    table = np.zeros((max_len, d_model))
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / 10000 ** (2 * (j // 2) / d_model)
            table[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table
