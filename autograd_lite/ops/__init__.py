"""The op catalogue: every primitive and composite op, by family."""
from . import operators
from ..core import tracer
from .broadcasting import broadcast_to, unbroadcast
from .einsum import einsum
from .elementwise import (abs, add, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
                          astype, cos, cosh, deg2rad, div, exp, exp2, expm1, fabs, fmax, fmin,
                          gelu, hypot, log, log1p, log2, log10, logaddexp, logaddexp2, maximum,
                          minimum, mod, mul, neg, pow, rad2deg, reciprocal, relu, sigmoid, silu,
                          sin, sinc, sinh, softplus, sqrt, square, sub, tan, tanh)
from .indexing import add_at, gather, getitem, scatter_add
from .linalg import cholesky, det, inv, norm, slogdet, solve
from .matmul import dot, inner, linear, matmul, outer, tensordot
from .nn import cross_entropy, dropout, layer_norm, layer_norm_backward
from .reductions import cumsum, max, mean, min, prod, std, sum, var
from .selection import clip, where
from .shape import (append, array, array_split, asarray, atleast_1d, atleast_2d, atleast_3d,
                    c_, column_stack, concatenate, diag, diagonal, diff, dsplit, expand_dims, flip,
                    hsplit, hstack, kron, linspace, moveaxis, nan_to_num, pad, r_, ravel, repeat,
                    reshape, roll, rollaxis, rot90, row_stack, select, split, squeeze, stack,
                    swapaxes, tile, trace, transpose, tril, triu, vsplit, vstack)
from .softmax import log_softmax, logsumexp, softmax
from .sorting import (allclose, argmax, argmin, argsort, partition, round, sort,
                      take_along_axis)

operators.install()
tracer.array_of_list = array  # a list holding traced values, as an op's argument
