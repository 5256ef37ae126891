"""vmap in the compositions where it once went wrong, each against the Python loop over the
examples: jvp and jacobian under vmap with unmapped weights (the one-copy rules of
batching/shared_parameters.py), element-wise ops and jacobian on a device's arrays, gather
with mapped indices, indexing with a mapped mask or integer index, cross_entropy and getitem under two
vmaps, stop_gradient, and dropout (vmap's `randomness`). Where the loop's answer has no
batched form, the error names vmap, the op and what to use."""
import numpy as np
import pytest

import autograd_lite as ag
from helpers.device_double import DeviceArray
from helpers.references import assert_close


def loop(f, *args, in_axes=0):
    """f of each example, stacked: the reference vmap must equal (in_axes: an int or None
    for every argument, or one per argument)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    results = [f(*(a if ax is None else np.take(a, e, axis=ax) for a, ax in zip(args, axes)))
               for e in range(n)]
    return ag.tree_map(lambda *leaves: None if leaves[0] is None else np.stack(leaves), *results)


def assert_trees_close(got, want, rtol=1e-12):
    got_leaves, want_leaves = ag.tree_leaves(got), ag.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert type(g) is np.ndarray, type(g)
        assert_close(g, w, rtol)


# ---- unmapped weights: jvp and jacobian through the one-copy rules --------------------------

RULES = pytest.mark.parametrize("rules_on", [True, False], ids=["rules on", "rules off"])
EXAMPLES = pytest.mark.parametrize("examples", [1, 3])


def weights(rng):
    return rng.standard_normal((4, 3)), rng.standard_normal(3), rng.uniform(0.5, 1.5, 3)


@RULES
@EXAMPLES
def test_jvp_under_vmap_with_unmapped_weights_equals_the_loop(rules_on, examples):
    """The tangent of each example's output along each example's tangent of the unmapped
    weights (once B times the tangent, through layer_norm_each's and linear_each's rules)."""
    rng = np.random.default_rng(0)
    w, b, scale = weights(rng)
    xs = rng.standard_normal((examples, 2, 4))
    tangents = [rng.standard_normal((examples,) + np.shape(a)) for a in (w, b, scale)]

    def pushed(x, w, b, scale, tw, tb, ts):
        return ag.jvp(lambda w, b, s: ag.layer_norm(ag.linear(x, w, b), s, b),
                      (w, b, scale), (tw, tb, ts))
    axes = (0, None, None, None, 0, 0, 0)
    with ag.fast_rules(rules_on):
        got = ag.vmap(pushed, in_axes=axes)(xs, w, b, scale, *tangents)
        want = loop(pushed, xs, w, b, scale, *tangents, in_axes=axes)
    assert_trees_close(got, want)


@RULES
@EXAMPLES
def test_jacobian_under_vmap_in_unmapped_weights_is_each_examples(rules_on, examples):
    rng = np.random.default_rng(1)
    w, b, scale = weights(rng)
    xs = rng.standard_normal((examples, 2, 4))

    def layer(x, w, b, scale):
        return ag.tanh(ag.layer_norm(ag.linear(x, w, b), scale, b))
    jacobian = ag.jacobian(layer, argnums=(1, 2, 3))
    axes = (0, None, None, None)
    with ag.fast_rules(rules_on):
        got = ag.vmap(jacobian, in_axes=axes)(xs, w, b, scale)
        want = loop(jacobian, xs, w, b, scale, in_axes=axes)
    assert [g.shape for g in got] == [(examples, 2, 3, 4, 3), (examples, 2, 3, 3),
                                      (examples, 2, 3, 3)]
    assert_trees_close(got, want)


def test_stop_gradient_under_vmap_keeps_the_examples_and_stops_the_gradient():
    xs = np.random.default_rng(2).standard_normal((3, 4))
    got = ag.vmap(ag.grad(lambda x: ag.sum(ag.stop_gradient(x) * x)))(xs)
    assert_trees_close(got, xs)  # d/dx (c · x) = c, c = x held
    assert_trees_close(ag.vmap(ag.stop_gradient)(xs), xs)


# ---- a device's arrays ----------------------------------------------------------------------

def on_host(x):
    return ag.to_device(x, "cpu")


def test_element_wise_ops_on_a_devices_arrays_align_each_examples(device_double):
    """A mapped operand of lower rank gets its examples' axis in front of its own, as on
    numpy's arrays; an unmapped device array broadcasts against every example."""
    rng = np.random.default_rng(3)
    a, c, dy = rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 4)), \
        rng.standard_normal((3, 4))
    got = ag.vmap(lambda a, c: a * c)(DeviceArray(a), DeviceArray(c))
    assert type(got) is DeviceArray
    assert_trees_close(on_host(got), loop(lambda a, c: a * c, a, c))
    v = rng.standard_normal((3, 4))
    got = ag.vmap(lambda v: v * DeviceArray(dy))(DeviceArray(v))
    assert got.shape == (3, 3, 4)
    assert_trees_close(on_host(got), loop(lambda v: v * dy, v))


