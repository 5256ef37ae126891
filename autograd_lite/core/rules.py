"""Fast rules: a plain function is the definition, and a rule attached to it from elsewhere
computes the same output, and its pullback, faster on plain arrays (JAX's `custom_vjp`,
ChainRules' `rrule`, NNlib's softmax that a CUDA extension overrides).

    @fusable                                   # the definition: the library's ops, op by op
    def add_and_norm(p, x, y):
        return layer_norm(p, x + y)

    @fast_rule(add_and_norm, applies=same_shapes)   # anywhere else: a kernel and its pullback
    def add_and_norm_rule(p, x, y):
        out, saved = kernel_forward(x, y, p.scale, p.bias)
        def add_and_norm_pullback(g):          # plain cotangent -> one per argument,
            dx, ds, db = kernel_backward(g, saved)      # in the argument's own tree
            return LayerNorm(ds, db), dx, dx
        return out, add_and_norm_pullback

A call runs the first rule whose `applies(*args, **kwargs)` is true on the plain arrays of
the innermost trace's values, and records one node for it. `applies` and the rule get every
positional argument, defaults filled in from the plain function's signature. The rule's
pullback takes a plain cotangent and returns one cotangent per positional argument: None,
or a tree of the argument's structure (None for a subtree stands for None at its leaves; a
leaf is an array or a function of no arguments computing it). None means "no derivative":
for a differentiated float it is an error naming the rule and the argument (a zero
derivative is given as zeros). A weak float among float arrays reaches the rule cast to
their dtype, its cotangent going back weak (core/dtypes.py).
The plain function runs instead, op by op, so that the traces record it:

- under higher order (a value of an enclosing trace);
- while a picture records (`Trace.picturing`), unless the fusable is `drawn_as_op`;
- when no rule applies, and when rules are off (`fast_rules(False)`, or
  AUTOGRAD_LITE_FAST_RULES=0);
- under vmap, unless the fusable has a batching rule, which then runs its fast rule on the
  whole batch.

A traced cotangent (jvp's double vjp, a jacobian under vmap) goes to the vjp of the plain
function at the rule's arguments, which the node keeps for that: every derivative of higher
order follows the definition. A rule registered `takes_traced=True` meets one in its own
pullback, written with the library's ops where `is_recorded(g)`, and its node keeps no
argument. Two different arguments arrive as two different objects even where they share one
array (tracer.keep_distinct_arguments_distinct), so `a is b` in a rule means "one traced
value".
"""
import contextlib
import copy
import functools
import os

import numpy as np

from .devices import as_op_output
from .batched import BATCHING_RULES, Batched, batched_call
from .differentiate import vjp
from .dtypes import WeakFloat, settled_weak_floats, weak_cotangents
from .randomness import copied_generator, generator_to_draw_from, inside_checkpoint
from .tracer import (Box, Node, check_keyword_only, escaped_value_error,
                     move_keywords_to_positions, opened, positional_parameters,
                     raise_if_mixed_devices)
from .tree import PrefixMismatch, broadcast_prefix, flatten_into, unflatten

_SETTING = "AUTOGRAD_LITE_FAST_RULES"


