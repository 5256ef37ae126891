"""vmap over every row of the op table (helpers/op_table.py) in generated configurations
(hypothesis, with a fixed seed and a few examples a row): the row's function, or its grad,
vjp, jvp, jacobian or hessian, under vmap with each float argument mapped on axis 0, 1 or
-1 or left unmapped, the outputs' examples on axis 0 or -1, for 1 or 3 examples, one vmap
or two (each with axes of its own), and the gradient of a vmapped call; on numpy's arrays
and on the device double. Each against the Python loop over the examples, and values and
gradients also against torch.func.vmap where torch has the row. CI runs this file with
the fast rules on and with AUTOGRAD_LITE_FAST_RULES=0."""
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import autograd_lite as ag
from helpers.device_double import DeviceArray
from helpers.op_cases import Float
from helpers.op_table import CASES
from helpers.references import assert_close, is_float, to_tensor
from test_devices import HOST_CONSTANT_ROWS

INSIDE = ("value", "grad", "vjp", "jvp", "jacobian", "hessian")
RTOL = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 1e-4}


def squash(out):
    """A scalar of a row's output, Σ tanh(out)², whose derivatives are the row's."""
    return ag.sum(ag.tanh(out) ** 2)


def per_example(case, transform, floats):
    """The function of one example that vmap maps, and the extra arguments it takes after
    the row's (a cotangent for vjp, a tangent per float argument for jvp)."""
    f, n = case.ours, len(case.args)
    if transform == "value":
        return f, ()
    if transform == "grad":
        return (lambda *a: ag.gradient(lambda *b: squash(f(*b)), *a, argnums=floats)), ()
    if transform == "vjp":
        def pulled(*a):
            out, pullback = ag.vjp(f, *a[:n])
            return out, pullback(a[n])
        return pulled, ("cotangent",)
    if transform == "jvp":
        def pushed(*a):
            tangents = [None] * n
            for k, t in zip(floats, a[n:]):
                tangents[k] = t
            return ag.jvp(f, tuple(a[:n]), tuple(tangents))
        return pushed, ("tangent",) * len(floats)
    if transform == "jacobian":
        return ag.jacobian(f, argnums=floats), ()
    return ag.hessian(lambda *b: squash(f(*b)), argnums=floats), ()


def draw_example(case, extras, rng, dtype):
    """One example's arguments: the row's (floats drawn from its domains, constants as they
    are) and the extras, of the shapes the row's output and float arguments have."""
    args = case.arguments(rng, dtype)
    for kind in extras[:1]:
        if kind == "cotangent":
            args.append(rng.standard_normal(np.shape(case.ours(*args))).astype(dtype))
        else:
            args += [rng.standard_normal(a.shape).astype(dtype) for a in args if is_float(a)]
    return args


@st.composite
def configurations(draw, case, transforms=INSIDE + ("grad outside",)):
    """How the row is mapped: the transformation, the vmaps' axes and lengths, the device."""
    floats = tuple(k for k, a in enumerate(case.args) if isinstance(a, Float))
    if not case.second_order:
        transforms = tuple(t for t in transforms if t != "hessian")
    transform = draw(st.sampled_from(transforms))
    inside = "value" if transform == "grad outside" else transform
    extras = per_example(case, inside, floats)[1]
    ranks = [len(case.args[k].shape) for k in floats] + [
        len(np.shape(case.ours(*case.arguments(np.random.default_rng(0), np.float64))))
        if kind == "cotangent" else len(case.args[floats[i]].shape)
        for i, kind in enumerate(extras)]
    mappable = list(floats) + list(range(len(case.args), len(case.args) + len(extras)))
    depth = draw(st.sampled_from([1, 2]))
    levels = []  # innermost first: (in_axes of the mapped arguments, examples, out_axes)
    for _ in range(depth):
        axes = []
        for k, rank in zip(mappable, ranks):
            choices = [None, 0, -1] + ([1] if rank >= 1 else [])
            axes.append(draw(st.sampled_from(choices)))
        if all(a is None for a in axes):
            axes[draw(st.integers(0, len(axes) - 1))] = 0
        levels.append((dict(zip(mappable, axes)), draw(st.sampled_from([1, 3])),
                       draw(st.sampled_from([0, -1]))))
        ranks = [r + (a is not None) for r, a in zip(ranks, axes)]
    on_device = case.name not in HOST_CONSTANT_ROWS and draw(st.booleans())
    dtype = draw(st.sampled_from([np.float64, np.float64, np.float32]))
    return dict(transform=transform, inside=inside, floats=floats, levels=levels,
                on_device=on_device, dtype=dtype, seed=draw(st.integers(0, 2 ** 16)))


