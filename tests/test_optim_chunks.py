"""Adam's one update path (kernels.adam_update over leaves joined in chunks, optim/flat.py) against Adam
written out leaf by leaf as torch.optim.Adam documents it: the same bits, whatever the
chunking, the dtypes, the leaves without a gradient and the weight decay; the arguments
untouched; the joined buffers found again at the next update; the chunks in shares at 1 to 8
threads, the bits of one."""
import math
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.optim import flat
from helpers.threads import THREAD_COUNTS, pool_runs, split_at


class Tree(NamedTuple):
    big: np.ndarray  # larger than the chunk size the tests set
    small: list  # float32 leaves, one chunk or several
    wide: np.ndarray  # float64: a chunk of its own dtype
    scalar: float  # a Python float leaf: a 0-d chunk of its own dtype
    late: np.ndarray  # no gradient for the first two updates: its own count t
    n_heads: int


def make_tree(rng):
    return Tree(rng.standard_normal((6, 5)).astype(np.float32),
                [rng.standard_normal(s).astype(np.float32) for s in ((3,), (2, 2), (4,))],
                rng.standard_normal((2, 3)), 0.5, rng.standard_normal(3).astype(np.float32), 4)


def make_gradients(rng, tree, step):
    def g(x):
        return rng.standard_normal(np.shape(x)).astype(np.asarray(x).dtype)
    return Tree(g(tree.big), [g(x) for x in tree.small], g(tree.wide), float(g(1.0)),
                g(tree.late) if step >= 3 else None, None)


def written_out(p, g, m, v, t, lr, betas, eps, weight_decay, decoupled):
    """One leaf's Adam step in numpy, as torch.optim.Adam's and AdamW's documentation writes
    it (t counts this leaf's updates, this one included). -> (p, m, v)"""
    beta1, beta2 = betas
    if not decoupled and weight_decay:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * (g * g)
    if decoupled and weight_decay:
        p = p * (1 - lr * weight_decay)
    denominator = np.sqrt(v) / math.sqrt(1 - beta2 ** t) + eps
    return p - lr / (1 - beta1 ** t) * m / denominator, m, v


SETTINGS = {
    "adam": (ag.optim.adam, dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.0), False),
    "adam_l2": (ag.optim.adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
                False),
    "adamw": (ag.optim.adamw, dict(lr=0.05, betas=(0.5, 0.9), eps=1e-8, weight_decay=0.5), True),
}


@pytest.mark.parametrize("chunk_size", [1, 7, 2**16])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_chunked_adam_gives_the_bits_of_adam_written_out(name, chunk_size, monkeypatch, rng):
    make, settings, decoupled = SETTINGS[name]
    monkeypatch.setattr(flat, "CHUNK_SIZE", chunk_size)
    optimizer = make(**settings)
    params = make_tree(rng)
    state = optimizer.init(params)
    reference = {path: (p, np.zeros_like(p), np.zeros_like(p), 0)
                 for path, p in zip(ag.tree_paths(params), ag.tree_leaves(params))
                 if ag.is_differentiable(p)}
    for step in range(1, 6):
        grads = make_gradients(rng, params, step)
        params, state = optimizer.update(params, grads, state)
        for path, g in zip(ag.tree_paths(grads), ag.tree_leaves(grads)):
            if path in reference and g is not None:
                p, m, v, t = reference[path]
                reference[path] = (*written_out(p, g, m, v, t + 1, **settings,
                                                decoupled=decoupled), t + 1)
        ours = dict(zip(ag.tree_paths(params), ag.tree_leaves(params)))
        moments = zip(ag.tree_paths(state.m), ag.tree_leaves(state.m), ag.tree_leaves(state.v),
                      ag.tree_leaves(state.leaf_steps))
        for path, m, v, t in moments:
            if path not in reference:
                continue
            want_p, want_m, want_v, want_t = reference[path]
            for got, want in ((ours[path], want_p), (m, want_m), (v, want_v)):
                assert np.asarray(got).dtype == np.asarray(want).dtype, f"{path}, step {step}"
                np.testing.assert_array_equal(got, want, err_msg=f"{path}, step {step}")
            assert t == want_t, path
    assert type(params.scalar) is np.float64 and params.n_heads == 4
    assert state.leaf_steps.late == 3 and state.leaf_steps.big == 5


def test_update_leaves_its_arguments_as_they_were(rng):
    optimizer = ag.optim.adamw(lr=0.1)
    params = make_tree(rng)
    _, state = optimizer.update(params, make_gradients(rng, params, 3), optimizer.init(params))
    grads = make_gradients(rng, params, 3)
    before = [np.copy(x) for x in ag.tree_leaves((params, grads, state)) if x is not None]
    optimizer.update(params, grads, state)
    after = [x for x in ag.tree_leaves((params, grads, state)) if x is not None]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_the_leaves_of_a_chunk_are_views_of_one_buffer_that_the_next_update_reads(rng):
    optimizer = ag.optim.adam(lr=0.1)
    params = make_tree(rng)
    params, state = optimizer.update(params, make_gradients(rng, params, 3), optimizer.init(params))
    small = params.small + [state.m.small[0]]
    assert all(p.base is small[0].base for p in params.small)
    assert np.shares_memory(flat.joined(params.small), params.small[0])  # a view, no copy
    assert not np.shares_memory(small[0], small[3])  # the parameters and m: two buffers


