"""Shape ops: primitives that move elements without changing them (each pullback the inverse
movement of the cotangent), and numpy's other joins, splits and rearrangements over them."""
import numbers

import numpy as np

from ..core.placement import array_module
from ..core.tracer import is_array, primitive
from ..core.dtypes import check_same_float_dtype
from . import reductions
from .broadcasting import broadcast_to
from .checks import as_array, normalize_axes
from .selection import where


@primitive
def reshape(x, shape):
    x = as_array("reshape", x)
    try:
        out = x.reshape(shape)
    except ValueError:
        target = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        raise ValueError(f"reshape: cannot reshape {x.shape} (size {x.size}) "
                         f"into {target}") from None
    x_shape = x.shape

    def reshape_pullback(g):
        return g.reshape(x_shape), None
    return out, reshape_pullback


@primitive
def transpose(x, axes=None):
    x = as_array("transpose", x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(axes)
    if sorted(a % x.ndim if -x.ndim <= a < x.ndim else a for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes "
                         f"of {x.shape}")
    out = np.transpose(x, axes)
    inverse = tuple(np.argsort([a % x.ndim for a in axes]))

    def transpose_pullback(g):
        return np.transpose(g, inverse), None
    return out, transpose_pullback


@primitive
def swapaxes(x, axis1, axis2):
    x = as_array("swapaxes", x)
    normalize_axes("swapaxes", (axis1,), x.ndim)
    normalize_axes("swapaxes", (axis2,), x.ndim)
    out = np.swapaxes(x, axis1, axis2)

    def swapaxes_pullback(g):
        return np.swapaxes(g, axis1, axis2), None, None
    return out, swapaxes_pullback


@primitive
def expand_dims(x, axis):
    """Insert a length-1 axis at `axis` (an int or a tuple, as np.expand_dims)."""
    x = as_array("expand_dims", x)
    axes = axis if isinstance(axis, tuple) else (axis,)
    if not all(-x.ndim - len(axes) <= a < x.ndim + len(axes) for a in axes):
        raise ValueError(f"expand_dims: axis {axis} is out of range for {x.shape}")
    out = np.expand_dims(x, axis)
    x_shape = x.shape

    def expand_dims_pullback(g):
        return g.reshape(x_shape), None
    return out, expand_dims_pullback


@primitive
def squeeze(x, axis=None):
    """Remove length-1 axes (all of them, or those named by `axis`)."""
    x = as_array("squeeze", x)
    axes = normalize_axes("squeeze", axis, x.ndim) if axis is not None else None
    if axes is not None and any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"squeeze: axis {axis} of {x.shape} does not have length 1")
    out = np.squeeze(x, axes)
    x_shape = x.shape

    def squeeze_pullback(g):
        return g.reshape(x_shape), None
    return out, squeeze_pullback


@primitive(name="concatenate")
def concatenate_arrays(axis, *xs):
    """Join arrays along an existing axis; the pullback slices the cotangent back apart."""
    if not xs:
        raise ValueError("concatenate: needs at least one array")
    xs = [as_array("concatenate", x, f"xs[{i}]") for i, x in enumerate(xs)]
    ndim = xs[0].ndim
    (axis,) = normalize_axes("concatenate", axis, ndim)
    shapes = [x.shape for x in xs]
    rest = [s[:axis] + s[axis + 1:] for s in shapes]
    if any(len(s) != ndim for s in shapes) or any(r != rest[0] for r in rest):
        raise ValueError(f"concatenate: shapes {shapes} must agree on every axis but {axis}")
    for x in xs[1:]:
        check_same_float_dtype("concatenate", xs[0], x)
    out = np.concatenate(xs, axis)
    ends = np.cumsum([s[axis] for s in shapes])

    def concatenate_pullback(g):
        starts = [0, *ends[:-1]]
        lead = (slice(None),) * axis
        return (None, *(g[lead + (slice(int(a), int(b)),)] for a, b in zip(starts, ends)))
    return out, concatenate_pullback


def concatenate(xs, axis=0):
    if axis is None:
        return concatenate_arrays(0, *(reshape(x, -1) for x in xs))
    return concatenate_arrays(axis, *xs)