def test_jacobian_of_einsum_on_a_devices_arrays(device_double):
    x = np.random.default_rng(4).standard_normal((2, 3))
    for subscripts in ("ij->j", "ij->", "ij->ji"):
        jacobian = ag.jacobian(lambda a: ag.einsum(subscripts, a))
        got = jacobian(DeviceArray(x))
        assert type(got) is DeviceArray
        assert_trees_close(on_host(got), jacobian(x))


# ---- indexing with mapped indices -----------------------------------------------------------

def test_a_mapped_bool_mask_selects_each_examples_entries():
    x = np.arange(8.0).reshape(2, 2, 2)
    masks = np.array([[True, False], [False, True]])
    got = ag.vmap(lambda x, m: x[m])(x, masks)
    assert_trees_close(got, np.array([[[0.0, 1.0]], [[6.0, 7.0]]]))  # the loop's, below
    assert_trees_close(got, loop(lambda x, m: x[m], x, masks))
    # over two axes, an unmapped x, and the gradient: each example's own entries
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    masks = rng.random((2, 3, 4)) < 0.5
    masks[:, 0, :] = [True, True, False, False]  # two entries selected by each, below
    masks[:, 1:, :] = False
    masks[0, 2, 3] = masks[1, 1, 0] = True
    masks[0, 0, 0] = masks[1, 0, 1] = False

    def picked(x, m):  # x a numpy array here: numpy's x[m] cannot take a mapped m
        return ag.sum(ag.tanh(ag.getitem(x, m)) * np.arange(1.0, 3.0))
    for f in (ag.getitem, ag.grad(picked)):
        assert_trees_close(ag.vmap(f, in_axes=(None, 0))(x, masks),
                           loop(f, x, masks, in_axes=(None, 0)))


def test_a_mapped_bool_mask_selecting_different_counts_is_refused(device_double):
    x = np.arange(8.0).reshape(2, 4)
    masks = np.array([[True, False, True, False], [True, False, False, False]])
    with pytest.raises(ValueError, match=r"vmap: getitem with a mapped bool mask selects "
                                         r"\[1, 2\] entries .* use ag.where\(mask, x, 0\)"):
        ag.vmap(lambda x, m: x[m])(x, masks)
    with pytest.raises(ValueError, match=r"selects \[1, 2\] entries"):  # on a device: no
        ag.vmap(lambda x, m: ag.getitem(x, m))(DeviceArray(x), DeviceArray(masks))  # host copy


# One example's index with mapped entries beside others, by numpy's placement rule: advanced
# entries (arrays, and ints beside them) side by side keep their place (x[:, i]); apart, their
# axes go first (x[i, :, j]). Each example's x is (3, 4, 5); i and j lie in [-3, 3); m is a bool
# mask over 4 entries that selects 2 in every example.
INDEX_FORMS = {
    "x[:, i]": lambda x, i, j, m: ag.getitem(x, (slice(None), i)),
    "x[i, j]": lambda x, i, j, m: ag.getitem(x, (i, j)),
    "x[i, :, j]": lambda x, i, j, m: ag.getitem(x, (i, slice(None), j)),
    "x[1, :, i]": lambda x, i, j, m: ag.getitem(x, (1, slice(None), i)),
    "x[..., j, None]": lambda x, i, j, m: ag.getitem(x, (Ellipsis, j, None)),
    "x[None, :, m]": lambda x, i, j, m: ag.getitem(x, (None, slice(None), m)),
    "x[i, m]": lambda x, i, j, m: ag.getitem(x, (i, m)),
    "x[::-1, m, j]": lambda x, i, j, m: ag.getitem(x, (slice(None, None, -1), m, j)),
}


