"""The text of pictures and listings: how an op's static arguments appear in its label
(small constants folded in: `mul (·, 0.125)`; options that differ from their defaults:
`transpose axes=(0, 2, 1, 3)`; indices as subscripts: `getitem [:, 0]`), and how shapes,
dtypes, sizes and counts are written (`f32[2,7,16]`, `(2, 7, 16) f32`, `1.5 KB`, `251.6k`)."""
import inspect

import numpy as np

_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
           "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool"}
OPERAND_NAMES = {"a", "b", "x", "y", "xs", "values", "table", "condition", "logits"}
OPTION_NAMES = {"axis", "axis1", "axis2", "axes", "n", "keepdims", "eps"}
FOLD_SIZE = 4  # constant arrays up to this many elements are written into their op's label


def _number(v):
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.4g}"


def format_static(v):
    """Short text for a static argument: numbers, tuples, slices, small arrays, indices."""
    if v is None or v is Ellipsis:
        return "None" if v is None else "..."
    if isinstance(v, (bool, int, float, np.number, np.bool_)):
        return _number(v)
    if isinstance(v, slice):
        parts = ["" if p is None else format_static(p) for p in (v.start, v.stop, v.step)]
        return ":".join(parts[:2] if v.step is None else parts)
    if isinstance(v, np.ndarray):
        if foldable(v):
            if v.ndim == 0:
                return _number(v.item())
            return "[" + ", ".join(map(_number, v.ravel())) + "]"
        return f"{v.dtype.name}{list(v.shape)}"
    if isinstance(v, tuple):
        return "(" + ", ".join(map(format_static, v)) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(map(format_static, v)) + "]"
    return type(v).__name__


def _equal(a, b):
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False


def foldable(value):
    """A constant array small enough to be written into its op's label."""
    return value.size <= FOLD_SIZE and value.dtype.kind in "biuf"


def describe(name, default, value):
    """('operand', text), ('option', text) or None for a static argument `name=value`
    of an op whose parameter `name` has `default`."""
    if name == "shape":
        return None  # the output shape says it
    if name == "index":
        parts = value if isinstance(value, tuple) else (value,)
        return "option", "[" + ", ".join(map(format_static, parts)) + "]"
    required = default is inspect.Parameter.empty
    if name in OPERAND_NAMES or (required and name not in OPTION_NAMES):
        return "operand", format_static(value)
    if required or not (default is value or _equal(default, value)):
        return "option", f"{name}={format_static(value)}"
    return None


def dtype_text(dtype):
    return _DTYPES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def shape_text(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def shape_and_dtype(item):
    """'(2, 16, 512) f32'"""
    return f"{shape_text(item.shape)} {dtype_text(item.dtype)}"


def shapes_text(shapes, limit):
    """'(2, 16, 512), (2, 1, 1, 16) +1': the first `limit` shapes and how many more."""
    texts = [shape_text(shape) for shape in shapes]
    more = f" +{len(texts) - limit}" if len(texts) > limit else ""
    return (", ".join(texts[:limit]) or "()") + more


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def call_counts(box):
    """'12 ops · 4 params (1.1M)': a collapsed call's ops and the parameters it uses."""
    text = plural(box.n_ops, "op")
    if box.params:
        text += f" · {plural(len(box.params), 'param')} ({count_text(box.n_param_values)})"
    return text


def typed(item, shape=None):
    """jaxpr-style type: f32[2,7,16]; `shape` when an op is passed a slice of the item."""
    shape = item.shape if shape is None else shape
    return f"{dtype_text(item.dtype)}[{','.join(map(str, shape))}]"


def size_text(nbytes):
    for unit in ("B", "KB", "MB", "GB"):
        if nbytes < 1024 or unit == "GB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024


def count_text(n):
    if n < 1000:
        return str(n)
    return f"{n / 1000:.1f}k" if n < 10 ** 6 else f"{n / 10 ** 6:.2f}M"
