"""Rematerialisation (jax.checkpoint): `checkpoint(f)` computes what f computes, but under a
trace keeps none of f's forward values: the backward pass computes them again.

A checkpointed call is one primitive over the traced leaves of f's arguments: its forward
runs f on their plain values (nothing recorded, f's arrays freed as it goes; the node keeps
only f's inputs), its pullback runs f again under a trace of its own, dropped when done, and
sends the cotangent back through it. An enclosing trace records both runs, so
grad(grad(...)) through a checkpoint is exact. The recomputation draws what the forward
drew: each np.random.Generator among f's arguments is copied at the call (the forward
advances the caller's as without checkpoint), and it runs under the vmap calls the forward
ran under, resumed if they have returned (each example draws its own again under
randomness="different"). A generator f draws from that is not among its arguments (in a
closure, or a global one) is copied before its first draw in the first run, and the
recomputation draws from a copy of that instead (randomness.generator_to_draw_from).
np.random.*'s global state and a generator's methods called directly are not seen.
"""
import functools

import numpy as np

from .backward import backward
from .batched import Batched, calls_in_progress, closed_levels, peel, resumed, wrap
from .differentiate import box_input, output_of
from .randomness import CheckpointFrame, checkpoint_frame, copied_generator
from .tracer import Box, Trace, end_trace, is_array, primitive
from .tree import tree_leaves, tree_unflatten


class CheckpointedCall:
    """f, its arguments without their traced leaves (so that the node holds no box), its
    generators as at the call, and the vmap calls it ran under."""

    def __init__(self, f, args, leaves, traced):
        self.f = f
        self.traced = traced  # the positions of the traced leaves among tree_leaves(args)
        positions = set(traced)
        static = [None if i in positions else leaf for i, leaf in enumerate(leaves)]
        self.skeleton = tree_unflatten(args, static)
        self.saved_generators = _copied_once({i: leaf for i, leaf in enumerate(leaves)
                                              if isinstance(leaf, np.random.Generator)})
        self.vmap_calls = calls_in_progress()

    def arguments(self, traced_values, replay):
        """f's arguments holding `traced_values`; replay: generators as at call time."""
        leaves = tree_leaves(self.skeleton)
        for i, value in zip(self.traced, traced_values):
            leaves[i] = value
        if replay:
            for i, generator in _copied_once(self.saved_generators).items():
                leaves[i] = generator
        return tree_unflatten(self.skeleton, leaves)


def _copied_once(generators):
    """{position: a copy of the generator there}, one copy for each distinct generator: a
    generator that two leaves hold draws as one generator again."""
    copies, out = {}, {}
    for i, generator in generators.items():
        if id(generator) not in copies:
            copies[id(generator)] = copied_generator(generator)
        out[i] = copies[id(generator)]
    return out


def _recomputed_cotangents(call, traced_values, g):
    """The cotangents of f's traced leaves for g, by running f again under its own trace."""
    trace = Trace(caller="checkpoint")
    boxed = [box_input(v, trace) for v in traced_values]
    with checkpoint_frame(CheckpointFrame(stand_ins={})) as recomputation:
        try:
            with resumed(call.vmap_calls):  # vmap(randomness="different") draws per example
                recomputation.stand_ins.update({id(rng): copied_generator(saved)
                                                for rng, saved in call.drawn_elsewhere})
                out = call.f(*call.arguments(boxed, replay=True))
        finally:
            end_trace(trace)
        _, node = output_of("checkpoint", out, trace)  # an inner checkpoint's recomputation
        at_leaves = backward(node, g, release=True) if node is not None else {}  # sees ours
    return [at_leaves.get(b.node) for b in boxed]


@primitive(name="checkpoint")
def checkpointed_call(call, *traced_values):
    """f's output, with a pullback that recomputes f (module docstring)."""
    args = call.arguments(traced_values, replay=False)
    generators = [leaf for leaf in tree_leaves(args) if isinstance(leaf, np.random.Generator)]
    with checkpoint_frame(CheckpointFrame(arguments=generators)) as first_run:
        out = call.f(*args)
    call.drawn_elsewhere = list(first_run.others.values())  # (generator, copy before drawing)
    if not (is_array(out) or isinstance(out, (np.generic, float))):
        raise TypeError(f"checkpoint: {getattr(call.f, '__name__', 'f')} must return an "
                        f"array, got {type(out).__name__}")

    def checkpoint_pullback(g):
        return (None, *_recomputed_cotangents(call, traced_values, g))
    return out, checkpoint_pullback


def _under_vmap(checkpointed, f, args, leaves):
    """checkpoint(f) on batched arguments: the checkpoint of the function of the values
    under their Batched layers, so that the recomputation batches as the first run did."""
    unbatched, layers = zip(*(peel(leaf) for leaf in leaves))
    levels = {level for lay in layers for level, _ in lay}
    out_layers = []

    def of_values(*values):
        with closed_levels(levels):  # f sees its examples batched again (a recomputation
            out = f(*tree_unflatten(args, [wrap(v, lay) for v, lay in zip(values, layers)]))
        core, layers_of_out = peel(out)  # runs in a backward pass, which opened them)
        out_layers[:] = layers_of_out
        return core
    return wrap(checkpointed(of_values)(*unbatched), out_layers)


def checkpoint(f):
    """f, which returns one array, recomputed in the backward pass instead of keeping its
    forward values (module docstring). With nothing traced, it is f."""
    if not callable(f):
        raise TypeError(f"checkpoint: expected the function to recompute, got "
                        f"{type(f).__name__} {f!r:.60}")

    @functools.wraps(f)
    def checkpointed(*args):
        leaves = tree_leaves(args)
        if any(type(leaf) is Batched for leaf in leaves):
            return _under_vmap(checkpoint, f, args, leaves)
        traced = [i for i, leaf in enumerate(leaves) if type(leaf) is Box]
        if not traced:
            return f(*args)
        call = CheckpointedCall(f, args, leaves, traced)
        return checkpointed_call(call, *(leaves[i] for i in traced))
    return checkpointed