class Batch:
    """The examples of one configuration: each argument's value for every example (an
    argument that a vmap leaves unmapped is one value for all its examples), the arrays
    vmap gets, and the loop over the examples."""

    def __init__(self, case, config):
        self.levels = config["levels"]  # innermost first
        inside = per_example(case, config["inside"], config["floats"])
        self.f, extras = inside
        rng = np.random.default_rng(config["seed"])
        self.n = len(case.args) + len(extras)
        lengths = [examples for _, examples, _ in self.levels]
        self.examples = {}  # (outer example, inner example) -> arguments; 0 where unmapped
        for index in np.ndindex(*reversed(lengths)):
            self.examples[index] = draw_example(case, extras, rng, config["dtype"])

    def argument(self, k, index):
        """Argument k of the example at `index` (outermost first): each vmap that leaves it
        unmapped sees its example 0's."""
        shared = tuple(e if k in axes and axes[k] is not None else 0
                       for e, (axes, _, _) in zip(index, reversed(self.levels)))
        return self.examples[shared][k]

    def arrays(self):
        """vmap's arguments: each argument stacked along its axis at every level that maps
        it, innermost first."""
        outer_first = list(reversed(self.levels))

        def stacked(k, depth, index):
            if depth == len(outer_first):
                return self.argument(k, index)
            axes, examples, _ = outer_first[depth]
            if axes.get(k) is None:
                return stacked(k, depth + 1, index + (0,))
            return np.stack([stacked(k, depth + 1, index + (e,)) for e in range(examples)],
                            axis=axes[k] % (np.ndim(stacked(k, depth + 1, index + (0,))) + 1))
        return [stacked(k, 0, ()) for k in range(self.n)]

    def in_axes(self, level):
        axes, _, _ = self.levels[level]
        return tuple(axes.get(k) for k in range(self.n))

    def mapped(self, f):
        """f under one vmap per level, innermost first (the dropout row draws from a
        generator it makes in each call: the loop's examples share a mask)."""
        for level, (_, _, out_axis) in enumerate(self.levels):
            f = ag.vmap(f, in_axes=self.in_axes(level), out_axes=out_axis, randomness="same")
        return f

    def loop(self, f, depth=0, index=()):
        """The loop over the examples, outermost first, each level's results stacked on its
        out_axes."""
        outer_first = list(reversed(self.levels))
        if depth == len(outer_first):
            return f(*[self.argument(k, index) for k in range(self.n)])
        _, examples, out_axis = outer_first[depth]
        results = [self.loop(f, depth + 1, index + (e,)) for e in range(examples)]
        return ag.tree_map(lambda *leaves: stack_on(leaves, out_axis), *results)


def stack_on(leaves, axis):
    if leaves[0] is None:  # a static leaf (a constant's cotangent)
        return None
    leaves = [np.asarray(leaf) for leaf in leaves]
    return np.stack(leaves, axis=axis % (leaves[0].ndim + 1))


def on_device(tree):
    return ag.tree_map(lambda a: DeviceArray(a.copy()) if type(a) is np.ndarray else a, tree)


def on_host(tree):
    return ag.tree_map(lambda a: a.get() if type(a) is DeviceArray else a, tree)


