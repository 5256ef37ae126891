"""Batching rules of the products (matmul, linear, einsum) and of the square-matrix ops
(solve, inv, det, slogdet, cholesky): one call over stacks whose first axis holds the
examples; einsum with one more letter for them."""
from ..core.batched import BATCHING_RULES, Batched
from ..ops import expand_dims, linalg, squeeze
from ..ops.einsum import LETTERS, einsum_of_subscripts, explicit_subscripts
from ..ops.matmul import linear, matmul
from .axes import examples_first, ndim_of, padded, to_front
from .shared_parameters import fits_shared_matmul, linear_each, shared_matmul


def as_stacks(a, b, ba, bb, vector_a=True):
    """a and b as stacks of matrices whose first axis holds the examples: a vector b becomes
    a column (and, with vector_a, a vector a a row), so that the examples' axis is never taken
    for a matrix axis; the batched operands are padded to one rank (axes.padded).
    -> (a, b, whether a was a vector, whether b was)."""
    a_vector = vector_a and ndim_of(a) - (ba is not None) == 1
    b_vector = ndim_of(b) - (bb is not None) == 1
    a = a if ba is None else to_front(a, ba)
    b = b if bb is None else to_front(b, bb)
    if a_vector:
        a = expand_dims(a, -2)
    if b_vector:
        b = expand_dims(b, -1)
    rank = max(ndim_of(a) - (ba is not None), ndim_of(b) - (bb is not None))
    a = a if ba is None else padded(a, 0, rank)
    b = b if bb is None else padded(b, 0, rank)
    return a, b, a_vector, b_vector


def matmul_rule(values, bdims):
    """a @ b per example, over stacks (as_stacks); a vector loses its added axis again."""
    a, b, a_vector, b_vector = as_stacks(*values, *bdims)
    if None not in bdims and fits_shared_matmul(a, b):
        out = shared_matmul(a, b)  # a parameter that every example shares, unmapped
    else:
        out = matmul(a, b)
    if b_vector:
        out = squeeze(out, -1)
    if a_vector:
        out = squeeze(out, -1 if b_vector else -2)
    return out, 0


def linear_rule(values, bdims):
    """linear of each example's x by one w and b: one call; a w and b per example:
    linear_each; else (and under a second vmap) the plain definition, op by op."""
    x, w, b = values
    if bdims[1] is None and bdims[2] is None:
        return linear(to_front(x, bdims[0]), w, b), 0
    if None in bdims or any(type(v) is Batched for v in values):
        return NotImplemented
    return linear_each(*(to_front(v, bdim) for v, bdim in zip(values, bdims))), 0


def einsum_rule(values, bdims, optimize=False):
    """einsum with a letter of its own for the examples, first in the batched operands and
    in the output."""
    subscripts, *operands = values
    if bdims[0] is not None:
        raise ValueError("vmap: einsum's subscripts cannot differ from one example to the next")
    ndims = [ndim_of(x) - (b is not None) for x, b in zip(operands, bdims[1:])]
    inputs, output = explicit_subscripts(subscripts, ndims)
    used = set("".join(inputs) + output)
    letter = next(c for c in LETTERS if c not in used)
    terms = [letter + s if b is not None else s for s, b in zip(inputs, bdims[1:])]
    operands = [x if b is None else to_front(x, b) for x, b in zip(operands, bdims[1:])]
    return einsum_of_subscripts(f"{','.join(terms)}->{letter}{output}", *operands,
                                optimize=optimize), 0


def solve_rule(values, bdims):
    """solve per example, over stacks (as_stacks, a vector b as a column)."""
    a, b, _, b_vector = as_stacks(*values, *bdims, vector_a=False)
    out = linalg.solve(a, b)
    return (squeeze(out, -1) if b_vector else out), 0


@examples_first(linalg.inv, linalg.det, linalg.log_abs_det, linalg.cholesky)
def matrix_rule(op, a):
    """op of a square matrix (a stack of them): one call on the stack of the examples."""
    return op(a)


BATCHING_RULES.update({matmul: matmul_rule, linear: linear_rule,
                       einsum_of_subscripts: einsum_rule, linalg.solve: solve_rule,
                       shared_matmul: matmul_rule})  # (its value is a @ b's)
