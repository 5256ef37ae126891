"""Batching rules of the products: matmul, linear and einsum; and of the square-matrix ops
(solve, inv, det, slogdet, cholesky). Each makes one call: matmul and the matrix ops over
stacks whose first axis holds the examples, einsum with one more letter for them."""
from ..core.batched import BATCHING_RULES, Batched
from ..ops import expand_dims, linalg, squeeze
from ..ops.einsum import LETTERS, einsum_of_subscripts, explicit_subscripts
from ..ops.matmul import linear, matmul
from .axes import ndim_of, padded, to_front
from .shared_parameters import fits_shared_matmul, linear_each, shared_matmul


def matmul_rule(values, bdims):
    """a @ b per example. Vector operands become matrices (a row on the left, a column on the
    right) and lose that axis again after the product, so that the examples' axis is never
    taken for a matrix axis; batched operands are padded to one rank (axes.padded)."""
    (a, b), (ba, bb) = values, bdims
    a_vector = ndim_of(a) - (ba is not None) == 1
    b_vector = ndim_of(b) - (bb is not None) == 1
    if ba is not None:
        a = to_front(a, ba)
    if bb is not None:
        b = to_front(b, bb)
    if a_vector:
        a = expand_dims(a, -2)
    if b_vector:
        b = expand_dims(b, -1)
    rank = max(ndim_of(a) - (ba is not None), ndim_of(b) - (bb is not None))
    if ba is not None:
        a = padded(a, 0, rank)
    if bb is not None:
        b = padded(b, 0, rank)
    if ba is not None and bb is not None and fits_shared_matmul(a, b):
        out = shared_matmul(a, b)  # a parameter that every example shares, unmapped
    else:
        out = matmul(a, b)
    if b_vector:
        out = squeeze(out, -1)
    if a_vector:
        out = squeeze(out, -1 if b_vector else -2)
    return out, 0


def linear_rule(values, bdims):
    """linear of each example's x by one w and b: one call; a w and b per example (the
    parameters of vmap(grad(f)), or an ensemble's): linear_each, one call too; else (and
    under a second vmap) the plain definition, op by op."""
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
    """solve per example: a vector b becomes a column and loses it again (as in matmul_rule),
    and the batched operands are padded to one rank, so that their examples line up."""
    (a, b), (ba, bb) = values, bdims
    b_vector = ndim_of(b) - (bb is not None) == 1
    a = a if ba is None else to_front(a, ba)
    b = b if bb is None else to_front(b, bb)
    if b_vector:
        b = expand_dims(b, -1)
    rank = max(ndim_of(a) - (ba is not None), ndim_of(b) - (bb is not None))
    a = a if ba is None else padded(a, 0, rank)
    b = b if bb is None else padded(b, 0, rank)
    out = linalg.solve(a, b)
    return (squeeze(out, -1) if b_vector else out), 0


def matrix_rule(op):
    """op of a square matrix (a stack of them): one call on the stack of the examples."""
    def rule(values, bdims):
        return op(to_front(values[0], bdims[0])), 0
    rule.__name__ = f"{op.op_name}_batching_rule"
    return rule


for _op in (linalg.inv, linalg.det, linalg.log_abs_det, linalg.cholesky):
    BATCHING_RULES[_op] = matrix_rule(_op)
BATCHING_RULES.update({matmul: matmul_rule, linear: linear_rule,
                       einsum_of_subscripts: einsum_rule, linalg.solve: solve_rule,
                       shared_matmul: matmul_rule})  # (its value is a @ b's)
