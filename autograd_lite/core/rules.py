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

A call of a fusable function runs the first registered rule whose `applies(*args, **kwargs)`
is true, on the plain arrays of the innermost trace's values (the arguments' trees
flattened, core/tree.py), and records one node for it. `applies` and the rule get every
positional argument, the call's defaults filled in from the plain function's signature (so
a rule repeats none). A rule returns `(out, pullback)`. Its pullback gets a plain cotangent
and returns one cotangent per positional argument, None or a tree of the argument's
structure (None for a subtree stands for None at each of its leaves; a leaf is an array, or
a function of no arguments computing it). None means "no derivative" (an int, a static
value): for a differentiated float it is an error naming the rule and the argument, and a
rule whose derivative is zero returns zeros. A weak float among float arrays reaches the
rule cast to their dtype, and its cotangent goes back as a weak float (core/dtypes.py).
The plain function runs instead, op by op, so that the traces record it:

- under higher order: a value belongs to an enclosing trace (grad of grad, hessian);
- while a picture or a capture records (`Trace.picturing`), unless the fusable is
  `drawn_as_op` (the library's ops), which pictures draw as one op (with its rules off, one
  node whose output and pullback are the plain function's);
- when no rule applies; and when rules are off (`fast_rules(False)`, or
  AUTOGRAD_LITE_FAST_RULES=0 for a process);
- under vmap (a Batched argument, core/batched.py), unless the fusable has a batching
  rule (softmax, layer_norm, cross_entropy, gather, linear...), which then calls it once
  for every example, so that its fast rule runs on the batch.

A traced cotangent (jvp's double vjp, vmap's batched cotangents of a jacobian, a trace that
differentiates what the cotangent was made from) goes to the vjp of the plain function at
the rule's arguments, which the node keeps for that: the definition is what every
derivative of higher order follows. A rule registered `takes_traced=True` instead meets
one in its own pullback, written with the library's ops where `is_recorded(g)`, and its
node keeps no argument (the library's ops: their pullbacks keep what the kernels saved,
such as x̂ and 1/σ, not x).

Two different arguments (or leaves) arrive as two different objects even where they share
one array (a view for the later one, tracer.keep_distinct_arguments_distinct), so a rule may
take `a is b` to mean "one traced value" (self-attention's packed projections).
"""
import contextlib
import copy
import functools
import os

import numpy as np

from .devices import as_op_output, mixed_devices_error
from .batched import BATCHING_RULES, Batched, batched_call
from .differentiate import vjp
from .dtypes import WeakFloat, settled_weak_floats, weak_cotangents
from .randomness import copied_generator
from .tracer import (Box, Node, check_keyword_only, escaped_value_error, every_value,
                     move_keywords_to_positions, opened, positional_parameters)
from .tree import PrefixMismatch, broadcast_prefix, flatten_into, leaf_count, unflatten

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
    """`with fast_rules(False): ...` runs every fusable function as its plain definition, op
    by op (the tests hold the two against each other); `fast_rules(True)` turns them back on
    inside. The setting is the process's, restored on leaving the block."""
    previous, _Switch.on = _Switch.on, bool(enabled)
    try:
        yield
    finally:
        _Switch.on = previous


class Rule:
    """A fast rule's body, its `applies` predicate (None: it applies to every call), and
    whether its pullbacks take traced cotangents themselves (`fast_rule`)."""
    __slots__ = ("body", "applies", "takes_traced")

    def __init__(self, body, applies, takes_traced):
        self.body, self.applies, self.takes_traced = body, applies, takes_traced


PLAIN_DEFINITIONS = set()  # code objects of the fusables' plain functions (viz/scopes.py)


def fusable(fn=None, *, name=None, drawn_as_op=False):
    """Make the plain function `fn` one that fast rules (`fast_rule`) may stand in for; with
    no rule, or rules off, a call is a call of `fn`. `name` (default fn's) names the node a
    rule records, in errors and pictures. drawn_as_op: pictures and captures draw a call as
    one op (one of the library's ops: its rule runs there too, as a primitive's body does,
    and with rules off its plain function computes that one node); otherwise (a model's
    function) they run `fn`, to show the ops it is made of. Under vmap a fusable with a
    batching rule (core/batched.py's BATCHING_RULES) runs it, else `fn`.
    The result exposes `plain` (fn), `rules`, `op_name`, `parameters` and `drawn_as_op`."""
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
            error = mixed_devices_error(fusable_call.op_name, args, every_value)
            if error is not None:
                raise error from None
            raise
    fusable_call.plain = fn
    fusable_call.rules = []
    fusable_call.op_name = name or fn.__name__
    fusable_call.parameters = positional_parameters(fn)
    fusable_call.drawn_as_op = drawn_as_op
    return fusable_call


def fast_rule(function, applies=None, *, takes_traced=False):
    """Register the decorated `rule(*args) -> (out, pullback)` against the fusable
    `function`, for the calls where `applies(*args)` (None: every call) is true; both see
    the plain arrays (the module docstring has the contract). takes_traced: the rule's
    pullbacks take a traced cotangent too, written with the library's ops where it is one
    (`is_recorded(g)`), so that its node keeps no argument for the plain function's vjp.
    Rules registered earlier are tried first. Returns the rule itself."""
    if not hasattr(function, "rules"):
        raise TypeError(f"fast_rule: {getattr(function, '__name__', function)!r} is not a "
                        "fusable function; define it with @ag.fusable to attach rules to it")

    def register(rule):
        function.rules.append(Rule(rule, applies, takes_traced))
        return rule
    return register


def is_recorded(g):
    """Whether the ops on `g` are recorded rather than computed on a plain array: a traced
    or batched cotangent, which a pullback of a rule registered `takes_traced` meets with
    the library's ops."""
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
    """A call of a fusable with rules on (or one drawn as an op, or with a batching rule): a
    rule where one applies and no enclosing trace or picture asks for the plain function,
    the batching rule under vmap, else the plain function."""
    if kwargs or len(args) < len(function.parameters):  # rules see every argument, the
        args, kwargs = move_keywords_to_positions(  # defaults the function's own
            function.op_name, function.parameters, args, kwargs)
        args = tuple(args)
    leaves = []
    structure = flatten_into(args, leaves)
    top = None
    weak = False
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
    """The pullback of an op drawn as one node by its plain function: the plain function's
    vjp (RuleCall.traced_pullback) for every cotangent, named as the op's pullback."""
    def plain_pullback(g):
        return call.traced_pullback(g)
    plain_pullback.__name__ = plain_pullback.__qualname__ = f"{call.function.op_name}_pullback"
    return plain_pullback


def _per_leaf(pullback, structure, weak):
    """A rule's pullback (one cotangent tree per argument, None for a subtree without one)
    as its node's: one cotangent per leaf of the arguments of `structure`, those of the
    leaves at positions `weak` as weak floats (core/dtypes.py). Named as the rule's."""
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
    plain function), the structure of the arguments, and what the vjp of the plain function
    needs for a traced cotangent (`traced_pullback`; `values` is None where the rule's own
    pullback takes one)."""
    __slots__ = ("function", "rule", "structure", "values", "parents", "kwargs", "generators")

    def __init__(self, function, rule, structure, values, parents, kwargs, generators):
        self.function, self.rule, self.structure = function, rule, structure
        self.values, self.parents, self.kwargs = values, parents, kwargs
        self.generators = generators

    def traced_pullback(self, g):
        """For a traced cotangent (a trace opened around the backward pass, as jvp's double
        vjp, or vmap's batched cotangents of a jacobian): the vjp of the plain function in
        its traced leaves, at the plain arguments the rule was given (`values`, its leaves),
        every other leaf held, written with the library's ops, so that the enclosing trace
        records it. Each generator among the leaves ({leaf: a copy as it was before the call
        drew}) draws again from a copy of that state: the plain function draws the masks the
        call drew (dropout). One cotangent per leaf."""
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
        """The rule's pullback gave None (`cotangents[leaf]`) for the traced float leaf number
        `leaf`: an error naming the rule and the argument (None means "no derivative": ints,
        static values), unless the same traced value is another leaf that got a cotangent
        (one object passed twice, as self-attention's x_q and x_kv, may get it whole once)."""
        if any(p is parent and i != leaf and cotangents[i] is not None
               for i, p in node.parents):
            return
        names = [name for name, _ in self.function.parameters]
        position, first = 0, 0
        for position, kid in enumerate(self.structure[2]):
            count = leaf_count(kid)
            if leaf < first + count:
                break
            first += count
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
    """`wrapper` under `pullback`'s name (pictures label a node's pullback by it) and with
    its attributes, which an op reading the node may look for (as square_of_norm reads
    norm's); functools.wraps copies more, at a cost a small rule's node feels."""
    name = getattr(pullback, "__name__", None)
    if name is not None:
        wrapper.__name__ = name
        wrapper.__qualname__ = getattr(pullback, "__qualname__", name)
    attributes = getattr(pullback, "__dict__", None)
    if attributes:
        wrapper.__dict__.update(attributes)
    return wrapper


# One code object for every fusable's wrapper: how the pictures' scope finder recognises a
# call that may run a rule (and then its plain function, whose code is in PLAIN_DEFINITIONS).
FUSABLE_CODE = fusable(lambda x: x).__code__
