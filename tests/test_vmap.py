"""vmap (autograd_lite/batching): every row of the op table under vmap equals a Python loop
over the examples (values, first and second order; float32 and float64; the examples on
axis 0, on the last axis, and beside unmapped arguments); the compositions with the other
transformations; the errors."""
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from helpers.op_cases import Float
from helpers.op_table import CASES
from helpers.references import DTYPES, RTOL, assert_close, is_float

EXAMPLES = 3
# rows with two float arguments or more also run with the first mapped and the others not
ROWS = [(c, layout) for c in CASES for layout in ("axis 0", "last axis")] + \
    [(c, "unmapped") for c in CASES if sum(isinstance(a, Float) for a in c.args) >= 2]


def examples(case, dtype, seed=0):
    """EXAMPLES draws of the row's arguments (constants, such as masks, the same in each)."""
    rng = np.random.default_rng(seed)
    return [case.arguments(rng, dtype) for _ in range(EXAMPLES)]


def first_float(args):
    return next(k for k, a in enumerate(args) if is_float(a))


def batched_arguments(draws, layout):
    """The vmap call's arguments and in_axes for one layout: every float argument stacked on
    axis 0 or on its last axis; or the first float one stacked and the others unmapped
    (example 0's)."""
    args, axes = [], []
    mapped_alone = first_float(draws[0])
    for k, first in enumerate(draws[0]):
        if not is_float(first) or (layout == "unmapped" and k != mapped_alone):
            args.append(first)
            axes.append(None)
            continue
        stacked = np.stack([d[k] for d in draws])
        if layout == "last axis":
            stacked = np.moveaxis(stacked, 0, -1)
        args.append(stacked)
        axes.append(0 if layout != "last axis" else -1)
    return args, tuple(axes)


def per_example(draws, layout):
    """Each example's arguments as the loop sees them: with the layout "unmapped", its first
    float argument and example 0's others."""
    if layout != "unmapped":
        return draws
    k = first_float(draws[0])
    return [[d[k] if i == k else a for i, a in enumerate(draws[0])] for d in draws]


def first_order(case):
    """A scalar function of the row's arguments and its gradient in its float ones."""
    def scalar(*a):
        return ag.sum(ag.tanh(case.ours(*a)) ** 2)

    def gradients(*a):
        positions = tuple(k for k, x in enumerate(a) if ag.is_differentiable(x))
        return ag.gradient(scalar, *a, argnums=positions)
    return gradients


def second_order(case):
    """Gradients of Σ tanh(first-order gradients)²: second derivatives of the row's op."""
    gradients = first_order(case)

    def squared(*a):
        return sum(ag.sum(ag.tanh(g) ** 2) for g in gradients(*a))

    def of_squared(*a):
        positions = tuple(k for k, x in enumerate(a) if ag.is_differentiable(x))
        return ag.gradient(squared, *a, argnums=positions)
    return of_squared


def assert_equals_loop(f, draws, layout, dtype, what):
    """vmap of f against the loop. The table's dropout row draws from a generator it makes
    in each call, so the loop's examples share one mask: vmap's randomness="same"."""
    args, axes = batched_arguments(draws, layout)
    batched = ag.vmap(f, in_axes=axes, randomness="same")(*args)
    looped = [f(*a) for a in per_example(draws, layout)]
    batched_leaves, looped_leaves = ag.tree_leaves(batched), [ag.tree_leaves(x) for x in looped]
    assert len(batched_leaves) == len(looped_leaves[0]), what
    for i, leaf in enumerate(batched_leaves):
        want = np.stack([np.asarray(x[i]) for x in looped_leaves])
        assert isinstance(leaf, np.ndarray), (what, type(leaf))
        assert leaf.dtype == want.dtype == dtype, (what, leaf.dtype, want.dtype)
        assert_close(leaf, want, 10 * RTOL[np.dtype(dtype)], f"{what}, leaf {i}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case, layout", ROWS, ids=[f"{c.name} {layout}" for c, layout in ROWS])
def test_op_table_row_equals_a_loop(case, layout, dtype):
    draws = examples(case, dtype)
    assert_equals_loop(case.ours, draws, layout, dtype, "value")
    assert_equals_loop(first_order(case), draws, layout, dtype, "first order")
    if case.second_order:
        assert_equals_loop(second_order(case), draws, layout, dtype, "second order")


# ---- compositions ---------------------------------------------------------------------------

class Layer(NamedTuple):
    w: np.ndarray  # (3, 4)
    b: np.ndarray  # (4,)
    scale: np.ndarray  # (4,)


def layer(p, x):
    """(3,) -> (4,): a dense layer, layer norm and softmax (ops with fast rules among them)."""
    h = ag.tanh(x @ p.w + p.b)
    return ag.softmax(ag.layer_norm(h, p.scale, p.b), -1) * h