def _enabled_by_environment():
    value = os.environ.get(_SETTING, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{_SETTING}={value!r}: expected 0 (every fast rule off) or 1 (on)")
    return value != "0"


class _Switch:
    """Whether fast rules run: one switch for the process (fast_rules)."""
    on = _enabled_by_environment()


@contextlib.contextmanager
def fast_rules(enabled):
    """`with fast_rules(False): ...` runs every fusable function as its plain definition. The
    setting is the process's (not the thread's), restored on leaving the block."""
    previous, _Switch.on = _Switch.on, bool(enabled)
    try:
        yield
    finally:
        _Switch.on = previous


class Rule:
    """A fast rule's body, its `applies` (None: every call) and `takes_traced`."""
    __slots__ = ("body", "applies", "takes_traced")

    def __init__(self, body, applies, takes_traced):
        self.body, self.applies, self.takes_traced = body, applies, takes_traced


PLAIN_DEFINITIONS = set()  # code objects of the fusables' plain functions (viz/scopes.py)


def fusable(fn=None, *, name=None, drawn_as_op=False):
    """Make the plain function `fn` one that fast rules may stand in for; with no rule, or
    rules off, a call is a call of `fn`. `name` (default fn's) names the rule's node.
    drawn_as_op: pictures draw a call as one op (the library's ops), rather than the ops of
    `fn` (a model's function). Exposes `plain`, `rules`, `op_name`, `parameters` and
    `drawn_as_op`."""
    if fn is None:
        return functools.partial(fusable, name=name, drawn_as_op=drawn_as_op)
    PLAIN_DEFINITIONS.add(fn.__code__)

    @functools.wraps(fn)
    def fusable_call(*args, **kwargs):
        try:
            if _Switch.on and fusable_call.rules or drawn_as_op or \
                    fusable_call in BATCHING_RULES:  # rules off: one op in pictures, batched
                return _dispatch(fusable_call, args, kwargs)
            return fn(*args, **kwargs)
        except TypeError:  # numpy's and a device's arrays among the arguments: say so by name
            raise_if_mixed_devices(fusable_call.op_name, args)
            raise
    fusable_call.plain = fn
    fusable_call.rules = []
    fusable_call.op_name = name or fn.__name__
    fusable_call.parameters = positional_parameters(fn)
    fusable_call.drawn_as_op = drawn_as_op
    return fusable_call


def fast_rule(function, applies=None, *, takes_traced=False):
    """Register the decorated `rule(*args) -> (out, pullback)` against the fusable
    `function`, for the calls where `applies(*args)` (None: every call) is true (the module
    docstring has the contract). takes_traced: its pullbacks take a traced cotangent too.
    Rules registered earlier are tried first. Returns the rule itself."""
    if not hasattr(function, "rules"):
        raise TypeError(f"fast_rule: {getattr(function, '__name__', function)!r} is not a "
                        "fusable function; define it with @ag.fusable to attach rules to it")

    def register(rule):
        function.rules.append(Rule(rule, applies, takes_traced))
        return rule
    return register


def is_recorded(g):
    """Whether `g` is a traced or batched cotangent, which a pullback of a rule registered
    `takes_traced` meets with the library's ops."""
    return type(g) is Box or type(g) is Batched


def _applicable(function, args, kwargs):
    """The first rule that applies to the call, or None (also when rules are off)."""
    if not _Switch.on:
        return None
    for rule in function.rules:
        if rule.applies is None or rule.applies(*args, **kwargs):
            return rule
    return None


def _dispatch(function, args, kwargs):
    """A call of a fusable with rules on (or drawn as an op, or with a batching rule): a rule
    where one applies (module docstring), the batching rule under vmap, else the plain
    function."""
    if kwargs or len(args) < len(function.parameters):  # rules see every argument, the
        args, kwargs = move_keywords_to_positions(  # defaults the function's own
            function.op_name, function.parameters, args, kwargs)
        args = tuple(args)
    leaves = []
    structure = flatten_into(args, leaves)
    top = None
    weak = drawing = False
    for a in leaves:
        t = type(a)
        if t is Box:
            if top is None or a.trace.level > top.level:
                top = a.trace
        elif t is Batched:  # under vmap: the fusable's batching rule, else its plain function
            if function in BATCHING_RULES:
                return batched_call(function, args, kwargs, plain=function.plain)
            return function.plain(*args, **kwargs)
        elif t is WeakFloat:
            weak = True
        elif t is np.random.Generator:
            drawing = True
    if drawing and inside_checkpoint():  # a generator may have a stand-in there
        drawn_from = [generator_to_draw_from(a) if type(a) is np.random.Generator else a
                      for a in leaves]
        if any(d is not a for d, a in zip(drawn_from, leaves)):
            leaves = drawn_from
            args = unflatten(structure, leaves)
    if kwargs:
        check_keyword_only(function.op_name, kwargs, top)
    if top is None:  # nothing traced: the rule's output only
        rule = _applicable(function, args, kwargs)
        if rule is None:
            out = function.plain(*args, **kwargs)
        else:
            if weak:
                args = unflatten(structure, settled_weak_floats(leaves)[0])
            out = rule.body(*args, **kwargs)[0]
        if type(out) is np.ndarray or not isinstance(out, np.generic):
            return out
        return as_op_output(out)  # a numpy scalar: an op's output is an array
    if not top.active:
        raise escaped_value_error(function.op_name, top)
    if top.picturing and not function.drawn_as_op:
        return function.plain(*args, **kwargs)
    values, parents = opened(leaves, top)
    for v in values:
        t = type(v)
        if t is Box:  # higher order: the traces record the plain function's ops
            return function.plain(*args, **kwargs)
        if t is WeakFloat:
            weak = True
    for v in kwargs.values():
        if type(v) is Box:
            return function.plain(*args, **kwargs)
    flat = not any(structure[2])  # every argument a leaf: an op's arrays and operands
    plain_args = values if flat else unflatten(structure, values)
    rule = _applicable(function, plain_args, kwargs)
    generators = {i: copy.deepcopy(v) for i, v in enumerate(values)  # as they were before
                  if type(v) is np.random.Generator}  # the call drew: for its plain function
    if rule is None and not top.picturing:
        return function.plain(*args, **kwargs)
    kept = None if rule is not None and rule.takes_traced else values
    call = RuleCall(function, rule, structure, kept, parents, kwargs, generators)
    if rule is None:  # an op that a picture draws as one: its plain function as its rule
        out, pullback = function.plain(*plain_args, **kwargs), _plain_pullback(call)
    else:
        if weak:  # weak floats among float arrays: cast to their dtype (core/dtypes.py)
            settled, weak = settled_weak_floats(values)
            plain_args = settled if flat else unflatten(structure, settled)
        out, pullback = rule.body(*plain_args, **kwargs)
        if not flat or weak:
            pullback = _per_leaf(pullback, structure, weak)
    if type(out) is not np.ndarray and type(out) is not Box:
        out = as_op_output(out)  # an array subclass (core/dtypes.py's) stays as it is
    box = Box(out, top, Node(pullback, tuple(parents), function.op_name, out.shape, out.dtype,
                             len(leaves), call))
    if top.on_op is not None:
        top.on_op(function, leaves, kwargs, box)
    return box


def _plain_pullback(call):
    """An op drawn as one node by its plain function: its vjp, named as the op's pullback."""
    def plain_pullback(g):
        return call.traced_pullback(g)
    plain_pullback.__name__ = plain_pullback.__qualname__ = f"{call.function.op_name}_pullback"
    return plain_pullback


def _per_leaf(pullback, structure, weak):
    """A rule's pullback (one cotangent tree per argument) as its node's: one cotangent per
    leaf of the arguments of `structure`, those at positions `weak` as weak floats."""
    def leaves_pullback(g):
        cotangents = pullback(g)
        try:
            cotangents = broadcast_prefix(tuple(cotangents), structure)
        except PrefixMismatch as error:
            raise TypeError(f"the fast rule's pullback {pullback.__name__} gave cotangents "
                            f"not in its arguments' structure at "
                            f"{error.where('args')}") from None
        return weak_cotangents(cotangents, weak) if weak else tuple(cotangents)
    return _named_after(pullback, leaves_pullback)


class RuleCall:
    """What a fast rule's node keeps: the fusable, the rule (None: an op drawn as one by its
    plain function), the arguments' structure, and what `traced_pullback` needs (`values`
    is None where the rule's own pullback takes a traced cotangent)."""
    __slots__ = ("function", "rule", "structure", "values", "parents", "kwargs", "generators")

    def __init__(self, function, rule, structure, values, parents, kwargs, generators):
        self.function, self.rule, self.structure = function, rule, structure
        self.values, self.parents, self.kwargs = values, parents, kwargs
        self.generators = generators

    def traced_pullback(self, g):
        """For a traced cotangent: the vjp of the plain function in its traced leaves at the
        rule's plain arguments, recorded by the enclosing trace. Each generator among the
        leaves draws again from a copy of its state before the call, so that the plain
        function draws the call's masks (dropout). One cotangent per leaf."""
        traced = [i for i, _ in self.parents]

        def of_traced(*traced_values):
            leaves = list(self.values)
            for i, v in zip(traced, traced_values):
                leaves[i] = v
            for i, generator in self.generators.items():
                leaves[i] = copied_generator(generator)
            return self.function.plain(*unflatten(self.structure, leaves), **self.kwargs)

        _, pullback = vjp(of_traced, *[self.values[i] for i in traced])
        cotangents = [None] * len(self.values)
        for i, c in zip(traced, pullback(g)):
            cotangents[i] = c
        return tuple(cotangents)

    def check_missing_cotangent(self, node, leaf, parent, cotangents):
        """The rule's pullback gave None for the traced float leaf number `leaf`: an error
        naming the rule and the argument, unless the same traced value is another leaf that
        got a cotangent (self-attention's x_q and x_kv, one object, may get it whole once)."""
        if any(p is parent and i != leaf and cotangents[i] is not None
               for i, p in node.parents):
            return
        names = [name for name, _ in self.function.parameters]
        positions = broadcast_prefix(tuple(range(len(self.structure[2]))), self.structure)
        position = positions[leaf]  # the argument the leaf is in, and its first leaf
        first = positions.index(position)
        name = f"'{names[position]}'" if position < len(names) else f"args[{position}]"
        where = name if self.structure[2][position] is None else \
            f"{name} (its leaf {leaf - first} in tree order)"
        rule = getattr(self.rule.body, "__name__", "rule")
        raise TypeError(
            f"{self.function.op_name}: the fast rule {rule}'s pullback gave no cotangent "
            f"(None) for argument {where}, {parent.shape} {parent.dtype}, which is "
            "differentiated: None means that an argument has no derivative (an int, a static "
            "value); where the derivative is zero, return zeros")


def _named_after(pullback, wrapper):
    """`wrapper` with `pullback`'s name (pictures label by it) and attributes (an op reading
    the node may look for them, as square_of_norm reads norm's): less than functools.wraps
    copies, at less cost."""
    name = getattr(pullback, "__name__", None)
    if name is not None:
        wrapper.__name__ = name
        wrapper.__qualname__ = getattr(pullback, "__qualname__", name)
    attributes = getattr(pullback, "__dict__", None)
    if attributes:
        wrapper.__dict__.update(attributes)
    return wrapper


# One code object for every fusable's wrapper: how the pictures' scope finder recognises one.
FUSABLE_CODE = fusable(lambda x: x).__code__