def index_arguments(rng, examples=2):
    x = rng.standard_normal((examples, 3, 4, 5))
    i, j = rng.integers(-3, 3, (examples, 2)), rng.integers(-3, 3, (examples, 2, 1))
    m = np.zeros((examples, 4), bool)
    for row in m:
        row[rng.choice(4, 2, replace=False)] = True
    return x, i, j, m


def index_compositions(index):
    """The value, the gradient of Σ tanh(x[index])², the jvp along cos(x) and the hessian of
    Σ x[index]³: each a function of (x, i, j, m)."""
    def squashed(x, *indices):
        return ag.sum(ag.tanh(index(x, *indices)) ** 2)

    def pushed(x, *indices):
        return ag.jvp(lambda x: index(ag.sin(x), *indices), (x,), (ag.cos(x),))
    return (index, ag.grad(squashed), pushed,
            ag.hessian(lambda x, *indices: ag.sum(index(x, *indices) ** 3)))


MAPPINGS = [(0, 0, 0, 0), (None, 0, 0, 0), (0, None, 0, None), (2, 0, None, 0)]


@RULES
@pytest.mark.parametrize("form", INDEX_FORMS)
def test_mapped_arrays_inside_an_index_tuple_give_the_loops_entries(form, rules_on):
    """Value, gradient, jvp and hessian at several mappings (x shared, some index entries
    shared, x's examples on another axis), against the loop."""
    x, i, j, m = index_arguments(np.random.default_rng(17))
    with ag.fast_rules(rules_on):
        for axes in MAPPINGS:
            args = (np.moveaxis(x, 0, 2) if axes[0] == 2 else x[0] if axes[0] is None else x,
                    *(a if b is not None else a[0] for a, b in zip((i, j, m), axes[1:])))
            for f in index_compositions(INDEX_FORMS[form]):
                assert_trees_close(ag.vmap(f, in_axes=axes)(*args),
                                   loop(f, *args, in_axes=axes))


@pytest.mark.parametrize("form", INDEX_FORMS)
def test_mapped_arrays_inside_an_index_tuple_under_two_vmaps(form):
    """Each entry mapped at both levels, at the outer only or at the inner only."""
    rng = np.random.default_rng(18)
    x, i, j, m = index_arguments(rng, examples=6)
    grouped = [a.reshape((2, 3) + a.shape[1:]) for a in (x, i, j, m)]
    index = INDEX_FORMS[form]
    for outer, inner in (((0, 0, 0, 0), (0, 0, 0, 0)), ((0, None, 0, 0), (None, 0, 0, None)),
                         ((None, 0, 0, 0), (0, 0, None, 0))):
        args = [a if o is not None and n is not None else a[:, 0] if o is not None
                else a[0] for a, o, n in zip(grouped, outer, inner)]
        for f in index_compositions(index)[:2]:
            got = ag.vmap(ag.vmap(f, in_axes=inner), in_axes=outer)(*args)
            want = loop(lambda *a: loop(f, *a, in_axes=inner), *args, in_axes=outer)
            assert_trees_close(got, want)


def test_mapped_arrays_inside_an_index_tuple_on_a_devices_arrays(device_double):
    x, i, j, m = index_arguments(np.random.default_rng(19))
    for form in ("x[:, i]", "x[i, :, j]", "x[None, :, m]"):
        for f in index_compositions(INDEX_FORMS[form])[:2]:
            got = ag.vmap(f)(*(DeviceArray(a) for a in (x, i, j, m)))
            assert type(got) is DeviceArray
            assert_trees_close(on_host(got), loop(f, x, i, j, m))