def loss(p, x):
    return ag.sum(layer(p, x) ** 2)


@pytest.fixture
def batch():
    rng = np.random.default_rng(1)
    p = Layer(rng.standard_normal((3, 4)), rng.standard_normal(4), rng.uniform(0.5, 1.5, 4))
    return p, rng.standard_normal((5, 3))


def stacked(results):
    """A loop's results, leaf by leaf, stacked on a new axis 0."""
    return ag.tree_map(lambda *leaves: np.stack(leaves), *results)


def assert_trees_close(got, want, rtol=1e-12):
    for g, w in zip(ag.tree_leaves(got), ag.tree_leaves(want)):
        assert_close(g, w, rtol)


def test_vmap_of_grad_gives_each_example_its_gradient(batch):
    p, xs = batch
    got = ag.vmap(ag.grad(loss, argnums=(0, 1)), in_axes=(None, 0))(p, xs)
    want = stacked([ag.grad(loss, argnums=(0, 1))(p, x) for x in xs])
    assert type(got[0]) is Layer and got[0].w.shape == (5, 3, 4)
    assert_trees_close(got, want)


def test_grad_of_vmap_sums_the_examples_gradients(batch):
    p, xs = batch
    dp, dxs = ag.gradient(lambda p, xs: ag.sum(ag.vmap(loss, (None, 0))(p, xs)), p, xs)
    loop = [ag.gradient(loss, p, x) for x in xs]
    assert_trees_close(dp, ag.tree_map(lambda *g: sum(g), *[g[0] for g in loop]))
    assert_trees_close(dxs, np.stack([g[1] for g in loop]))


def test_vjp_inside_and_outside_vmap(batch):
    p, xs = batch
    cotangents = np.random.default_rng(2).standard_normal((5, 4))

    def pulled(x, c):
        return ag.vjp(lambda x: layer(p, x), x)[1](c)[0]
    got = ag.vmap(pulled)(xs, cotangents)
    assert_trees_close(got, stacked([pulled(x, c) for x, c in zip(xs, cotangents)]))
    out, pullback = ag.vjp(ag.vmap(lambda x: layer(p, x)), xs)
    assert_trees_close(out, stacked([layer(p, x) for x in xs]))
    assert_trees_close(pullback(cotangents)[0], got)
    # a pullback mapped over its cotangents: every row of the Jacobian in one call
    _, pullback = ag.vjp(lambda x: layer(p, x), xs[0])
    rows = ag.vmap(pullback)(np.eye(4))[0]
    assert_trees_close(rows, stacked([pullback(e)[0] for e in np.eye(4)]))


def test_jvp_inside_and_outside_vmap(batch):
    p, xs = batch
    tangents = np.random.default_rng(3).standard_normal(xs.shape)

    def pushed(x, t):
        return ag.jvp(lambda x: layer(p, x), (x,), (t,))
    loop = stacked([pushed(x, t) for x, t in zip(xs, tangents)])
    assert_trees_close(ag.vmap(pushed)(xs, tangents), loop)
    assert_trees_close(ag.jvp(ag.vmap(lambda x: layer(p, x)), (xs,), (tangents,)), loop)


def test_hessian_and_jacobian_inside_and_outside_vmap(batch):
    p, xs = batch
    of_x = ag.hessian(loss, argnums=1)
    assert_trees_close(ag.vmap(of_x, (None, 0))(p, xs), stacked([of_x(p, x) for x in xs]))
    jac = ag.jacobian(layer, argnums=1)
    assert_trees_close(ag.vmap(jac, (None, 0))(p, xs), stacked([jac(p, x) for x in xs]))
    # the Hessian of the sum over examples is block diagonal: each block an example's
    whole = ag.hessian(lambda xs: ag.sum(ag.vmap(loss, (None, 0))(p, xs)))(xs)
    for i, x in enumerate(xs):
        assert_trees_close(whole[i, :, i, :], of_x(p, x))


def test_checkpoint_inside_and_outside_vmap(batch):
    p, xs = batch
    held = ag.checkpoint(loss)
    assert_trees_close(ag.vmap(held, (None, 0))(p, xs), stacked([loss(p, x) for x in xs]))
    assert_trees_close(ag.vmap(ag.grad(held), (None, 0))(p, xs),
                       stacked([ag.grad(loss)(p, x) for x in xs]))
    total = ag.gradient(lambda p: ag.sum(ag.vmap(held, (None, 0))(p, xs)), p)[0]
    want = ag.gradient(lambda p: sum(loss(p, x) for x in xs), p)[0]
    assert_trees_close(total, want)


