"""viz/labels.py, and the labels a recorded op gets. The expected labels are written by
hand from the ops' documented signatures (`ag.softmax(x, axis=-1, mask=None)`,
...): a label changes only when the op does. However an op is called (positionally, by
keyword, with its defaults spelled out), it gets the same label; the recorder reads the
op's public `op_name` and `parameters`, so renaming anything inside the tracer cannot
change a picture without failing here."""
import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.viz.labels import count_text, dtype_text, shape_text, size_text

X = np.arange(6.0).reshape(2, 3) / 7
MASK = np.array([[True, False, True], [False, True, True]])
LABELS = np.array([0, 2])

# (expected label, the same call written in several ways): x is traced (2, 3) float64
CALLS = [
    ("softmax axis=0", [lambda x: ag.softmax(x, axis=0), lambda x: ag.softmax(x, 0),
                        lambda x: ag.softmax(x, 0, None),
                        lambda x: ag.softmax(mask=None, x=x, axis=0)]),
    ("softmax", [lambda x: ag.softmax(x), lambda x: ag.softmax(x, -1),
                 lambda x: ag.softmax(x, axis=-1)]),
    ("softmax", [lambda x: ag.softmax(x, mask=MASK),  # the mask is an input, not a label
                 lambda x: ag.softmax(x, -1, MASK)]),
    ("log_softmax axis=0", [lambda x: ag.log_softmax(x, axis=0),
                            lambda x: ag.log_softmax(x, 0)]),
    ("logsumexp keepdims=True", [lambda x: ag.logsumexp(x, keepdims=True),
                                 lambda x: ag.logsumexp(x, -1, True)]),
    ("sum axis=1 keepdims=True", [lambda x: ag.sum(x, axis=1, keepdims=True),
                                  lambda x: ag.sum(x, 1, True)]),
    ("mean axis=(0, 1)", [lambda x: ag.mean(x, axis=(0, 1)),
                          lambda x: ag.mean(x, (0, 1), False)]),
    ("max", [lambda x: ag.max(x), lambda x: ag.max(x, None, False)]),
    ("mul (·, 0.125)", [lambda x: x * 0.125, lambda x: ag.mul(x, 0.125),
                        lambda x: ag.mul(b=0.125, a=x)]),
    ("sub (2, ·)", [lambda x: 2.0 - x, lambda x: ag.sub(2.0, x)]),
    ("pow (·, 2)", [lambda x: x ** 2, lambda x: ag.pow(x, 2)]),
    ("maximum (·, 0)", [lambda x: ag.maximum(x, 0), lambda x: np.maximum(x, 0)]),
    ("where (·, ·, 0)", [lambda x: ag.where(MASK, x, 0.0),
                         lambda x: ag.where(condition=MASK, x=x, y=0.0)]),
    ("transpose axes=(1, 0)", [lambda x: ag.transpose(x, (1, 0)),
                               lambda x: ag.transpose(x, axes=(1, 0))]),
    ("transpose", [lambda x: ag.transpose(x), lambda x: x.T]),
    ("swapaxes axis1=0 axis2=1", [lambda x: ag.swapaxes(x, 0, 1),
                                  lambda x: ag.swapaxes(x, axis2=1, axis1=0)]),
    ("reshape", [lambda x: ag.reshape(x, (3, 2)), lambda x: x.reshape(3, 2)]),  # shown by the shape
    ("expand_dims axis=1", [lambda x: ag.expand_dims(x, 1), lambda x: ag.expand_dims(x, axis=1)]),
    ("getitem [:, 0]", [lambda x: x[:, 0], lambda x: ag.getitem(x, (slice(None), 0))]),
    ("getitem [1]", [lambda x: x[1], lambda x: ag.getitem(x, index=1)]),
    ("concatenate axis=1", [lambda x: ag.concatenate([x, x], axis=1),
                            lambda x: ag.concatenate((x, x), 1)]),
    ("stack axis=0", [lambda x: ag.stack([x, x]),  # stack_arrays(axis, *xs): a required axis
                      lambda x: ag.stack([x, x], axis=0)]),
    ("layer_norm eps=1e-06", [lambda x: ag.layer_norm(x, X[0], X[1], eps=1e-6),
                              lambda x: ag.layer_norm(x, X[0], X[1], 1e-6)]),
    ("cross_entropy (·, [0, 2]) label_smoothing=0.1", [  # small constants are folded in
        lambda x: ag.cross_entropy(x, LABELS, label_smoothing=0.1),
        lambda x: ag.cross_entropy(x, LABELS, None, 0.1)]),
    ("cross_entropy (·, [0, 2]) ignore_index=2", [
        lambda x: ag.cross_entropy(x, LABELS, ignore_index=2),
        lambda x: ag.cross_entropy(x, LABELS, 2)]),
    ("gather (·, [0])", [lambda x: ag.gather(x, LABELS[:1]),
                         lambda x: ag.gather(table=x, indices=LABELS[:1])]),
]


def recorded_label(f):
    """The label of the last op recorded in a picture of f(X)."""
    op = ag.viz.trace(f, X).ops[-1]
    return (op.label + " " + op.extra).strip()


@pytest.mark.parametrize("expected, calls", CALLS, ids=[c[0] for c in CALLS])
def test_an_op_is_labelled_by_its_name_and_static_arguments_however_it_is_called(expected, calls):
    assert [recorded_label(f) for f in calls] == [expected] * len(calls)


@ag.primitive
def scale_by(x, *, s):
    """x · s with s keyword-only."""
    return x * s, lambda g: (g * s,)


@ag.primitive(name="clip_norm")
def clip_rows(x, max_norm, axis=-1):
    """Rows of x scaled down to norm at most max_norm (a user primitive; not differentiated)."""
    norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return x * np.minimum(1.0, max_norm / norm), None


def test_a_user_primitive_is_labelled_by_its_name_and_its_own_parameters():
    assert recorded_label(lambda x: clip_rows(x, 1.0, axis=0)) == "clip_norm (·, 1) axis=0"
    assert recorded_label(lambda x: clip_rows(x, max_norm=1.0)) == "clip_norm (·, 1)"
    assert recorded_label(lambda x: scale_by(x, s=3.0)) == "scale_by"  # keyword-only: not shown


def test_the_listing_shows_each_label_with_its_inputs():
    g = ag.viz.trace(lambda x: ag.sum(ag.softmax(x, axis=0, mask=MASK) * 0.5), X)
    ops = g.summary().split("\nops\n")[1].split("\noutputs\n")[0].splitlines()
    assert [line.split("  ")[2] for line in ops] == ["softmax axis=0", "mul (·, 0.5)", "sum"]
    assert "x:f64[2,3], mask:bool[2,3] -> %1:f64[2,3]" in ops[0]  # unbound: named by its parameter


def test_shapes_dtypes_sizes_and_counts_as_text():
    assert [shape_text(s) for s in [(), (5,), (2, 7, 16)]] == ["()", "(5,)", "(2, 7, 16)"]
    assert [dtype_text(d) for d in (np.float32, np.int64, bool, np.complex64)] == [
        "f32", "i64", "bool", "complex64"]
    assert [size_text(n) for n in (0, 1023, 1024, 1536, 5 * 2 ** 20, 3 * 2 ** 30)] == [
        "0 B", "1023 B", "1.0 KB", "1.5 KB", "5.0 MB", "3.0 GB"]
    assert [count_text(n) for n in (999, 1000, 251_552, 2_500_000)] == [
        "999", "1.0k", "251.6k", "2.50M"]