@pytest.mark.parametrize("form", ["x[:, i]", "x[i, :, j]", "x[1, :, i]", "x[None, :, m]"])
def test_add_at_at_each_examples_index_tuple_equals_the_loop(form, device_double):
    """getitem's adjoint, add_at(v, index, x's shape), with mapped entries in the index: its
    value and gradient, one and two vmaps, numpy's arrays and the device double's."""
    rng = np.random.default_rng(21)
    x, i, j, m = index_arguments(rng, examples=4)
    parts = {"x[:, i]": (slice(None), "i"), "x[i, :, j]": ("i", slice(None), "j"),
             "x[1, :, i]": (1, slice(None), "i"), "x[None, :, m]": (None, slice(None), "m")}[form]

    def added(v, i, j, m):
        named = {"i": i, "j": j, "m": m}
        return ag.add_at(v, tuple(named.get(p, p) if isinstance(p, str) else p for p in parts),
                         (3, 4, 5))
    v = rng.standard_normal((4,) + INDEX_FORMS[form](x[0], i[0], j[0], m[0]).shape)
    squashed = ag.grad(lambda v, *index: ag.sum(ag.tanh(added(v, *index)) ** 2))
    for f in (added, squashed):
        for axes in ((0, 0, 0, 0), (None, 0, None, 0)):
            args = [a if b is not None else a[0] for a, b in zip((v, i, j, m), axes)]
            want = loop(f, *args, in_axes=axes)
            assert_trees_close(ag.vmap(f, in_axes=axes)(*args), want)
            on_device = ag.vmap(f, in_axes=axes)(*(DeviceArray(a) for a in args))
            assert_trees_close(on_host(on_device), want)
        grouped = [a.reshape((2, 2) + a.shape[1:]) for a in (v, i, j, m)]
        assert_trees_close(ag.vmap(ag.vmap(f))(*grouped),
                           loop(lambda *a: loop(f, *a), *grouped))


def test_an_index_tuple_under_vmap_refuses_what_the_loop_refuses():
    x, i, j, m = index_arguments(np.random.default_rng(20))
    with pytest.raises(IndexError, match=r"^vmap: getitem: index 7 is out of bounds for axis 1 "
                                         r"with size 4 \(each example's x is \(3, 4, 5\)\)$"):
        ag.vmap(lambda x, i: x[:, i])(x, np.array([[0, 1], [-4, 7]]))
    with pytest.raises(IndexError, match=r"^vmap: getitem: each example's index arrays could "
                                         r"not be broadcast together, with shapes"):
        ag.vmap(lambda x, i, j: x[i, :, j[:, 0, None].T])(x, i, np.zeros((2, 3, 1), int))
    with pytest.raises(IndexError, match=r"^vmap: getitem: each example's bool index \(4,\) "
                                         r"must match the axes 0 to 0 of its x \(3, 4, 5\)"):
        ag.vmap(lambda x, m: x[m, 0])(x, m)


def test_gather_under_vmap_refuses_negative_indices_as_gather_does(device_double):
    tables, indices = np.arange(6.0).reshape(2, 3, 1), np.array([[0], [-1]])
    f = ag.grad(lambda t, i: ag.sum(ag.gather(t, i)))
    message = r"gather: indices must lie in \[0, 3\), got values from -1 to 0$"
    with pytest.raises(IndexError, match=message):
        ag.vmap(f)(tables, indices)
    with pytest.raises(IndexError, match=message):  # the numbers, not a device's arrays
        ag.vmap(f)(DeviceArray(tables), DeviceArray(indices))
    with pytest.raises(IndexError, match=r"gather: indices must lie in \[0, 3\)"):
        f(tables[1], indices[1])  # the loop's example 1
    with pytest.raises(IndexError, match=r"scatter_add: indices must lie in \[0, 3\)"):
        ag.vmap(lambda v, i: ag.scatter_add(v, i, 3))(np.ones((2, 1, 2)), indices)
    good = np.array([[0, 2, 2], [1, 1, 0]])
    assert_trees_close(ag.vmap(f)(tables, good), loop(f, tables, good))