def assert_trees_equal(got, want, dtype, what):
    got_leaves, want_leaves = ag.tree_leaves(got), ag.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if w is None:
            assert g is None, (what, i)
            continue
        w = np.asarray(w)
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype == dtype, \
            (what, i, type(g), getattr(g, "dtype", None), w.dtype)
        assert_close(g, w, RTOL[np.dtype(dtype)], f"{what}, leaf {i}")


def gradient_outside(batch, arrays, floats):
    """∇ of Σ tanh(vmapped row)² in every float array vmap gets, mapped or not."""
    mapped = batch.mapped(batch.f)
    return ag.gradient(lambda *a: squash(mapped(*a)), *arrays, argnums=floats)


def gradient_of_the_loop(batch, arrays, floats):
    """The same gradient through the loop over the examples written with the library's
    ops (each example sliced out with getitem, the results stacked): no vmap in it."""
    outer_first = list(reversed(batch.levels))

    def looped(args, depth=0):
        if depth == len(outer_first):
            return batch.f(*args)
        axes, examples, out_axis = outer_first[depth]
        results = [looped([a if axes.get(k) is None else ag.getitem(a, along(axes[k], e))
                           for k, a in enumerate(args)], depth + 1) for e in range(examples)]
        return ag.stack(results, out_axis)
    return ag.gradient(lambda *a: squash(looped(list(a))), *arrays, argnums=floats)


def along(axis, e):
    """The index of entry e along `axis` (negative from the end)."""
    return (slice(None),) * axis + (e,) if axis >= 0 else (Ellipsis, e) + (slice(None),) * (-axis - 1)


def torch_reference(torch, case, config, batch, arrays):
    """The value (or grad) under torch.func.vmap, nested as ours, of the row's torch
    function."""
    from torch.func import grad, vmap
    f = case.theirs
    if config["inside"] == "grad":
        floats = config["floats"]
        f = grad(lambda *a: torch.tanh(case.theirs(*a)).pow(2).sum(), argnums=floats)
    for level, (_, _, out_axis) in enumerate(batch.levels):
        f = vmap(f, in_dims=batch.in_axes(level), out_dims=out_axis)
    return f(*[to_tensor(torch, a) for a in arrays])


ROWS = [case for case in CASES if any(isinstance(a, Float) for a in case.args)]


@pytest.mark.parametrize("case", ROWS, ids=[c.name for c in ROWS])
@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_row_under_vmap_equals_the_loop(case, data, device_double):
    config = data.draw(configurations(case), label="configuration")
    batch = Batch(case, config)
    arrays = batch.arrays()
    moved = on_device if config["on_device"] else (lambda tree: tree)
    dtype = config["dtype"]
    if config["transform"] == "grad outside":
        floats = tuple(k for k, a in enumerate(arrays) if is_float(a))
        got = gradient_outside(batch, moved(arrays), floats)
        want = gradient_of_the_loop(batch, arrays, floats)
    else:
        got = batch.mapped(batch.f)(*moved(arrays))
        want = batch.loop(batch.f)
    assert_trees_equal(on_host(got), want, dtype, f"{case.name}: {config}")


TORCH_ROWS = [case for case in ROWS if case.theirs is not None]


@pytest.mark.parametrize("case", TORCH_ROWS, ids=[c.name for c in TORCH_ROWS])
@settings(max_examples=1, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_row_under_vmap_equals_torch_func_vmap(case, data, torch):
    config = data.draw(configurations(case, ("value", "grad")), label="configuration")
    config = {**config, "on_device": False}
    batch = Batch(case, config)
    arrays = batch.arrays()
    got = batch.mapped(batch.f)(*arrays)
    want = torch_reference(torch, case, config, batch, arrays)
    want = [t.detach().numpy() for t in (want if isinstance(want, tuple) else (want,))]
    assert_trees_equal(got if isinstance(got, tuple) else (got,), want, config["dtype"],
                       f"{case.name}: {config}")