@primitive(name="stack")
def stack_arrays(axis, *xs):
    """Join equal-shape arrays along a new axis; the pullback takes each slice back out."""
    if not xs:
        raise ValueError("stack: needs at least one array")
    xs = [as_array("stack", x, f"xs[{i}]") for i, x in enumerate(xs)]
    shapes = [x.shape for x in xs]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"stack: all arrays must have the same shape, got {shapes}")
    for x in xs[1:]:
        check_same_float_dtype("stack", xs[0], x)
    ndim = xs[0].ndim + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"stack: axis {axis} is out of range for {ndim} dimensions")
    axis %= ndim
    out = np.stack(xs, axis)
    lead = (slice(None),) * axis

    def stack_pullback(g):
        return (None, *(g[lead + (i,)] for i in range(len(xs))))
    return out, stack_pullback


def split(x, indices_or_sections, axis=0):
    """np.split: a list of slices of x along `axis` (equal sections, or cut at the given
    indices)."""
    x = as_array("split", x)
    (axis,) = normalize_axes("split", axis, x.ndim)
    length = x.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        sections = int(indices_or_sections)
        if sections <= 0 or length % sections:
            raise ValueError(f"split: axis {axis} of {x.shape} (length {length}) does not "
                             f"divide into {sections} equal sections")
        cuts = [length // sections * i for i in range(1, sections)]
    else:
        cuts = [int(c) for c in indices_or_sections]
    lead = (slice(None),) * axis
    bounds = zip([0, *cuts], [*cuts, length])
    return [x[lead + (slice(a, b),)] for a, b in bounds]


# ---- numpy's other joins, splits and rearrangements, each by the ops above -------------------

def _at_least(x, ndim, op):
    """x with length-1 axes in front up to `ndim` axes (np.atleast_2d: a vector as one row)."""
    x = as_array(op, x)
    return x if x.ndim >= ndim else reshape(x, (1,) * (ndim - x.ndim) + x.shape)


def atleast_3d(x):
    """np.atleast_3d: a vector (n,) as (1, n, 1), a matrix (m, n) as (m, n, 1)."""
    x = _at_least(x, 2, "atleast_3d")
    return reshape(x, x.shape + (1,)) if x.ndim == 2 else x


def moveaxis(x, source, destination):
    """np.moveaxis: the axes `source` moved to `destination`, the others in their order."""
    x = as_array("moveaxis", x)
    source, destination = (normalize_positions("moveaxis", a, x.ndim)
                           for a in (source, destination))
    if len(source) != len(destination):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must "
                         "name as many axes")
    order = [a for a in range(x.ndim) if a not in source]
    for d, a in sorted(zip(destination, source)):
        order.insert(d, a)
    return transpose(x, order)


def normalize_positions(op, axes, ndim):
    """An int or a sequence of axes as a list of non-negative axes, in the order given."""
    axes = [axes] if isinstance(axes, numbers.Integral) else list(axes)
    return [normalize_axes(op, a, ndim)[0] for a in axes]


def rollaxis(x, axis, start=0):
    """np.rollaxis: axis `axis` moved to lie before the axis now at `start`."""
    x = as_array("rollaxis", x)
    (axis,) = normalize_axes("rollaxis", axis, x.ndim)
    if not -x.ndim <= start <= x.ndim:
        raise ValueError(f"rollaxis: start {start} is out of range for {x.shape}")
    start = start + x.ndim if start < 0 else start
    return moveaxis(x, axis, start - 1 if start > axis else start)


def rot90(x, k=1, axes=(0, 1)):
    """np.rot90: x turned k quarter turns from axes[0] towards axes[1] (flips and a swap)."""
    x = as_array("rot90", x)
    a, b = normalize_positions("rot90", axes, x.ndim)
    k %= 4
    if k == 2:
        return flip(flip(x, a), b)
    if k == 1:
        return swapaxes(flip(x, b), a, b)
    return flip(swapaxes(x, a, b), b) if k == 3 else x


