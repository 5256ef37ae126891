"""einsum (autograd_lite/ops/einsum.py) beyond the op table: the subscripts written out
against numpy's own reading of them, random expressions (repeated letters, letters one
operand has alone, broadcast axes) against torch.einsum, and the errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autograd_lite as ag
from autograd_lite.ops.einsum import explicit_subscripts
from helpers.op_cases import assert_raises, each_error
from helpers.references import DTYPES, compare_with_torch


@pytest.mark.parametrize("subscripts, shapes, want", [
    ("ij,jk", [(2, 3), (3, 4)], (["ij", "jk"], "ik")),
    ("ba", [(2, 3)], (["ba"], "ab")),
    ("ii", [(3, 3)], (["ii"], "")),
    ("i,i->", [(3,), (3,)], (["i", "i"], "")),
    ("...ij,...jk", [(5, 2, 2, 3), (2, 3, 4)], (["abij", "bjk"], "abik")),
    ("...ij,jk->...ik", [(2, 3), (3, 4)], (["ij", "jk"], "ik")),
    ("b...,b->...b", [(2, 3, 4), (2,)], (["bac", "b"], "acb")),
    ("Ba, aB", [(2, 3), (3, 2)], (["Ba", "aB"], "")),
])
def test_explicit_subscripts_read_as_numpy_reads_them(subscripts, shapes, want, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    inputs, output = explicit_subscripts(subscripts, [len(s) for s in shapes])
    assert (inputs, output) == want
    np.testing.assert_allclose(np.einsum(",".join(inputs) + "->" + output, *arrays),
                               np.einsum(subscripts, *arrays), rtol=1e-13)


@st.composite
def expressions(draw):
    """(subscripts, shapes): 1 to 3 operands of 0 to 3 letters from 'ijkl' (repeats allowed)
    and an output of distinct letters among them; a letter's length 1 to 3, and an operand's
    axis sometimes of length 1 where einsum broadcasts it."""
    lengths = {c: draw(st.integers(1, 3)) for c in "ijkl"}
    letters = st.text(alphabet="ijkl", min_size=0, max_size=3)
    operands = draw(st.lists(letters, min_size=1, max_size=3))
    used = sorted(set("".join(operands)))
    output = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
    shapes = []
    for s in operands:
        repeated = {c for c in s if s.count(c) > 1}  # a diagonal needs equal lengths
        shapes.append(tuple(1 if c not in repeated and draw(st.integers(0, 4)) == 0
                            else lengths[c] for c in s))
    return ",".join(operands) + "->" + output, shapes


@settings(max_examples=60, deadline=None, derandomize=True)
@given(expression=expressions(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_expressions_match_torch(torch, expression, dtype, seed):
    subscripts, shapes = expression
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    compare_with_torch(torch, lambda *x: ag.einsum(subscripts, *x),
                       lambda *t: torch.einsum(subscripts, *t), *arrays)


ERRORS = [
    (lambda: ag.einsum(np.ones(3), ["i"], np.ones(3), [0]), TypeError,
     "einsum: subscripts must be a string such as 'ij,jk->ik', or each operand followed by a "
     "list of integer labels, got (['i'], [0])"),
    (lambda: ag.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5))), ValueError,
     "einsum: 'ij,jk->ik' does not fit operands of shapes (2, 3), (4, 5): "),
    (lambda: ag.einsum("ij->ik", np.ones((2, 3))), ValueError,
     "einsum: 'ij->ik' does not fit operands of shapes (2, 3): "),
    (lambda: ag.einsum("i,i", np.ones(3, np.float32), np.ones(3)), TypeError,
     "einsum: operands float32 (3,) and float64 (3,) have different dtypes"),
    (lambda: ag.einsum("i", {"x": 1.0}), TypeError,
     "einsum: operand 0 must be an array, a list or a number, got dict"),
]


@each_error(ERRORS)
def test_errors_name_the_op_and_shapes(make, error, message):
    assert_raises(make, error, message)