def test_joined_copies_arrays_that_do_not_lie_back_to_back():
    buffer = np.arange(10.0)
    first, second, third = flat.split_like(buffer, [np.zeros(2), np.zeros((2, 2)), np.zeros(4)])
    np.testing.assert_array_equal(second, [[2, 3], [4, 5]])
    view = flat.joined([first, second, third])
    assert np.shares_memory(view, buffer) and view.shape == (10,)
    for arrays in ([first, third], [second, first], [first, np.arange(4.0)]):
        together = flat.joined(arrays)
        assert not np.shares_memory(together, buffer)
        np.testing.assert_array_equal(together, np.concatenate([a.ravel() for a in arrays]))


def test_unflatten_each_rebuilds_several_trees_of_one_structure(rng):
    tree = make_tree(rng)
    leaves = ag.tree_leaves(tree)
    doubled = [x * 2 if ag.is_differentiable(x) else x for x in leaves]
    same, twice = flat.unflatten_each(tree, [leaves, doubled])
    assert type(same) is Tree and type(same.small) is list and same.n_heads == 4
    for a, b, c in zip(ag.tree_leaves(same), leaves, ag.tree_leaves(twice)):
        assert a is b
        np.testing.assert_array_equal(c, b * 2 if ag.is_differentiable(b) else b)
    with pytest.raises(ValueError, match=r"unflatten_each: the structure holds 8 leaves, the "
                                         r"columns \[8, 7\]"):
        flat.unflatten_each(tree, [leaves, leaves[:-1]])


def adam_runs(optimizer, rng, steps, in_place):
    """(params, state) after `steps` updates from make_tree, gradients drawn from rng."""
    params = make_tree(rng)
    state = optimizer.init(params)
    for step in range(1, steps + 1):
        params, state = optimizer.update(params, make_gradients(rng, params, step), state,
                                         in_place=in_place)
    return params, state


@pytest.mark.parametrize("chunk_size", [1, 7, 2**16])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_in_place_gives_the_bits_of_the_functional_update(name, chunk_size, monkeypatch):
    make, settings, _ = SETTINGS[name]
    monkeypatch.setattr(flat, "CHUNK_SIZE", chunk_size)
    functional = adam_runs(make(**settings), np.random.default_rng(3), 5, in_place=False)
    in_place = adam_runs(make(**settings), np.random.default_rng(3), 5, in_place=True)
    assert ag.tree_paths(functional) == ag.tree_paths(in_place)
    for a, b in zip(ag.tree_leaves(functional), ag.tree_leaves(in_place)):
        assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("chunk_size", [7, 2**16])
def test_in_place_writes_into_the_arrays_it_was_given(chunk_size, monkeypatch, rng):
    monkeypatch.setattr(flat, "CHUNK_SIZE", chunk_size)
    optimizer = ag.optim.adamw(lr=0.1)
    params = make_tree(rng)
    state = optimizer.init(params)
    grads = make_gradients(rng, params, 3)
    expected, expected_state = optimizer.update(params, grads, state)
    new, new_state = optimizer.update(params, grads, state, in_place=True)
    arrays = [isinstance(x, np.ndarray) for x in ag.tree_leaves(params)]  # not the float leaf
    for given, returned, want in ((params, new, expected), (state.m, new_state.m, expected_state.m),
                                  (state.v, new_state.v, expected_state.v)):
        for a, b, c, array in zip(ag.tree_leaves(given), ag.tree_leaves(returned),
                                  ag.tree_leaves(want), arrays):
            if array:
                assert b is a  # the caller's array, now holding the new value
            np.testing.assert_array_equal(b, c)


def test_in_place_holds_no_second_copy_of_the_parameters_and_moments():
    """Three leaves of 2**18 float32 (1 MiB each): the functional update allocates the new p, m
    and v (9 MiB, besides its scratch), the in-place one only its per-chunk scratch."""
    import tracemalloc
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(2**18).astype(np.float32) for _ in range(3)]
    grads = [rng.standard_normal(2**18).astype(np.float32) for _ in range(3)]
    peaks = {}
    for in_place in (False, True):
        optimizer = ag.optim.adam(lr=0.1)
        p, state = [x.copy() for x in params], optimizer.init(params)
        tracemalloc.start()
        result = optimizer.update(p, grads, state, in_place=in_place)
        peaks[in_place] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        del result
    assert peaks[False] > 9 and peaks[True] < 3, peaks


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("make", [lambda: ag.optim.adamw(lr=0.1),
                                  lambda: ag.optim.sgd(0.1, momentum=0.9)])
def test_the_chunks_in_shares_give_the_bits_of_one_thread(make, in_place, monkeypatch):
    """Five updates of chunks of at most 7 entries (six or seven chunks) at 1 to 8 threads,
    the split over the chunks forced: the bits of one thread; the shares handed to the pool
    as many as the threads, or as the chunks."""
    monkeypatch.setattr(flat, "CHUNK_SIZE", 7)

    def run():
        return adam_runs(make(), np.random.default_rng(3), 5, in_place=in_place)
    with split_at(1):
        serial = run()
    runs = pool_runs(monkeypatch)
    for n in THREAD_COUNTS:
        with split_at(n):
            split = run()
        assert ag.tree_paths(split) == ag.tree_paths(serial)
        for a, b in zip(ag.tree_leaves(split), ag.tree_leaves(serial)):
            assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b, err_msg=f"{n} threads")
    assert {2, 3, 4, 5} <= set(runs) and max(runs) < 8