def dense_and_norm(w, b, scale, x):
    """linear, then layer norm: the two ops whose weights vmap(grad(f)) gives every example
    as one copy (batching/shared_parameters.py: linear_each, layer_norm_each)."""
    return ag.sum(ag.tanh(ag.layer_norm(ag.linear(x, w, b), scale, b, 1e-3)) ** 2)


def counted_rule_calls(monkeypatch, fusable):
    """How often the first fast rule of `fusable` runs (its body wrapped with a counter)."""
    rule, calls = fusable.rules[0], []
    body = rule.body
    monkeypatch.setattr(rule, "body", lambda *a, **k: calls.append(1) or body(*a, **k))
    return calls


@pytest.mark.parametrize("rules_on", [True, False], ids=["rules on", "rules off"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_layer_shared_by_every_example_gives_each_its_own_weight_gradient(
        monkeypatch, dtype, rules_on):
    """vmap(grad(f)) over unmapped weights: linear and layer_norm run once on every example
    with the one copy of the weights (a fast rule whose pullback gives each example its own
    cotangent of w, b and scale), or, with rules off, their written-out definition; both equal
    a loop of single gradients, to first and second order."""
    from autograd_lite.batching.shared_parameters import layer_norm_each, linear_each
    rng = np.random.default_rng(6)
    w, b, scale = (rng.standard_normal(s).astype(dtype) for s in ((3, 4), (4,), (4,)))
    xs = rng.standard_normal((5, 2, 3)).astype(dtype)  # 5 examples of 2 rows
    calls = [counted_rule_calls(monkeypatch, f) for f in (linear_each, layer_norm_each)]
    first = ag.grad(dense_and_norm, argnums=(0, 1, 2))
    second = ag.grad(lambda *a: sum(ag.sum(g ** 2) for g in first(*a)), argnums=(0, 1, 2))
    rtol = 10 * RTOL[np.dtype(dtype)]
    with ag.fast_rules(rules_on):
        for f in (first, second):
            got = ag.vmap(f, in_axes=(None, None, None, 0))(w, b, scale, xs)
            want = stacked([f(w, b, scale, x) for x in xs])
            for g, v in zip(got, want):
                assert g.dtype == dtype and g.shape == v.shape
                assert_close(g, v, rtol)
    # the rules ran in the first order only (second order differentiates the definitions)
    assert [len(c) for c in calls] == ([1, 1] if rules_on else [0, 0])


def test_a_layer_with_weights_per_example_is_its_written_out_definition():
    """An ensemble's weights (mapped, not one copy): linear_each and layer_norm_each compute
    with each example's own, and their gradients are each example's."""
    rng = np.random.default_rng(7)
    ws, bs, scales = rng.standard_normal((5, 3, 4)), rng.standard_normal((5, 4)), \
        rng.standard_normal((5, 4))
    xs = rng.standard_normal((5, 2, 3))
    def f(*a):
        return ag.value_and_gradient(dense_and_norm, *a)
    got = ag.vmap(f)(ws, bs, scales, xs)
    want = stacked([f(*a) for a in zip(ws, bs, scales, xs)])
    assert_trees_close(got, want)


def test_vmap_of_vmap_equals_a_double_loop(batch):
    p, _ = batch
    xss = np.random.default_rng(4).standard_normal((2, 5, 3))
    got = ag.vmap(ag.vmap(loss, (None, 0)), (None, 0))(p, xss)
    assert_trees_close(got, np.array([[loss(p, x) for x in xs] for xs in xss]))
    # the inner map over the first axis of each outer example's columns, and a gradient inside
    grads = ag.vmap(ag.vmap(ag.grad(loss), (None, 0)), (None, 1))(p, xss)
    want = stacked([stacked([ag.grad(loss)(p, xss[i, j]) for i in range(2)]) for j in range(5)])
    assert_trees_close(grads, want)


def test_axes_of_trees_and_outputs(batch):
    p, xs = batch
    ps = Layer(np.stack([p.w, 2 * p.w]), p.b, np.stack([p.scale, p.scale / 2]))
    got = ag.vmap(loss, in_axes=(Layer(0, None, 0), None))(ps, xs[0])
    assert_trees_close(got, np.array([loss(Layer(ps.w[k], p.b, ps.scale[k]), xs[0])
                                      for k in range(2)]))
    out = ag.vmap(lambda x: (layer(p, x), x.sum()), out_axes=(1, 0))(xs)
    assert_trees_close(out[0], stacked([layer(p, x) for x in xs]).T)
    assert ag.vmap(lambda x: p.b, out_axes=None)(xs) is p.b
    assert_trees_close(ag.vmap(lambda x: p.b)(xs), np.broadcast_to(p.b, (5, 4)))


def test_bad_calls_say_what_is_wrong(batch):
    p, xs = batch
    with pytest.raises(ValueError, match=r"different sizes \(5: .*; 4: "):
        ag.vmap(lambda x, y: x.sum() + y.sum())(xs, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
        ag.vmap(loss, in_axes=(0,))(p, xs)
    with pytest.raises(ValueError, match=r"^vmap: in_axes at args\[0\].w is a tuple of 2, but "
                                         r"the value there is a leaf"):
        ag.vmap(loss, in_axes=(p._replace(w=(0, 0), b=None, scale=None), 0))(p, xs)
    with pytest.raises(ValueError, match="out of range for 2 dimensions"):
        ag.vmap(lambda x: x, in_axes=2)(xs)
    with pytest.raises(ValueError, match="out_axes is None .* differs from one example"):
        ag.vmap(lambda x: x, out_axes=None)(xs)
    with pytest.raises(TypeError, match="True for some examples and False for others"):
        ag.vmap(lambda x: x if x.sum() > 0 else -x)(xs)
    with pytest.raises(ValueError, match="no argument is mapped"):
        ag.vmap(loss, in_axes=None)(p, xs)


def test_an_op_without_a_rule_is_named(batch):
    _, xs = batch

    @ag.primitive
    def cube(x):
        return x ** 3, lambda g: (3 * g * x * x,)
    with pytest.raises(NotImplementedError, match=r"no batching rule for the op 'cube' \(arguments: \(3,\) float64 mapped over 5\)"):
        ag.vmap(cube)(xs)


# ---- jacobian through vmap, per-example gradients of a model ---------------------------------

def jacobian_by_loop(f, args, positions):
    """∂f/∂args[k] for k in positions, one vjp per output element (the reference)."""
    out, pullback = ag.vjp(f, *args)
    if out.size == 0:
        return [np.zeros(out.shape + args[i].shape) for i in positions]
    rows = []
    for k in range(out.size):
        seed = np.zeros(out.size, out.dtype)
        seed[k] = 1
        rows.append(pullback(seed.reshape(out.shape)))
    return [np.stack([np.asarray(r[i]) for r in rows]).reshape(out.shape + args[i].shape)
            for i in positions]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_jacobian_in_one_batched_pass_equals_the_loop_of_vjps(case):
    args = examples(case, np.float64)[0]
    positions = tuple(k for k, a in enumerate(args) if is_float(a))
    got = ag.jacobian(case.ours, argnums=positions)(*args)
    for g, want in zip(got, jacobian_by_loop(case.ours, args, positions)):
        assert_close(g, want, 1e-12)


def test_per_example_gradients_of_the_seed_classifier_equal_separate_gradients():
    from models import classifier
    rng = np.random.default_rng(0)
    p = classifier.init(rng, 7455, 5, dropout=0.0, dtype=np.float64)
    ids, labels = rng.integers(0, 7455, (32, 50)), rng.integers(0, 5, 32)

    def example_loss(p, ids, label):  # one review: ids (50,), a label
        return ag.cross_entropy(classifier.apply(p, ids[None]), label[None])
    per_example = ag.vmap(ag.grad(example_loss), in_axes=(None, 0, 0))(p, ids, labels)
    separate = [ag.grad(example_loss)(p, ids[i], labels[i]) for i in range(32)]
    # the absolute floor: 1e-6 of the largest entry of any gradient (the attention's key
    # bias has a gradient of 0 analytically, rounding noise in both computations)
    largest = max(np.abs(g).max() for g in ag.tree_leaves(per_example) if g is not None)
    for path, got, *want in zip(ag.tree_paths(p), ag.tree_leaves(per_example),
                                *[ag.tree_leaves(g) for g in separate]):
        if got is None:
            continue
        assert got.shape == (32,) + want[0].shape, path
        np.testing.assert_allclose(got, np.stack(want), rtol=1e-6, atol=1e-6 * largest,
                                   err_msg=path)


def test_a_picture_of_a_vmapped_call_shows_the_examples_axis_on_its_shapes():
    """The ops a vmapped call records are the batched ones: their shapes hold the examples'
    axis (5 here), where the mapped function's own ops have none."""
    w = np.random.default_rng(5).standard_normal((3, 4))
    mapped = ag.vmap(lambda x: ag.sum(ag.tanh(x @ w)))
    graph = ag.viz.trace(lambda xs: ag.sum(mapped(xs)), np.ones((5, 3)))
    dot = graph.to_dot()
    assert "<B>tanh</B>  <FONT POINT-SIZE=\"9\" COLOR=\"#334155\">(5, 4) f64" in dot
    assert "<B>sum</B> axis=(1,)" in dot  # one sum per example, over its own axis