def diff(x, n=1, axis=-1):
    x = as_array("diff", x)
    (a,) = normalize_axes("diff", axis, x.ndim)
    lead = (slice(None),) * a
    for _ in range(n):
        x = x[lead + (slice(1, None),)] - x[lead + (slice(None, -1),)]
    return x


def select(conditions, choices, default=0.0):
    """np.select: each entry from the first choice whose condition holds, else `default`."""
    if len(conditions) != len(choices):
        raise ValueError(f"select: {len(conditions)} conditions for {len(choices)} choices")
    out = default
    for condition, choice in reversed(list(zip(conditions, choices))):
        out = where(condition, choice, out)
    return out


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """np.nan_to_num: x where finite (its gradient passes), constants elsewhere."""
    x = as_array("nan_to_num", x)
    largest = float(np.finfo(x.dtype).max)  # a Python float: weak, in x's dtype
    out = where(np.isnan(x), nan, x)
    out = where(np.logical_and(np.isinf(x), np.greater(x, 0)),
                largest if posinf is None else posinf, out)
    return where(np.logical_and(np.isinf(x), np.less(x, 0)),
                 -largest if neginf is None else neginf, out)


def central_differences(x, axis=None):
    """np.gradient, unit spacing: (x[i+1] - x[i-1]) / 2 inside, one-sided differences at the
    ends; one array for one axis, else a list of one per axis."""
    x = as_array("np.gradient", x)
    axes = normalize_positions("np.gradient", range(x.ndim) if axis is None else axis, x.ndim)
    slopes = []
    for a in axes:
        if x.shape[a] < 2:
            raise ValueError(f"np.gradient: axis {a} of {x.shape} needs at least 2 entries")
        lead = (slice(None),) * a
        ends = [x[lead + (slice(1, 2),)] - x[lead + (slice(0, 1),)],
                x[lead + (slice(-1, None),)] - x[lead + (slice(-2, -1),)]]
        inside = (x[lead + (slice(2, None),)] - x[lead + (slice(None, -2),)]) / 2
        slopes.append(concatenate([ends[0], inside, ends[1]], axis=a))
    return slopes[0] if len(slopes) == 1 else slopes


def linspace(start, stop, num=50, endpoint=True):
    """np.linspace with traced ends: start + (stop - start) t, t numpy's num points in [0, 1]."""
    check_same_float_dtype("linspace", start, stop)
    t = array_module(start, stop).linspace(0.0, 1.0, num, endpoint=endpoint)
    dtype = _float_dtypes([start, stop])
    if dtype:
        t = t.astype(np.result_type(*dtype))
    return start + (stop - start) * t


def hstack(xs):
    """np.hstack: vectors joined end to end; arrays of 2 or more axes along axis 1."""
    xs = [_at_least(x, 1, "hstack") for x in xs]
    return concatenate(xs, axis=0 if xs and xs[0].ndim == 1 else 1)


def hsplit(x, sections):
    x = as_array("hsplit", x)
    return split(x, sections, 1 if x.ndim > 1 else 0)


def column_stack(xs):
    """np.column_stack: vectors as columns (n, 1), joined with matrices along axis 1."""
    xs = [as_array("column_stack", x) for x in xs]
    return concatenate([reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs], axis=1)


def append(x, values, axis=None):
    if axis is None:
        return concatenate([ravel(x), ravel(values)])
    return concatenate([x, values], axis)


def array_split(x, sections, axis=0):
    """np.array_split: split, the first length % sections pieces one longer where uneven."""
    x = as_array("array_split", x)
    if not isinstance(sections, numbers.Integral):
        return split(x, sections, axis)
    if sections <= 0:
        raise ValueError(f"array_split: sections must be at least 1, got {sections}")
    (a,) = normalize_axes("array_split", axis, x.ndim)
    size, longer = divmod(x.shape[a], int(sections))
    sizes = [size + 1] * longer + [size] * (sections - longer)
    return split(x, np.cumsum(sizes)[:-1], a)


def flip(x, axis=None):
    """x reversed along `axis` (an int, a tuple, or None: every axis), as np.flip."""
    x = as_array("flip", x)
    axes = normalize_axes("flip", axis, x.ndim)
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


