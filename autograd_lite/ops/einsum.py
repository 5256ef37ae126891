"""einsum, numpy's Einstein summation, and its adjoint, itself an einsum.

The cotangent of operand k of `out = einsum("s_1,...,s_n->s_out", x_1, ..., x_n)` is

    dx_k = einsum("s_out,s_1,..(all but s_k)..,s_n->s_k", g, x_1, ..(all but x_k).., x_n)

with two repairs when s_k is not a plain list of distinct letters found elsewhere:
a letter repeated in s_k (a diagonal, "ii->i") appears once, and each repetition is a
fresh letter tied to it by an identity matrix; a letter only s_k has (summed away, "ij->i")
comes from a vector of ones, so that the cotangent is copied along it. Operand axes of
length 1 that einsum broadcast are summed back (`_fit`). Ellipses are first written out as
letters, and an implicit output ("ij,jk") made explicit, so the rule sees letters only.
"""
import string

import numpy as np

from ..core.placement import array_module
from ..core.tracer import primal, primitive
from .broadcasting import broadcast_to
from ..core.dtypes import check_same_float_dtype, settles_weak_floats
from .checks import as_array

LETTERS = string.ascii_letters  # the letters einsum accepts


def _fresh_letters(used, count):
    """`count` letters not in `used`."""
    fresh = [c for c in LETTERS if c not in used][:count]
    if len(fresh) < count:
        raise ValueError(f"einsum: more than {len(LETTERS)} distinct axes")
    return fresh


def explicit_subscripts(subscripts, ndims):
    """(inputs, output): one letter string per operand and the output's, with every '...'
    written out as letters (aligned from the right, as the axes broadcast) and an implicit
    output made explicit: the broadcast axes, then the letters used once, in sorted order."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    inputs = inputs.split(",")
    n_broadcast = max([n - len(s.replace("...", "")) for s, n in zip(inputs, ndims)
                       if "..." in s] or [0])
    broadcast = "".join(_fresh_letters(set(subscripts), n_broadcast))
    written = [s.replace("...", broadcast[n_broadcast - (n - len(s) + 3):]) if "..." in s else s
               for s, n in zip(inputs, ndims)]
    if arrow:
        return written, output.replace("...", broadcast)
    letters = "".join(inputs).replace("...", "")
    return written, broadcast + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))


def _fit(grad, shape):
    """The gradient brought to the operand's shape: summed where the operand had length 1,
    broadcast where the gradient has."""
    summed = tuple(i for i, (n, m) in enumerate(zip(shape, grad.shape)) if n == 1 and m != 1)
    if summed:
        grad = grad.sum(axis=summed, keepdims=True)
    return grad if grad.shape == shape else broadcast_to(grad, shape)


def operand_gradient(g, inputs, output, operands, k, optimize):
    """dx_k for Σ g ⊙ einsum(inputs -> output)(operands) (the module docstring's rule)."""
    target = inputs[k]
    sizes = dict(zip(target, operands[k].shape))  # a repeated letter has one length
    dtype = primal(g).dtype
    xp = array_module(g)
    written, ties, ties_arrays = [], [], []
    fresh = iter(_fresh_letters(set("".join(inputs)) | set(output), len(target)))
    for i, c in enumerate(target):
        if c in target[:i]:  # a repetition: a fresh letter, tied to c by the identity
            written.append(next(fresh))
            ties.append(c + written[-1])
            ties_arrays.append(xp.eye(sizes[c], dtype=dtype))
        else:
            written.append(c)
    others = [s for j, s in enumerate(inputs) if j != k]
    present = set(output).union(*others)
    alone = [c for c in dict.fromkeys(target) if c not in present]
    terms = [output, *others, *ties, *alone]
    arrays = [g, *(x for j, x in enumerate(operands) if j != k), *ties_arrays,
              *(xp.ones(sizes[c], dtype=dtype) for c in alone)]
    grad = einsum(",".join(terms) + "->" + "".join(written), *arrays, optimize=optimize)
    return _fit(grad, operands[k].shape)


@primitive(name="einsum")
@settles_weak_floats
def einsum_of_subscripts(subscripts, *operands, optimize=False):
    """np.einsum(subscripts, *operands)."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string such as 'ij,jk->ik', got "
                        f"{type(subscripts).__name__}")
    operands = [as_array("einsum", x, f"operand {i}") for i, x in enumerate(operands)]
    for x in operands[1:]:
        check_same_float_dtype("einsum", operands[0], x)
    try:
        out = np.einsum(subscripts, *operands, optimize=optimize)
    except ValueError as error:
        shapes = ", ".join(str(x.shape) for x in operands)
        raise ValueError(f"einsum: '{subscripts}' does not fit operands of shapes {shapes}: "
                         f"{error}") from None
    inputs, output = explicit_subscripts(subscripts, [x.ndim for x in operands])

    def einsum_pullback(g):
        def gradient_of(k):  # lazy: a constant operand costs no einsum
            return lambda: operand_gradient(g, inputs, output, operands, k, optimize)
        return (None, *(gradient_of(k) for k in range(len(operands))))
    return out, einsum_pullback


def einsum(*arguments, optimize=False):
    """np.einsum(subscripts, *operands), or in numpy's other form, each operand followed by
    the list of its axes' integer labels and the output's list last:
    einsum(a, [0, 1], b, [1, 2], [0, 2]) is einsum("ab,bc->ac", a, b)."""
    if not arguments or isinstance(arguments[0], str):
        return einsum_of_subscripts(*arguments, optimize=optimize)
    output = arguments[-1] if len(arguments) % 2 else None
    pairs = arguments[:len(arguments) - len(arguments) % 2]
    operands, labels = pairs[0::2], pairs[1::2]
    try:
        def letters(axes):
            return "".join("..." if a is Ellipsis else LETTERS[a] for a in axes)
        subscripts = ",".join(letters(axes) for axes in labels)
        if output is not None:
            subscripts += "->" + letters(output)
    except (TypeError, IndexError):
        raise TypeError(f"einsum: subscripts must be a string such as 'ij,jk->ik', or each "
                        f"operand followed by a list of integer labels, got {labels}") from None
    return einsum_of_subscripts(subscripts, *operands, optimize=optimize)
