"""The op table: one row per case of an op, from which test_op_table.py checks every op in
float32 and float64 (dtypes of outputs and gradients, the traced call recorded with the
untraced call's numbers), first order against central differences, second order where it is
cheap, and values and gradients against PyTorch where torch has the op. Adding an op is
adding a row (the vocabulary, Case and the domains, is in helpers/op_cases.py):

    Case("sin", ag.sin, lambda t: t.sin(), (normal(3, 4),)),

A row without a torch counterpart has the untraced call as its value reference: numpy's
own where the row is written in numpy's vocabulary (`np.exp(x)`, `x.T`, from
helpers/numpy_forms.py), which is how the operators and numpy functions on traced values
(ops/operators.py) are checked. Op-specific behaviour (errors, masks, ties, edge cases) is
tested in each op family's file.
"""
import math

import numpy as np

import autograd_lite as ag
from autograd_lite.ops.broadcasting import unbroadcast
from autograd_lite.ops.reductions import mean_last, sum_keepdims, sum_last
from helpers.numpy_forms import (CONSTANTS, NUMBERS, NUMPY_PRODUCTS, NUMPY_REDUCTIONS,
                                 NUMPY_SELECTIONS, NUMPY_SHAPES)
from helpers.op_cases import (Case, class_labels, dims, distinct, given, keep_mask, normal,
                              off_kinks, pieces, positive, torch, torch_clamp_broadcast,
                              torch_cross_entropy, torch_dot, torch_flat, torch_index, torch_prod,
                              torch_scatter_add, uniform, well_conditioned)

ANY = (normal(2, 3, 4),)
SEVERAL = (distinct(2, 3, 4),)
MASK = np.array([[True, False, True, True], [False, False, True, False],
                 [True, True, False, True]])
INDICES = {  # name: an index into a (3, 4) array
    "int": 1, "negative-int": -1, "scalar": (2, 3), "slice": slice(1, 3),
    "step": (slice(None), slice(None, None, 2)), "column": (slice(None), 2),
    "ellipsis-none": (Ellipsis, None, 1), "bool-mask": MASK,
    "bool-rows": np.array([True, False, True]), "repeats": np.array([0, 0, 2]),
    "list-repeats": [0, 0, 2], "2d-array": np.array([[0, 1], [1, 1]]),
    "pairs": (np.array([0, 1, 1]), np.array([2, 0, 2])),
    "slice-and-array": (slice(None), np.array([3, 3, 0])),
}
GATHERS = {  # name: (table shape, indices)
    "vector": ((5,), np.array([4, 0, 4, 1])),
    "embedding": ((6, 3), np.array([[0, 5, 2], [2, 2, 0]])),
    "rows-3d": ((4, 2, 3), np.array([3, 1, 1])), "scalar-index": ((5, 2), np.array(3)),
    "int32": ((5, 3), np.array([1, 4, 1], np.int32)),
    "uint8": ((5, 3), np.array([[1, 4], [1, 0]], np.uint8)), "empty": ((5, 3), np.zeros(0, int)),
}
REDUCTIONS = {  # name: (ours, torch's of (tensor, dims, keepdim))
    "sum": (ag.sum, lambda t, d, k: t.sum(d, keepdim=k)),
    "mean": (ag.mean, lambda t, d, k: t.mean(d, keepdim=k)),
    "max": (ag.max, lambda t, d, k: t.amax(d, keepdim=k)),
    "var": (ag.var, lambda t, d, k: t.var(d, keepdim=k, correction=0)),
    "min": (ag.min, lambda t, d, k: t.amin(d, keepdim=k)),
    "prod": (ag.prod, torch_prod),
}
AXES = [None, 0, -1, 1, (0, 2), (-1, 0, 1)]
SOFTMAX_AXES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
                ((2, 3, 4), 0)]
MASKED = [((3, 5), (3, 5), -1), ((3, 5), (5,), -1), ((2, 2, 4, 4), (2, 1, 1, 4), -1),
          ((2, 4, 4), (4, 4), -1), ((4, 3), (4, 1), 0)]  # (scores, mask, axis)
LOGSUMEXP = [((5,), -1, False), ((3, 4), 0, True), ((2, 3, 4), -1, True),
             ((2, 3, 4), (0, 2), False), ((2, 3, 4), None, False), ((2, 3, 4), None, True)]
CROSS_ENTROPY = [(None, 0.0), (None, 0.1), (-100, 0.0), (-100, 0.2), (2, 0.0), (2, 0.1)]
MATMULS = [((3, 4), (4, 5)), ((1, 4), (4, 1)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
           ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((2, 2, 3, 4), (2, 2, 4, 3)),
           ((1, 3, 4), (2, 1, 4, 2)), ((2, 3, 3, 4), (4, 2)),
           ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,))]
DOTS = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((3, 4), (4, 2)), ((2, 3, 4), (4,)),
        ((2, 3, 4), (4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 3)),
        ((), (3,)), ((2, 3), ())]
