"""The embedding lookup's adjoint compiled with numba (see numba_kernels.py): segment_sum
adds the rows that share an index in one pass over the rows, in their order (no sort; the
same bits every run).

gather_rows stays numpy's np.take (a copy of each row, which a compiled loop copying row
slices does not beat: tests/benchmarks/README.md has the timings)."""
import math

import numpy as np

from . import numpy_kernels
from .numba_compile import compiled

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@compiled()
def _segment_sum(rows, flat, out, seen):
    """out[flat[i]] = Σ rows[i] in the order of i: the first row of an index copied (as
    numpy_kernels does: -0.0 stays -0.0), the others added to it."""
    for i in range(flat.shape[0]):
        k = flat[i]
        if seen[k]:
            for j in range(rows.shape[1]):
                out[k, j] += rows[i, j]
        else:
            seen[k] = True
            for j in range(rows.shape[1]):
                out[k, j] = rows[i, j]


def segment_sum(values, indices, n):
    """numpy_kernels.segment_sum in one compiled pass over the rows in their order, without
    numpy's sort: rows met once are copied, rows sharing an index added one after the other
    in the order they come. numpy's np.add.reduceat adds a run pairwise (the first row plus
    the pairwise sum of the others), so where an index repeats the bits may differ from
    numpy's by rounding, never from run to run."""
    if values.dtype not in _FLOATS:
        return numpy_kernels.segment_sum(values, indices, n)
    row_shape = values.shape[indices.ndim:]
    out = np.zeros((n,) + row_shape, dtype=values.dtype)
    if indices.size == 0 or out.size == 0:
        return out
    rows = np.ascontiguousarray(values).reshape(indices.size, math.prod(row_shape))
    _segment_sum(rows, indices.reshape(-1), out.reshape(n, -1), np.zeros(n, np.bool_))
    return out