def roll(x, shift, axis=None):
    """np.roll: entries moved `shift` places along `axis`, cyclically (None: x flattened)."""
    x = as_array("roll", x)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    shifts, axes = np.broadcast_arrays(shift, axis)
    for s, a in zip(shifts.ravel(), axes.ravel()):
        (a,) = normalize_axes("roll", int(a), x.ndim)
        n = x.shape[a]
        x = x[(slice(None),) * a + ((np.arange(n) - int(s)) % max(n, 1),)]
    return x


def repeat(x, repeats, axis=None):
    """np.repeat: each entry along `axis` repeated `repeats` times (None: x flattened)."""
    x = as_array("repeat", x)
    if axis is None:
        x, axis = ravel(x), 0
    (a,) = normalize_axes("repeat", axis, x.ndim)
    try:
        index = np.repeat(np.arange(x.shape[a]), repeats)
    except ValueError:
        raise ValueError(f"repeat: repeats {np.shape(repeats)} must be one count or one per "
                         f"entry of axis {a} of {x.shape}") from None
    return x[(slice(None),) * a + (index,)]


def tile(x, reps):
    """np.tile, by broadcasting along a new axis before each of x's."""
    x = as_array("tile", x)
    reps = (reps,) if isinstance(reps, numbers.Integral) else tuple(reps)
    ndim = max(x.ndim, len(reps))
    shape = (1,) * (ndim - x.ndim) + x.shape
    reps = (1,) * (ndim - len(reps)) + reps
    interleaved = [n for pair in zip((1,) * ndim, shape) for n in pair]
    spread = [n for pair in zip(reps, shape) for n in pair]
    tiled = broadcast_to(reshape(x, interleaved), spread)
    return reshape(tiled, tuple(r * n for r, n in zip(reps, shape)))


def kron(a, b):
    """np.kron: the block array of a[i] · b (both padded with leading 1s to one rank)."""
    a, b = as_array("kron", a, "a"), as_array("kron", b, "b")
    check_same_float_dtype("kron", a, b)  # plain arrays: numpy's product would promote
    ndim = max(a.ndim, b.ndim)
    a_shape = (1,) * (ndim - a.ndim) + a.shape
    b_shape = (1,) * (ndim - b.ndim) + b.shape
    a_spread = reshape(a, [n for m in a_shape for n in (m, 1)])
    b_spread = reshape(b, [n for m in b_shape for n in (1, m)])
    return reshape(a_spread * b_spread, tuple(m * n for m, n in zip(a_shape, b_shape)))


def pad(x, pad_width, mode="constant", constant_values=0):
    """np.pad with a constant (mode='constant'), by concatenation."""
    x = as_array("pad", x)
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported: autograd_lite pads with a "
                         "constant (mode='constant')")
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width} must be one (before, after) pair or one "
                         f"per axis of {x.shape}") from None
    xp = array_module(x)
    for a, (before, after) in enumerate(widths):
        parts = [xp.full(x.shape[:a] + (int(n),) + x.shape[a + 1:], constant_values, x.dtype)
                 for n in (before, after)]
        x = concatenate([parts[0], x, parts[1]], axis=a)
    return x