EINSUMS = [  # subscripts, operand shapes
    ("ij,jk->ik", (3, 4), (4, 5)), ("ij,jk", (3, 4), (4, 5)),
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    ("ii->", (4, 4)), ("ii", (4, 4)), ("ii->i", (4, 4)), ("iij->j", (3, 3, 2)),
    ("ii,i->i", (3, 3), (3,)), ("ij->", (3, 4)), ("ij->j", (3, 4)), ("ij->ji", (3, 4)),
    ("ba", (3, 4)), ("i,j->ij", (3,), (4,)), ("i,i->", (4,), (4,)), ("ij,ij->ij", (3, 4), (3, 4)),
    ("ij,j->i", (3, 4), (1,)), ("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2)),
    ("i...->...", (3, 2, 2)), ("...", (2, 3)), ("ij,kl->", (2, 3), (3, 2)),
]
NORMS = [  # shape, ord, axis, keepdims
    ((2, 3, 4), None, None, False), ((2, 3, 4), None, None, True), ((5,), 2, None, False),
    ((3, 4), "fro", None, False), ((3, 4), None, 1, False), ((3, 4), 2, 0, True),
    ((2, 3, 4), None, (0, 2), False), ((2, 3, 4), "fro", (2, 1), True), ((2, 3, 4), None, -1, True),
]
CLIPS = {  # name: (our clip of the arguments, torch's, the arguments)
    "numbers": (lambda x: ag.clip(x, -0.5, 0.75), lambda t: t.clamp(-0.5, 0.75), (normal(3, 4),)),
    "a_min only": (lambda x: ag.clip(x, 0.2, None), lambda t: t.clamp(min=0.2), (normal(3, 4),)),
    "a_max only": (lambda x: ag.clip(x, None, -0.1), lambda t: t.clamp(max=-0.1), (normal(3, 4),)),
    "arrays": (ag.clip, lambda x, low, high: torch.clamp(x, low, high),
               (normal(3, 4), normal(4), normal(3, 1))),
    "broadcast to the bounds": (ag.clip, torch_clamp_broadcast, (normal(4), normal(2, 1, 4),
                                                                normal(3, 1))),
}
TAKES = {  # name: (x shape, indices, axis); the indices repeat
    "axis 1": ((3, 4), np.array([[0, 0, 3], [1, 1, 1], [3, 2, 0]]), 1),
    "axis 0": ((3, 4), np.array([[2, 0, 2, 2], [2, 1, 0, 0]]), 0),
    "broadcast indices": ((3, 4), np.array([[3, 3]]), -1),
    "negative indices": ((2, 5), np.array([[-1, 0, -1], [4, -5, 2]]), 1),
    "3-d": ((2, 3, 4), np.array([[[1], [0], [1]], [[2], [2], [0]]]), 2),
    "axis None": ((3, 4), np.array([11, 0, 11, 5]), None),
}
ROWS, COLS = np.array([0, 2, 0, 0, 1]), np.array([1, 3, 1, 1, 0])


def torch_gelu(t):
    return torch.nn.functional.gelu(t, approximate="tanh")


def torch_pad(t, width):
    """np.pad's (before, after) per axis (or one for all) as torch's pad, last axis first."""
    widths = np.broadcast_to(np.asarray(width), (t.ndim, 2))
    return torch.nn.functional.pad(t, [int(n) for pair in widths[::-1] for n in pair])


def torch_where(c, x, y):
    return torch.where(c, x, y)


CASES = [
    # ---- elementwise (ops/elementwise.py) ----
    Case("neg", ag.neg, lambda t: -t, ANY),
    Case("exp", ag.exp, lambda t: t.exp(), ANY),
    Case("exp 0-d", ag.exp, lambda t: t.exp(), (normal(),)),
    Case("log", ag.log, lambda t: t.log(), (positive(2, 3, 4),)),
    Case("sqrt", ag.sqrt, lambda t: t.sqrt(), (positive(2, 3, 4),)),
    Case("tanh", ag.tanh, lambda t: t.tanh(), ANY),
    Case("sigmoid", ag.sigmoid, lambda t: t.sigmoid(), ANY),
    Case("sigmoid far from 0", lambda x: ag.sigmoid(30 * x), lambda t: (30 * t).sigmoid(), ANY),
    Case("relu", lambda x: ag.relu(x), lambda t: t.relu(), (off_kinks(2, 3, 4),)),
    Case("gelu", lambda x: ag.gelu(x), torch_gelu, ANY),  # (fused: called as ag.<name>)
    Case("abs", ag.abs, lambda t: t.abs(), (off_kinks(2, 3, 4),)),
    Case("add", ag.add, lambda a, b: a + b, (normal(2, 1, 4), normal(3, 1))),
    Case("add 0-d", ag.add, lambda a, b: a + b, (normal(), normal(3))),
    Case("sub", ag.sub, lambda a, b: a - b, (normal(2, 1, 4), normal(3, 1))),
    Case("mul", ag.mul, lambda a, b: a * b, (normal(2, 1, 4), normal(3, 1))),
    Case("div", ag.div, lambda a, b: a / b, (normal(2, 1, 4), positive(3, 1))),
    Case("pow", ag.pow, lambda a, b: a ** b, (positive(2, 1, 4), normal(3, 1))),
    Case("maximum", ag.maximum, lambda a, b: a.maximum(b), (normal(2, 1, 4), normal(3, 1))),
    Case("minimum", ag.minimum, lambda a, b: a.minimum(b), (normal(5, 1), normal(1, 5))),
    Case("where", ag.where, torch_where, (keep_mask((3, 4)), normal(3, 4), normal(3, 4))),
    Case("where broadcast", ag.where, torch_where, (keep_mask((3, 1)), normal(4), normal(2, 1, 1))),
    Case("where 0-d", ag.where, torch_where, (keep_mask((2, 3)), normal(), normal(3))),
    Case("where(c, x, 0.0)", lambda c, x: ag.where(c, x, 0.0),
         lambda c, x: torch.where(c, x, 0.0), (keep_mask((3, 4)), normal(3, 4))),
    Case("sin", ag.sin, lambda t: t.sin(), ANY),
    Case("cos", ag.cos, lambda t: t.cos(), ANY),
    Case("log1p", ag.log1p, lambda t: t.log1p(), (uniform(-0.9, 2.0, 2, 3, 4),)),
    Case("expm1", ag.expm1, lambda t: t.expm1(), ANY),
    Case("softplus", ag.softplus, lambda t: torch.nn.functional.softplus(t),
         (uniform(-15, 15, 2, 3, 4),)),
    Case("silu", ag.silu, lambda t: torch.nn.functional.silu(t), ANY),
    *[Case(name, getattr(ag, name), lambda t, name=theirs: getattr(t, name)(), (domain,))
      for name, theirs, domain in [
          ("exp2", "exp2", normal(3, 4)), ("log2", "log2", positive(3, 4)),
          ("log10", "log10", positive(3, 4)), ("tan", "tan", uniform(-1.2, 1.2, 3, 4)),
          ("arcsin", "arcsin", uniform(-0.9, 0.9, 3, 4)),
          ("arccos", "arccos", uniform(-0.9, 0.9, 3, 4)), ("arctan", "arctan", normal(3, 4)),
          ("sinh", "sinh", normal(3, 4)), ("cosh", "cosh", normal(3, 4)),
          ("arcsinh", "arcsinh", normal(3, 4)), ("arccosh", "arccosh", uniform(1.2, 3.0, 3, 4)),
          ("arctanh", "arctanh", uniform(-0.9, 0.9, 3, 4)), ("deg2rad", "deg2rad", normal(3, 4)),
          ("rad2deg", "rad2deg", normal(3, 4)), ("reciprocal", "reciprocal", positive(3, 4))]],
    *[Case(name, getattr(ag, name), theirs, (normal(2, 1, 4), normal(3, 1)))
      for name, theirs in [("logaddexp", lambda a, b: a.logaddexp(b)),
                           ("logaddexp2", lambda a, b: a.logaddexp2(b)),
                           ("arctan2", lambda a, b: a.atan2(b)),
                           ("hypot", lambda a, b: a.hypot(b))]],
    Case("fabs", ag.fabs, lambda t: t.abs(), (off_kinks(3, 4),)),
    Case("sinc", ag.sinc, lambda t: t.sinc(), (normal(3, 4),)),
    Case("fmax", ag.fmax, lambda a, b: a.fmax(b), (normal(2, 1, 4), normal(3, 1))),
    Case("fmin", ag.fmin, lambda a, b: a.fmin(b), (normal(2, 1, 4), normal(3, 1))),
    Case("mod", ag.mod, lambda a, b: a.remainder(b),
         (uniform(-0.9, -0.1, 2, 1, 4), uniform(1.0, 1.5, 3, 1))),

    Case("square", ag.square, lambda t: t.square(), ANY),
    *[Case(f"clip {name}", ours, theirs, args) for name, (ours, theirs, args) in CLIPS.items()],
    *[Case(name, f, f, (positive(2, 3),)) for name, f in NUMBERS.items()],
    *[Case(name, f, None, (positive(2, 3),)) for name, f in CONSTANTS.items()],
    # numpy's functions on traced values (ops/operators.py)
    *[Case(f"np.{f.__name__}", f, None, (off_kinks(3, 4),))
      for f in [np.exp, np.tanh, np.abs, np.square, np.negative, np.positive]],
    *[Case(f"np.{f.__name__}", f, None, (positive(3, 4),)) for f in [np.log, np.sqrt]],
    *[Case(f"np.{f.__name__}", f, None, (normal(3, 4), normal(4)))
      for f in [np.add, np.subtract, np.multiply, np.maximum, np.minimum]],
    Case("np.true_divide", np.true_divide, None, (normal(3, 4), positive(4))),
    Case("np.power", np.power, None, (positive(3, 4), normal(4))),
    Case("np.maximum(x, 1.0)", lambda x: np.maximum(x, 1.0), None, (normal(3, 4),)),
    Case("np.minimum(1.0, x)", lambda x: np.minimum(1.0, x), None, (normal(3, 4),)),
    *[Case(f"np.{f.__name__}", f, None, (normal(3, 4),)) for f in [np.sin, np.cos, np.expm1]],
    Case("np.log1p", np.log1p, None, (uniform(-0.9, 2.0, 3, 4),)),
    Case("a ** b", lambda a, b: a ** b, None, (positive(3, 4), normal(4))),
    # ---- reductions (ops/reductions.py) ----
    *[Case(f"{name} axis={a} keepdims={k}", lambda x, f=f, a=a, k=k: f(x, axis=a, keepdims=k),
           lambda t, g=g, a=a, k=k: g(t, dims(a, 3), k), SEVERAL)
      for name, (f, g) in REDUCTIONS.items() for a in AXES for k in (False, True)],
    *[Case(f"var ddof={d} axis={a}", lambda x, a=a, d=d: ag.var(x, a, ddof=d),
           lambda t, a=a, d=d: t.var(dims(a, 2), correction=d), (normal(4, 5),))
      for d in (1, 2) for a in [None, 1, (0, 1)]],
    *[Case(f"std axis={a} keepdims={k} ddof={d}", lambda x, a=a, k=k, d=d: ag.std(x, a, k, d),
           lambda t, a=a, k=k, d=d: t.std(dims(a, 3), correction=d, keepdim=k), SEVERAL)
      for a, k, d in [(None, False, 0), (1, True, 0), ((0, 2), False, 1)]],
    Case("sum (5,)", ag.sum, lambda t: t.sum(), (normal(5),)),
    *[Case(f"sum_last {s}", sum_last, lambda t: t.sum(-1, keepdim=True), (normal(*s),))
      for s in [(5,), (2, 3, 7), (2, 1, 1)]],
    Case("mean_last", mean_last, lambda t: t.mean(-1, keepdim=True), ANY),
    *[Case(f"sum_keepdims {a}", lambda x, a=a: sum_keepdims(x, a),
           lambda t, a=a: t.sum(a, keepdim=True), ANY) for a in (1, 2)],
    *[Case(f"prod with zeros axis={a}", lambda x, a=a: ag.prod(x, a),
           lambda t, a=a: torch_prod(t, dims(a, 2), False),
           (given([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0], [0.5, -2.0, 1.0]]),)) for a in [None, 0, 1]],
    *[Case(f"cumsum axis={a}", lambda x, a=a: ag.cumsum(x, a),
           lambda t, a=a: torch_flat(lambda t, d: t.cumsum(d))(t, a), SEVERAL)
      for a in [None, 0, 1, -1]],
    *[Case(name, f, None, SEVERAL) for name, f in NUMPY_REDUCTIONS.items()],
    # ---- fused neural-network ops (ops/nn.py) ----
    *[Case(f"softmax {s} axis={a}", lambda x, a=a: ag.softmax(x, a),
           lambda t, a=a: t.softmax(a), (normal(*s),)) for s, a in SOFTMAX_AXES],
    *[Case(f"log_softmax {s} axis={a}", lambda x, a=a: ag.log_softmax(x, a),
           lambda t, a=a: t.log_softmax(a), (normal(*s),)) for s, a in SOFTMAX_AXES],
    *[Case(f"softmax {s} mask {m} axis={a}", lambda x, m, a=a: ag.softmax(x, a, m),
           lambda t, m, a=a: t.masked_fill(~m, -math.inf).softmax(a), (normal(*s), keep_mask(m, a)))
      for s, m, a in MASKED],
    *[Case(f"logsumexp {s} axis={a} keepdims={k}", lambda x, a=a, k=k: ag.logsumexp(x, a, k),
           lambda t, a=a, k=k, n=len(s): t.logsumexp(dims(a, n), k), (normal(*s),))
      for s, a, k in LOGSUMEXP],
    *[Case(f"layer_norm {s}", lambda x, w, b: ag.layer_norm(x, w, b),
           lambda x, w, b: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b),
           (normal(*s), normal(s[-1]), normal(s[-1]))) for s in [(4,), (3, 5), (2, 3, 5)]],
    Case("layer_norm eps=0.5", lambda x, w, b: ag.layer_norm(x, w, b, eps=0.5),
         lambda x, w, b: torch.nn.functional.layer_norm(x, (5,), w, b, 0.5),
         (normal(2, 3, 5), normal(5), normal(5))),
    *[Case(f"cross_entropy {s} ignore_index={i} label_smoothing={ls}",
           lambda x, y, i=i, ls=ls: ag.cross_entropy(x, y, i, ls), torch_cross_entropy(i, ls),
           (normal(*s), class_labels(s[:-1], s[-1], i)))
      for s in [(5,), (4, 5), (2, 3, 5), (2, 2, 2, 3)] for i, ls in CROSS_ENTROPY],
    Case("dropout", lambda x: ag.dropout(x, 0.5, np.random.default_rng(2)), None, (normal(3, 4),)),
    # eps and label_smoothing differentiable; masked softmax beyond the no-shift bound (rows
    # shifted by 1000) and with inf at its masked entries
    Case("layer_norm eps traced", lambda x, w, b, e: ag.layer_norm(x, w, b, e / 10), None,
         (normal(2, 3, 5), normal(5), normal(5), positive())),
    *[Case(f"cross_entropy label_smoothing traced ignore_index={i}",
           lambda x, e, i=i, y=class_labels((4,), 5, i): ag.cross_entropy(x, y, i, e / 4), None,
           (normal(4, 5), positive())) for i in (None, 2)],
    *[Case(f"softmax {s} mask {m} beyond the bound", lambda x, m: ag.softmax(x + 1000.0, -1, m),
           lambda t, m: (t + 1000.0).masked_fill(~m, -math.inf).softmax(-1),
           (normal(*s), keep_mask(m))) for s, m, _ in MASKED[:4]],
    Case("softmax inf at masked entries", lambda x, m: ag.softmax(ag.where(m, x, math.inf), -1, m),
         lambda t, m: torch.where(m, t, math.inf).masked_fill(~m, -math.inf).softmax(-1),
         (normal(3, 5), keep_mask((3, 5)))),
    # ---- indexing (ops/indexing.py) ----
    *[Case(f"getitem {name}", lambda x, i=i: ag.getitem(x, i), lambda t, i=i: t[torch_index(i)],
           (normal(3, 4),)) for name, i in INDICES.items()],
    Case("getitem negative-step", lambda x: ag.getitem(x, (slice(None, None, -1), slice(3, 0, -2))),
         None, (normal(3, 4),)),
    *[Case(f"add_at {name}", lambda v, i=i: ag.add_at(v, i, (3, 4)), None,
           (normal(*np.empty((3, 4))[i].shape),)) for name, i in INDICES.items()],
    Case("add_at accumulates", lambda v: ag.add_at(v, (ROWS, COLS), (3, 4)),
         lambda v: torch.zeros((3, 4), dtype=v.dtype).index_put(torch_index((ROWS, COLS)), v,
                                                                accumulate=True), (normal(5),)),
    *[Case(f"gather {name}", lambda t, i=i: ag.gather(t, i),
           lambda t, i=i: t[torch_index(i.astype(np.int64))], (normal(*s),))
      for name, (s, i) in GATHERS.items()],
    *[Case(f"scatter_add {name}", lambda v, i=i, n=s[0]: ag.scatter_add(v, i, n),
           lambda v, i=i, n=s[0]: torch_scatter_add(v, i, n), (normal(*i.shape, *s[1:]),))
      for name, (s, i) in GATHERS.items()],
    # ---- shapes (ops/shape.py, ops/broadcasting.py) ----
    Case("reshape", lambda x: ag.reshape(x, (4, 6)), lambda t: t.reshape(4, 6), ANY),
    Case("reshape -1", lambda x: ag.reshape(x, (3, -1)), lambda t: t.reshape(3, -1), ANY),
    Case("reshape int", lambda x: ag.reshape(x, 6), lambda t: t.reshape(6), (normal(2, 3),)),
    Case("reshape 0-d", lambda x: ag.reshape(x, ()), lambda t: t.reshape(()), (normal(1, 1),)),
    Case("transpose", ag.transpose, lambda t: t.permute(2, 1, 0), ANY),
    Case("transpose axes", lambda x: ag.transpose(x, (1, 2, 0)), lambda t: t.permute(1, 2, 0), ANY),
    Case("transpose negative", lambda x: ag.transpose(x, (-1, 0, -2)),
         lambda t: t.permute(2, 0, 1), ANY),
    Case("transpose 2-d", ag.transpose, lambda t: t.T, (normal(3, 5),)),
    Case("swapaxes", lambda x: ag.swapaxes(x, 0, 2), lambda t: t.swapaxes(0, 2), ANY),
    Case("swapaxes negative", lambda x: ag.swapaxes(x, -1, -2), lambda t: t.swapaxes(-1, -2), ANY),
    *[Case(f"expand_dims {a}", lambda x, a=a: ag.expand_dims(x, a), lambda t, a=a: t.unsqueeze(a),
           (normal(2, 3),)) for a in (0, 1, -1)],
    Case("expand_dims (0, -1)", lambda x: ag.expand_dims(x, (0, -1)), lambda t: t[None, ..., None],
         (normal(2, 3),)),
    Case("squeeze", ag.squeeze, lambda t: t.squeeze(), (normal(1, 3, 1, 2),)),
    Case("squeeze axis", lambda x: ag.squeeze(x, 2), lambda t: t.squeeze(2), (normal(1, 3, 1, 2),)),
    Case("squeeze axes", lambda x: ag.squeeze(x, (0, -2)), lambda t: t.squeeze((0, 2)),
         (normal(1, 3, 1, 2),)),
    Case("concatenate", lambda x: ag.concatenate([x, x[:2] * 2, x], axis=0),
         lambda t: torch.cat([t, t[:2] * 2, t], 0), (normal(4, 3),)),
    Case("concatenate -1", lambda x: ag.concatenate([x, ag.tanh(x)], axis=-1),
         lambda t: torch.cat([t, t.tanh()], -1), (normal(2, 3, 2),)),
    Case("concatenate one", lambda x: ag.concatenate([x]), lambda t: t * 1, (normal(3),)),
    Case("concatenate three", lambda a, b, c: ag.concatenate([c, a, b], axis=1),
         lambda a, b, c: torch.cat([c, a, b], 1), (normal(2, 3), normal(2, 1), normal(2, 4))),
    Case("stack", lambda x: ag.stack([x, x * x]), lambda t: torch.stack([t, t * t]),
         (normal(2, 3),)),
    Case("stack 1", lambda x: ag.stack([x, -x, x], axis=1), lambda t: torch.stack([t, -t, t], 1),
         (normal(2, 3),)),
    Case("stack two", lambda a, d: ag.stack([a, d, a], axis=-1),
         lambda a, d: torch.stack([a, d, a], -1), (normal(2, 3), normal(2, 3))),
    Case("split sections", lambda x: ag.concatenate(pieces(ag.split(x, 3))),
         lambda t: torch.cat(pieces(t.tensor_split(3))), (normal(6, 2),)),
    Case("split indices", lambda x: ag.concatenate(pieces(ag.split(x, [2, 5], axis=1))),
         lambda t: torch.cat(pieces(t.tensor_split([2, 5], 1))), (normal(2, 7),)),
    Case("split negative axis", lambda x: ag.concatenate(pieces(ag.split(x, [1], -2))),
         lambda t: torch.cat(pieces(t.tensor_split([1], -2))), (normal(2, 4, 3),)),
    *[Case(f"broadcast_to {s} {to}", lambda x, to=to: ag.broadcast_to(x, to),
           lambda t, to=to: t.broadcast_to(to), (normal(*s),))
      for s, to in [((3,), (2, 3)), ((2, 1), (2, 4)), ((1, 3, 1), (2, 3, 4)), ((), (2, 2))]],
    Case("unbroadcast (2, 1, 3)", lambda g: unbroadcast(g, (2, 1, 3)),
         lambda t: t.sum((0, 2), keepdim=True)[0], (normal(4, 2, 5, 3),)),
    Case("unbroadcast (1, 3)", lambda g: unbroadcast(g, (1, 3)),
         lambda t: t.sum(0, keepdim=True), (normal(2, 3),)),
    Case("ravel", ag.ravel, lambda t: t.ravel(), ANY),
    Case("vstack", lambda x: ag.vstack([x[0], x, 2 * x[1:]]),
         lambda t: torch.vstack([t[0], t, 2 * t[1:]]), (normal(3, 4),)),
    Case("hstack", lambda x: ag.hstack([x, x[:, :2] ** 2]),
         lambda t: torch.hstack([t, t[:, :2] ** 2]), (normal(3, 4),)),
    Case("hstack vectors", lambda x: ag.hstack([x, -x]), lambda t: torch.hstack([t, -t]),
         (normal(4),)),
    Case("column_stack", lambda x, v: ag.column_stack([v, x, v * v]),
         lambda x, v: torch.cat([v[:, None], x, (v * v)[:, None]], 1),  # (vmap has no
         (normal(3, 4), normal(3))),  # column_stack)
    Case("append", lambda x: ag.append(x, x[0] * 2), lambda t: torch.cat([t.ravel(), t[0] * 2]),
         (normal(3, 4),)),
    Case("append axis", lambda x: ag.append(x, x[:1] * 2, axis=0),
         lambda t: torch.cat([t, t[:1] * 2], 0), (normal(3, 4),)),
    Case("array_split", lambda x: ag.concatenate(pieces(ag.array_split(x, 3, axis=1))),
         lambda t: torch.cat(pieces(t.tensor_split(3, 1))), (normal(2, 7),)),
    *[Case(f"flip axis={a}", lambda x, a=a: ag.flip(x, a),
           lambda t, a=a: t.flip(dims(a, 3)), ANY) for a in (None, 1, (0, 2))],
    *[Case(f"roll {s} axis={a}", lambda x, s=s, a=a: ag.roll(x, s, a),
           lambda t, s=s, a=a: t.roll(s, a), ANY)
      for s, a in [(2, None), (-1, 1), ((1, 3), (0, 2))]],
    *[Case(f"repeat {r} axis={a}", lambda x, r=r, a=a: ag.repeat(x, r, a),
           lambda t, r=r, a=a: t.repeat_interleave(torch.as_tensor(r), a), (normal(3, 4),))
      for r, a in [(2, None), (3, 1), (np.array([1, 0, 2]), 0)]],
    *[Case(f"tile {r}", lambda x, r=r: ag.tile(x, r), lambda t, r=r: t.tile(r), (normal(3, 4),))
      for r in [2, (2, 1), (2, 1, 3)]],
    Case("kron", ag.kron, lambda a, b: torch.kron(a, b), (normal(2, 3), normal(3, 2))),
    Case("kron vector", ag.kron, lambda a, b: torch.kron(a, b), (normal(3), normal(2, 2))),
    *[Case(f"pad {w}", lambda x, w=w: ag.pad(x, w), lambda t, w=w: torch_pad(t, w),
           (normal(3, 4),)) for w in [1, ((1, 0), (2, 3))]],
    *[Case(f"{name} k={k}", lambda x, f=getattr(ag, name), k=k: f(x, k),
           lambda t, name=name, k=k: getattr(t, name)(k), (normal(*s),))
      for name in ("tril", "triu") for k, s in [(0, (4, 4)), (1, (3, 5)), (-1, (2, 3, 4))]],
    *[Case(f"diag {s} k={k}", lambda x, k=k: ag.diag(x, k), lambda t, k=k: t.diag(k),
           (normal(*s),)) for s, k in [((4,), 0), ((3,), 2), ((3,), -1), ((4, 4), 0),
                                       ((3, 5), 1), ((4, 3), -2)]],
    Case("diagonal", lambda x: ag.diagonal(x, 1, 2, 0), lambda t: t.diagonal(1, 2, 0), ANY),
    Case("trace", ag.trace, lambda t: t.trace(), (normal(4, 4),)),
    Case("trace offset", lambda x: ag.trace(x, -1), lambda t: t.diagonal(-1).sum(),
         (normal(3, 5),)),
    *[Case(f"tensordot {a}", lambda x, y, a=a: ag.tensordot(x, y, a),
           lambda x, y, a=a: torch.tensordot(x, y, a), (normal(2, 3, 4), normal(*s)))
      for a, s in [(1, (4, 2)), (2, (3, 4, 5)), (([0, 2], [1, 0]), (4, 2)), (0, (2,))]],
    *[Case(f"atleast_{n}d {s}", getattr(ag, f"atleast_{n}d"),
           lambda t, n=n: getattr(torch, f"atleast_{n}d")(t), (normal(*s),))
      for n, s in [(1, ()), (2, (3,)), (3, (3,)), (3, (2, 3))]],
    Case("moveaxis", lambda x: ag.moveaxis(x, [0, 1], [2, 0]),
         lambda t: t.movedim((0, 1), (2, 0)), ANY),
    Case("rollaxis", lambda x: ag.rollaxis(x, 2, 1), lambda t: t.movedim(2, 1), ANY),
    *[Case(f"rot90 k={k}", lambda x, k=k: ag.rot90(x, k, (0, 2)),
           lambda t, k=k: t.rot90(k, (0, 2)), ANY) for k in (1, 2, 3)],
    *[Case(f"diff n={n}", lambda x, n=n: ag.diff(x, n, 1), lambda t, n=n: t.diff(n, 1), ANY)
      for n in (1, 2)],
    Case("inner", ag.inner, lambda a, b: torch.inner(a, b), (normal(2, 4), normal(3, 4))),
    Case("select", lambda x: ag.select([x > 0.5, x < -0.5], [x * x, 2 * x], 0.25),
         lambda t: torch.where(t > 0.5, t * t, torch.where(t < -0.5, 2 * t, 0.25)),
         (distinct(3, 4),)),
    Case("nan_to_num", ag.nan_to_num, lambda t: t.nan_to_num(), ANY),
    *[Case(name, lambda x, f=getattr(ag, name), a=a: ag.concatenate(pieces(f(x, 2)), 0),
           lambda t, a=a: torch.cat(pieces(t.tensor_split(2, a))), (normal(2, 4, 2),))
      for name, a in [("hsplit", 1), ("vsplit", 0), ("dsplit", 2)]],
    Case("partition", lambda x: ag.partition(x, 1), lambda t: t.sort(-1).values, SEVERAL),
    Case("r_", lambda x: ag.r_[x, 2 * x[:1], 1:3, 0.5], None, (normal(4),)),
    Case("c_", lambda x, v: ag.c_[x, v, v * v], None, (normal(3, 2), normal(3))),
    Case("einsum of sublists", lambda a, b: ag.einsum(a, [0, 1, 2], b, [1, 2], [2, 0]),
         lambda a, b: torch.einsum("abc,bc->ca", a, b), (normal(2, 3, 4), normal(3, 4))),
    Case("a list as an op's operand", lambda x: ag.mean([x[0], 2 * x[1]], axis=0),
         lambda t: torch.stack([t[0], 2 * t[1]]).mean(0), (normal(2, 3),)),
    Case("a nested list as an op's operand",
         lambda x: ag.concatenate([[[x[0, 0], x[1, 0]], [x[1, 1], x[0, 1]]], x]),
         lambda t: torch.cat([torch.stack([torch.stack([t[0, 0], t[1, 0]]),
                                           torch.stack([t[1, 1], t[0, 1]])]), t]),
         (normal(2, 2),)),
    Case("linspace", lambda a, b: ag.linspace(a, b, 4), lambda a, b: a + (b - a) * torch.linspace(
        0, 1, 4, dtype=a.dtype), (normal(), normal())),
    Case("a tuple as a function's operand", lambda x: ag.std((x[0], x[1] ** 2), axis=0),
         lambda t: torch.stack([t[0], t[1] ** 2]).std(0, correction=0), (normal(2, 3),)),
    Case("array", lambda x: ag.array([x[0], 2.0 * x[1], x[2] ** 2]),
         lambda t: torch.stack([t[0], 2.0 * t[1], t[2] ** 2]), (normal(3, 4),)),
    Case("array of numbers", lambda x: ag.array([[x[0, 0], 1.0], [2.0, x[1, 1] * x[0, 1]]]),
         lambda t: torch.stack([torch.stack([t[0, 0], t.new_tensor(1.0)]),
                                torch.stack([t.new_tensor(2.0), t[1, 1] * t[0, 1]])]),
         (normal(2, 2),)),
    *[Case(name, f, None, SEVERAL) for name, f in NUMPY_SHAPES.items()],
    # ---- matmul (ops/matmul.py) ----
    *[Case(f"matmul {a} @ {b}", ag.matmul, lambda a, b: a @ b, (normal(*a), normal(*b)))
      for a, b in MATMULS],
    Case("matmul of transposed operands",
         lambda q, k: ag.matmul(q, ag.transpose(ag.swapaxes(k, 1, 2), (0, 1, 3, 2))),
         lambda q, k: q @ k.transpose(1, 2).transpose(-1, -2),
         (normal(2, 3, 5, 4), normal(2, 5, 3, 4))),
    Case("a @ w", lambda a, w: a @ w, None, (normal(2, 3, 4), normal(4, 5))),
    *[Case(f"linear {x} to {n}", lambda x, w, b: ag.linear(x, w, b),
           lambda x, w, b: torch.nn.functional.linear(x, w.T, b),
           (normal(*x), normal(x[-1], n), normal(n)))
      for x, n in [((4,), 3), ((5, 4), 3), ((2, 3, 4), 3), ((2, 3, 4), 1)]],
    Case("np.matmul", np.matmul, None, (normal(2, 3, 4), normal(4, 5))),
    *[Case(f"dot {a} {b}", ag.dot, torch_dot, (normal(*a), normal(*b))) for a, b in DOTS],
    Case("outer", ag.outer, lambda a, b: torch.outer(a, b), (normal(3), normal(4))),
    Case("outer flattens", ag.outer, lambda a, b: torch.outer(a.flatten(), b.flatten()),
         (normal(2, 3), normal(2, 1))),
    *[Case(f"einsum {s}", lambda *x, s=s: ag.einsum(s, *x), lambda *t, s=s: torch.einsum(s, *t),
           tuple(normal(*shape) for shape in shapes)) for s, *shapes in EINSUMS],
    *[Case(name, f, None, SEVERAL) for name, f in NUMPY_PRODUCTS.items()],
    # ---- norms (ops/linalg.py) ----
    *[Case(f"norm {s} ord={o} axis={a} keepdims={k}", lambda x, o=o, a=a, k=k: ag.norm(x, o, a, k),
           lambda t, o=o, a=a, k=k: torch.linalg.norm(t, o, a, k), (normal(*s),))
      for s, o, a, k in NORMS],
    # ---- square matrices (ops/linalg.py) ----
    *[Case(f"solve {a} {b}", ag.solve, lambda a, b: torch.linalg.solve(a, b),
           (well_conditioned(*a), normal(*b)))
      for a, b in [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 1)), ((2, 3, 3), (3, 2))]],
    *[Case(f"{name} {s}", getattr(ag, name), theirs, (well_conditioned(*s),))
      for name, theirs in [("inv", lambda t: torch.linalg.inv(t)),
                           ("det", lambda t: torch.linalg.det(t))]
      for s in [(3, 3), (2, 3, 3)]],
    *[Case(f"slogdet {s}", lambda a: ag.slogdet(a)[1], lambda t: torch.linalg.slogdet(t)[1],
           (well_conditioned(*s),)) for s in [(3, 3), (2, 3, 3)]],
    Case("slogdet negative", lambda a: ag.slogdet(-a)[1], lambda t: torch.linalg.slogdet(-t)[1],
         (well_conditioned(3, 3),)),
    *[Case(f"cholesky {s}", lambda a: ag.cholesky(a @ ag.swapaxes(a, -1, -2)),
           lambda t: torch.linalg.cholesky(t @ t.transpose(-1, -2)), (well_conditioned(*s),))
      for s in [(3, 3), (2, 3, 3)]],
    # ---- reordering (ops/sorting.py) ----
    *[Case(f"sort axis={a}", lambda x, a=a: ag.sort(x, a),
           lambda t, a=a: torch_flat(lambda t, d: t.sort(d).values)(t, a), SEVERAL)
      for a in [-1, 0, 1, None]],
    *[Case(f"take_along_axis {name}", lambda x, i=i, a=a: ag.take_along_axis(x, i, a),
           lambda t, i=i, a=a: torch.take_along_dim(t, torch.from_numpy(i), a), (normal(*s),))
      for name, (s, i, a) in TAKES.items()],
    *[Case(name, f, None, SEVERAL) for name, f in NUMPY_SELECTIONS.items()],
]
BY_NAME = {case.name: case for case in CASES}

# The ops with a fast rule (core/rules.py) and their rows: a test runs each row with the
# rules and with `ag.fast_rules(False)` (the plain functions), and compares.
FUSED_OPS = ("softmax", "log_softmax", "layer_norm", "cross_entropy", "gather", "scatter_add",
             "add_at", "relu", "gelu", "linear")
FUSED_CASES = [case for case in CASES if case.name.split()[0] in FUSED_OPS]