def test_nested_vmap_of_getitem_with_an_integer_index_mapped_at_both_levels():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4, 5))
    indices = np.array([[0, -1, 3], [2, 2, -4]])
    f = lambda x, i: ag.getitem(x, i)  # noqa: E731
    g = ag.grad(lambda x, i: ag.sum(ag.tanh(x[i]) ** 2))
    for h in (f, g):
        got = ag.vmap(ag.vmap(h))(x, indices)
        assert_trees_close(got, loop(lambda x, i: loop(h, x, i), x, indices))
    # the index mapped at the outer level only, x at the inner only
    got = ag.vmap(ag.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(x[0], indices)
    want = loop(lambda i: loop(lambda x: f(x, i), x[0]), indices)
    assert_trees_close(got, want)
    with pytest.raises(IndexError, match=r"vmap: getitem: index 7 is out of bounds for axis "
                                         r"0 with size 4 \(each example's x is \(4, 5\)\)"):
        ag.vmap(ag.vmap(f))(x, indices + 4)


def test_nested_vmap_of_cross_entropy_with_ignore_index():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((2, 3, 4, 5))
    labels = rng.integers(0, 5, (2, 3, 4))
    labels[0, 1, :2] = -100
    labels[1, 2, :] = -100  # an example that counts no label: NaN, as the op gives
    f = lambda l, y: ag.cross_entropy(l, y, -100)  # noqa: E731
    g = ag.grad(lambda l, y: ag.cross_entropy(ag.tanh(l), y, -100, 0.1))
    for h in (f, g):
        got = ag.vmap(ag.vmap(h))(logits, labels)
        want = loop(lambda l, y: loop(h, l, y), logits, labels)
        np.testing.assert_allclose(got, want, rtol=1e-12)  # NaN where the loop's is
    with pytest.raises(IndexError, match=r"cross_entropy: labels must lie in \[0, 5\)"):
        ag.vmap(ag.vmap(f))(logits, labels + 7)


@RULES
def test_an_example_that_counts_no_label_has_the_loops_zero_gradient(rules_on):
    """Its loss is NaN and its gradient 0 also under a NaN cotangent (tanh(loss)²), in the
    loop (the op) and under vmap (cross_entropy's batching rule), first and second order."""
    rng = np.random.default_rng(16)
    logits, labels = rng.standard_normal((3, 4, 5)), rng.integers(0, 5, (3, 4))
    labels[1] = -100
    squashed = lambda l, y: ag.tanh(ag.cross_entropy(l, y, -100)) ** 2  # noqa: E731
    with ag.fast_rules(rules_on):
        for f in (squashed, ag.grad(squashed), ag.hessian(squashed)):
            got, want = ag.vmap(f)(logits, labels), loop(f, logits, labels)
            np.testing.assert_allclose(got, want, rtol=1e-12)  # NaN where the loop's is
        assert np.isnan(want[1]).sum() == 0 and np.array_equal(want[1], np.zeros((4, 5, 4, 5)))


# ---- errors under vmap name vmap ------------------------------------------------------------

def test_argmax_and_argmin_under_vmap_are_each_examples():
    x = np.random.default_rng(8).standard_normal((3, 4, 5))
    for f in (lambda x: x.argmax(), lambda x: np.argmin(x, 1), lambda x: x.argmax(-1),
              lambda x: np.argmax(x, 0, keepdims=True)):
        got = ag.vmap(f)(x)
        assert got.dtype.kind == "i"
        np.testing.assert_array_equal(got, loop(f, x))
        np.testing.assert_array_equal(ag.vmap(ag.vmap(f), in_axes=2)(x[..., None]),
                                      loop(lambda x: loop(f, x), np.moveaxis(x[..., None], 2, 0)))
    # an index found by argmax picks the gradient's entry, per example
    g = ag.vmap(ag.grad(lambda x: ag.sum(x[np.argmax(ag.stop_gradient(x), 0)]) ** 2))(x)
    assert_trees_close(g, loop(ag.grad(lambda x: ag.sum(x[np.argmax(x, 0)]) ** 2), x))


def test_errors_under_vmap_name_vmap_the_op_and_what_to_use():
    x = np.random.default_rng(9).standard_normal((3, 4, 5))
    with pytest.raises(AttributeError, match=r"^vmap: x.nonzero is not defined on a value under "
                                             r"vmap \(\(4, 5\) float64 per example\): write the "
                                             r"mapped function with autograd_lite's ops"):
        ag.vmap(lambda x: x.nonzero())(x)
    with pytest.raises(TypeError, match=r"no rule for np.unique on values under vmap"):
        ag.vmap(np.unique)(x)
    with pytest.raises(IndexError, match=r"^vmap: getitem: index 5 is out of bounds for axis 0 "
                                         r"with size 4 \(each example's x is \(4, 5\)\)$"):
        ag.vmap(lambda x: x[5])(x)
    with pytest.raises(IndexError, match=r"^vmap: getitem: index 7 is out of bounds for axis 1"):
        ag.vmap(lambda x: x[:, 7])(x)
    with pytest.raises(IndexError, match=r"^vmap: take_along_axis, computing every example at "
                                         r"once: take_along_axis: indices must lie in"):
        ag.vmap(lambda x: ag.take_along_axis(x, np.array([[9]]), 1))(x)
    with pytest.raises(TypeError, match=r"^vmap: a mapped value \(\(\) int64 per example\) "
                                        r"cannot become a plain numpy array .* indexing a numpy "
                                        r"array with it .* write ag.getitem\(x, i\) to index"):
        ag.vmap(lambda i: x[0][i])(np.array([0, 1, 2]))  # numpy's x[i]: vmap cannot see it
    with pytest.raises(TypeError, match=r"^vmap: a mapped value \(\(4,\) bool per example\) .* "
                                        r"ag.getitem\(x, i\)"):
        ag.vmap(lambda m: x[0, :, 0][m])(x[:, :, 0] > 0)


# ---- random ops: vmap's randomness ----------------------------------------------------------

def two_dropouts(x, w, rng):
    """Two draws from one generator per example: a loop's draws for example e start where
    example e - 1's ended."""
    h = ag.tanh(ag.dropout(x, 0.3, rng) @ w)
    return ag.sum(ag.dropout(h, 0.5, rng) ** 2)


def looped_with(f, seed, *args, in_axes):
    """The loop over the examples, every example drawing from one generator in turn; and
    that generator's next number."""
    rng = np.random.default_rng(seed)
    return loop(lambda *a: f(*a, rng), *args, in_axes=in_axes), rng.random()


def mapped_with(f, seed, *args, in_axes, randomness="different"):
    rng = np.random.default_rng(seed)
    out = ag.vmap(lambda *a: f(*a, rng), in_axes=in_axes, randomness=randomness)(*args)
    return out, rng.random()


@pytest.mark.parametrize("f", [
    lambda x, w, rng: ag.dropout(x, 0.5, rng), two_dropouts,
    ag.grad(two_dropouts, argnums=(0, 1)), ag.grad(ag.checkpoint(two_dropouts), argnums=(0, 1)),
    lambda x, w, rng: ag.jvp(lambda x: two_dropouts(x, w, rng), (x,), (np.ones_like(x),))],
    ids=["one dropout", "two dropouts", "grad", "grad of checkpoint", "jvp"])
def test_randomness_different_gives_each_example_the_loops_draws(f):
    rng = np.random.default_rng(12)
    xs, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    (got, after), (want, after_loop) = (g(f, 3, xs, w, in_axes=(0, None))
                                        for g in (mapped_with, looped_with))
    assert_trees_close(got, want, 1e-13)
    assert after == after_loop  # the generator left where the loop leaves it


def one_dropout(x, w, rng):
    return ag.sum(ag.sin(ag.dropout(x, 0.5, rng)) @ w)


@pytest.mark.parametrize("f", [one_dropout, two_dropouts], ids=["one dropout", "two dropouts"])
@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_a_checkpoint_under_vmap_recomputed_after_the_call_draws_what_it_drew(f, mode):
    """grad (or jvp) of the sum of vmap(checkpoint(f), randomness="different"): the pullback
    recomputes f after the vmap call has returned, and must draw each example's masks again;
    against the loop over the examples, drawing from one generator in turn."""
    rng = np.random.default_rng(15)
    xs, w, v = (rng.standard_normal(s) for s in ((4, 3), (3, 5), (4, 3)))

    def summed(g, rng):
        return lambda xs, w: ag.sum(ag.vmap(lambda x, w: g(x, w, rng), in_axes=(0, None),
                                            randomness="different")(xs, w))
    gen = np.random.default_rng(3)
    if mode == "grad":
        got = ag.grad(summed(ag.checkpoint(f), gen), argnums=(0, 1))(xs, w)
    else:
        got = tuple(map(np.asarray, ag.jvp(lambda xs: summed(ag.checkpoint(f), gen)(xs, w),
                                           (xs,), (v,))))
    after = gen.random()
    gen = np.random.default_rng(3)
    if mode == "grad":
        rows = [ag.grad(lambda x, w: f(x, w, gen), argnums=(0, 1))(x, w) for x in xs]
        want = np.stack([r[0] for r in rows]), sum(r[1] for r in rows)
    else:
        pairs = [ag.jvp(lambda x: f(x, w, gen), (x,), (t,)) for x, t in zip(xs, v)]
        want = np.asarray(sum(p[0] for p in pairs)), np.asarray(sum(p[1] for p in pairs))
    assert_trees_close(got, want, 1e-13)
    assert after == gen.random()  # the generator left where the loop leaves it


def test_randomness_under_two_vmaps_and_on_a_device(device_double):
    rng = np.random.default_rng(13)
    xss = rng.standard_normal((2, 3, 4))
    g = np.random.default_rng(4)
    got = ag.vmap(ag.vmap(lambda x: ag.dropout(x, 0.5, g), randomness="different"),
                  randomness="different")(xss)
    g = np.random.default_rng(4)
    assert_trees_close(got, loop(lambda xs: loop(lambda x: ag.dropout(x, 0.5, g), xs), xss))
    g = np.random.default_rng(4)
    on_device = ag.vmap(lambda x: ag.dropout(x, 0.5, g), randomness="different")(
        DeviceArray(xss[0]))
    g = np.random.default_rng(4)
    assert type(on_device) is DeviceArray
    assert_trees_close(on_host(on_device), loop(lambda x: ag.dropout(x, 0.5, g), xss[0]))


def test_randomness_same_draws_one_mask_for_every_example():
    xs = np.random.default_rng(14).standard_normal((4, 6)) + 3.0  # no zero entries
    out, after = mapped_with(lambda x, rng: ag.dropout(x, 0.5, rng), 5, xs, in_axes=0,
                             randomness="same")
    rng = np.random.default_rng(5)
    kept = ag.dropout(np.ones(6), 0.5, rng)
    assert_trees_close(out, xs * kept)
    assert after == rng.random()


def test_a_random_op_under_vmap_is_refused_by_default_naming_the_option():
    xs = np.ones((3, 4))
    with pytest.raises(ValueError, match=r"^vmap: dropout draws from a generator under vmap, "
                                         r"and randomness='error' \(vmap's default\) refuses "
                                         r"that: pass randomness='different' .* or "
                                         r"randomness='same'"):
        ag.vmap(lambda x: ag.dropout(x, 0.5, np.random.default_rng(0)))(xs)
    assert_trees_close(ag.vmap(lambda x: ag.dropout(x, 0.5, None))(xs), xs)  # inference
    with pytest.raises(ValueError, match=r"randomness='error'"):  # an inner call's default
        ag.vmap(ag.vmap(lambda x: ag.dropout(x, 0.5, np.random.default_rng(0))),
                randomness="different")(xs[None])
    with pytest.raises(ValueError, match=r"^vmap: randomness must be 'error', 'different' or "
                                         r"'same', got 'differ'"):
        ag.vmap(lambda x: x, randomness="differ")
    g = np.random.default_rng(0)

    def drawn_at_two_depths(x):
        y = ag.dropout(x, 0.5, g)
        return ag.vmap(lambda r: ag.dropout(r, 0.5, g), randomness="different")(y)
    with pytest.raises(ValueError, match=r"draws from one generator under different vmap "
                                         r"calls .* a generator of its own in each"):
        ag.vmap(drawn_at_two_depths, randomness="different")(np.ones((2, 3, 4)))


# ---- the models ------------------------------------------------------------------------------

def model_and_examples(name, dropout):
    """A tiny model of the family, the loss of one example, and three examples."""
    from helpers.tiny_models import tiny_classifier, tiny_lm, tiny_transformer
    from models import classifier, lm, transformer
    rng = np.random.default_rng(15)
    if name == "transformer":
        def loss(p, src, tgt, rng):
            logits = transformer.apply(p, src[None], tgt[None], 0, rng is not None, rng)
            return ag.cross_entropy(logits, tgt[None], 0)
        return (tiny_transformer(0, dropout=dropout), loss,
                (rng.integers(1, 7, (3, 5)), rng.integers(0, 9, (3, 4))))
    if name == "classifier":
        def loss(p, ids, label, rng):
            return ag.cross_entropy(classifier.apply(p, ids[None], rng is not None, rng),
                                    label[None])
        return (tiny_classifier(0, dropout=dropout), loss,
                (rng.integers(1, 20, (3, 6)), rng.integers(0, 3, 3)))

    def loss(p, ids, targets, rng):
        return ag.cross_entropy(lm.apply(p, ids[None], rng is not None, rng), targets[None])
    return tiny_lm(0, dropout=dropout), loss, (rng.integers(0, 23, (3, 7)),
                                               rng.integers(0, 23, (3, 7)))


MODELS = pytest.mark.parametrize("name", ["transformer", "classifier", "lm"])


@RULES
@MODELS
def test_per_example_gradients_of_a_model_in_training_equal_the_loops(name, rules_on):
    """Dropout in every layer: each example its own masks, the loop's (randomness="different")."""
    p, loss, data = model_and_examples(name, dropout=0.2)
    grad = ag.grad(loss)
    with ag.fast_rules(rules_on):
        got, after = mapped_with(lambda *a: grad(p, *a), 8, *data, in_axes=0)
        want, after_loop = looped_with(lambda *a: grad(p, *a), 8, *data, in_axes=0)
    assert after == after_loop
    largest = max(np.abs(w).max() for w in ag.tree_leaves(want) if w is not None)
    for g, w in zip(ag.tree_leaves(got), ag.tree_leaves(want)):  # (the attention's key bias:
        if w is not None:  # a gradient of 0, rounding noise in both)
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12 * largest)


@RULES
def test_per_example_jvp_and_jacobian_of_the_lm_in_its_unmapped_parameters(rules_on):
    """jvp of lm.apply along a tangent of its parameters (once B times the tangent), and the
    Jacobian in the parameters (once a Batched at every leaf)."""
    from models import lm
    p, _, (ids, _) = model_and_examples("lm", dropout=0.0)
    tangent = ag.tree_map(lambda a: np.full_like(a, 0.01) if ag.is_differentiable(a) else None,
                          p)

    def pushed(ids):
        return ag.jvp(lambda q: lm.apply(q, ids[None])[0, -1], (p,), (tangent,))[1]

    def jacobian(ids):
        return ag.jacobian(lambda q: lm.apply(q, ids[None])[0, -1, :4])(p)
    with ag.fast_rules(rules_on):
        for f in (pushed, jacobian):
            got, want = ag.vmap(f)(ids), loop(f, ids)
            largest = max(np.abs(w).max() for w in ag.tree_leaves(want) if w is not None)
            for g, w in zip(ag.tree_leaves(got), ag.tree_leaves(want)):
                if w is not None:
                    assert type(g) is np.ndarray
                    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12 * largest)