def _triangle(op, x, k, lower):
    """x with the entries above (lower) or below diagonal k of its last two axes set to 0."""
    x = as_array(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got {x.shape}")
    n, m = x.shape[-2:]
    keep = array_module(x).tri(n, m, k if lower else k - 1, dtype=bool)
    return where(keep if lower else ~keep, x, 0.0)


def diagonal(x, offset=0, axis1=0, axis2=1):
    """np.diagonal: the entries x[i, i + offset] of axes axis1 and axis2, on a last axis."""
    x = as_array("diagonal", x)
    a1, a2 = (normalize_axes("diagonal", a, x.ndim)[0] for a in (axis1, axis2))
    if a1 == a2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    moved = transpose(x, (*rest, a1, a2))
    n, m = x.shape[a1], x.shape[a2]
    count = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    rows = np.arange(count) + max(-offset, 0)
    return moved[..., rows, rows + offset]


def diag(v, k=0):
    """np.diag: a vector's square matrix with it on diagonal k, or a matrix's diagonal k."""
    v = as_array("diag", v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: v must be a vector or a matrix, got {v.shape}")
    n = v.shape[0] + abs(k)
    on_diagonal = array_module(v).eye(n, n, k, dtype=bool)
    return where(on_diagonal, pad(v, (max(k, 0), max(-k, 0))), 0.0)


class _Joiner:
    """np.r_ and np.c_ of traced values: r_[a, b, 1:4] joins along the first axis (numbers as
    vectors of one, a slice as np.arange); c_[a, b] along the last, vectors as columns."""

    def __init__(self, columns):
        self.columns = columns

    def __getitem__(self, items):
        items = items if isinstance(items, tuple) else (items,)
        parts = [np.arange(i.start or 0, i.stop, i.step or 1) if isinstance(i, slice) else i
                 for i in items]
        floats = _float_dtypes(parts)  # numbers and ranges join the arrays' float dtype
        if floats:
            dtype = np.result_type(*floats)
            parts = [np.asarray(p, dtype) if isinstance(p, (numbers.Number, np.ndarray))
                     and not _float_dtypes(p) else p for p in parts]
        if self.columns:
            return column_stack(parts)
        return concatenate([atleast_1d(p) for p in parts])


r_, c_ = _Joiner(columns=False), _Joiner(columns=True)


# ---- numpy's functions that are one expression over the ops above ------------------------

def stack(xs, axis=0):
    return stack_arrays(axis, *xs)


def atleast_1d(x):
    return _at_least(x, 1, "atleast_1d")


def atleast_2d(x):
    return _at_least(x, 2, "atleast_2d")


def ravel(x):
    """x flattened to one axis (np.ravel, x.ravel(), x.flatten())."""
    return reshape(as_array("ravel", x), -1)


def vstack(xs):
    """np.vstack: the arrays as rows (a vector a row of one), joined along axis 0."""
    return concatenate([_at_least(x, 2, "vstack") for x in xs])


def vsplit(x, sections):
    return split(x, sections, 0)


def dsplit(x, sections):
    return split(x, sections, 2)


def tril(x, k=0):
    """x's lower triangle from diagonal k down (np.tril); 0 above it."""
    return _triangle("tril", x, k, lower=True)


def triu(x, k=0):
    """x's upper triangle from diagonal k up (np.triu); 0 below it."""
    return _triangle("triu", x, k, lower=False)


def trace(x, offset=0, axis1=0, axis2=1):
    """np.trace: the sum of the diagonal."""
    return reductions.sum(diagonal(x, offset, axis1, axis2), -1)


def array(values, dtype=None):
    """np.array for values that may hold traced ones (stacked along a new first axis). Python
    numbers are weak: without `dtype`, the float arrays' dtype where there are any."""
    floats = _float_dtypes(values)
    if dtype is None and floats:
        dtype = np.result_type(*floats)
    if not _holds_arrays_to_stack(values):
        return np.array(values, dtype)
    if isinstance(values, (list, tuple)):
        parts = [array(v, dtype) for v in values]
        xp = array_module(*parts)  # numbers and plain arrays join a device's arrays there
        values = stack([p if _holds_arrays_to_stack(p) else xp.asarray(p, dtype) for p in parts])
    return values if dtype is None or values.dtype == dtype else values.astype(dtype)


def _holds_arrays_to_stack(values):
    """Whether values is, or holds (nested), a traced, a mapped or a device's array."""
    if isinstance(values, (list, tuple)):
        return any(_holds_arrays_to_stack(v) for v in values)
    return is_array(values) and not isinstance(values, np.ndarray)


def _float_dtypes(values):
    """The float dtypes of the arrays in values (a list or tuple, nested, or one value)."""
    if isinstance(values, (list, tuple)):
        return [d for v in values for d in _float_dtypes(v)]
    dtype = getattr(values, "dtype", None)
    return [dtype] if isinstance(dtype, np.dtype) and dtype.kind == "f" else []


asarray = array
row_stack = vstack
