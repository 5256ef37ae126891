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
is true, on the plain arrays of the innermost trace's values (the arguments' trees opened,
leaf by leaf), and records one node for it. `applies` and the rule get every positional
argument, the call's defaults filled in from the plain function's signature (so a rule
repeats none). Its pullback gets a plain cotangent and returns one cotangent per positional
argument, None or a tree of the argument's structure (None, an array, or a function of no
arguments computing it at each leaf). None means "no derivative" (an int, a static value):
for a differentiated float it is an error naming the rule and the argument, and a rule
whose derivative is zero returns zeros. The plain function runs instead, op by op, so that
the traces record it:

- under higher order: a value belongs to an enclosing trace (grad of grad, hessian);
- while a picture or a capture records (`Trace.picturing`), unless the fusable is one of
  the library's ops (`op=True`), which pictures draw as one op (with its rules off, one
  node whose output and pullback are the plain function's);
- when no rule applies; and when rules are off (`fast_rules(False)`, or
  AUTOGRAD_LITE_FAST_RULES=0 for a process);
- under vmap (a Batched argument, core/batched.py), unless the fusable is one of the
  library's ops with a batching rule (softmax, layer_norm, cross_entropy, gather, linear...),
  which then calls the op once for every example, so its fast rule runs on the batch.

A rule's pullback may still meet a traced cotangent (jvp's double vjp, or a trace that
differentiates the cotangent): a rule returns `(out, pullback, traced_pullback)` with one
written with the library's ops over what it saved (the same function twice where the
pullback is already written so), or `(out, pullback)`, and then the engine differentiates
the plain function at the rule's arguments, which it keeps for that.

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
from .batched import Batched, batched_call, holds_batched
from .differentiate import vjp
from .randomness import copied_generator
from .tracer import (Box, Node, check_keyword_only, escaped_value_error, every_value,
                     move_keywords_to_positions, opened, positional_parameters)
from .tree import children, rebuild

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
    """A fast rule's body and its `applies` predicate (None: it applies to every call)."""
    __slots__ = ("body", "applies")

    def __init__(self, body, applies):
        self.body, self.applies = body, applies


PLAIN_DEFINITIONS = set()  # code objects of the fusables' plain functions (viz/scopes.py)


def fusable(fn=None, *, name=None, op=False):
    """Make the plain function `fn` one that fast rules (`fast_rule`) may stand in for; with
    no rule, or rules off, a call is a call of `fn`. `name` (default fn's) names the node a
    rule records, in errors and pictures. op: one of the library's ops, drawn in pictures as
    one op (its rule runs there too, as a primitive's body does), whose arguments are arrays
    and static operands; otherwise (a model's function) pictures and captures run `fn`, to
    show the ops it is made of, and arguments may be trees (NamedTuples of parameters).
    The result exposes `plain` (fn), `rules`, `op_name` and `parameters`."""
    if fn is None:
        return functools.partial(fusable, name=name, op=op)
    PLAIN_DEFINITIONS.add(fn.__code__)

    @functools.wraps(fn)
    def fusable_call(*args, **kwargs):
        try:
            if fusable_call.rules and (_Switch.on or op):  # an op: one op in pictures,
                return _dispatch(fusable_call, args, kwargs)  # rules off too
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
    fusable_call.drawn_as_op = op
    return fusable_call


def fast_rule(function, applies=None):
    """Register the decorated `rule(*args, **kwargs) -> (out, pullback[, traced_pullback])`
    against the fusable `function`, for the calls where `applies(*args, **kwargs)` (None:
    every call) is true; both see the plain arrays (the module docstring has the contract).
    Rules registered earlier are tried first. Returns the rule itself."""
    if not hasattr(function, "rules"):
        raise TypeError(f"fast_rule: {getattr(function, '__name__', function)!r} is not a "
                        "fusable function; define it with @ag.fusable to attach rules to it")

    def register(rule):
        function.rules.append(Rule(rule, applies))
        return rule
    return register


def _leaves(args, flat):
    """(the leaves of the positional arguments in tree order, their skeleton: None for a
    leaf, a tuple of the children's skeletons for a container); an op's arguments are its
    leaves (arrays and static operands), and its skeleton None."""
    if flat:
        return args, None
    leaves = []
    return leaves, _flatten(args, leaves)


def _flatten(kids, leaves):
    """Append the leaves below the children `kids` to `leaves` (containers as tree.children
    has them: tuples, NamedTuples, lists, dicts) and return the children's skeleton. One
    call per container, not per leaf: on small arrays the calls would cost more than the
    rule saves."""
    skeleton = []
    for kid in kids:
        t = type(kid)
        if t is not np.ndarray and t is not Box and isinstance(kid, (tuple, list, dict)):
            skeleton.append(_flatten(kid.values() if isinstance(kid, dict) else kid, leaves))
        else:
            leaves.append(kid)
            skeleton.append(None)
    return tuple(skeleton)


def _rebuilt(args, leaves):
    """The positional arguments with their leaves replaced, in order."""
    return tuple(_rebuilt_children(args, iter(leaves)))


def _rebuilt_children(kids, leaves):
    rebuilt = []
    for kid in kids:
        t = type(kid)
        if t is np.ndarray or t is Box or not isinstance(kid, (tuple, list, dict)):
            rebuilt.append(next(leaves))
        elif t is tuple or t is list:
            rebuilt.append(t(_rebuilt_children(kid, leaves)))
        else:  # a NamedTuple, a dict
            rebuilt.append(rebuild(kid, _rebuilt_children(children(kid), leaves)))
    return rebuilt


def _cotangent_leaves(skeleton, cotangents, out):
    """Append to `out` the cotangents a rule's pullback gave (one tree per argument, None
    for an argument or a subtree without one) as one entry per leaf of the arguments."""
    for shape, cotangent in zip(skeleton, cotangents):
        if shape is None:
            out.append(cotangent)
        elif cotangent is None:
            out.extend([None] * _count_leaves(shape))
        else:
            _cotangent_leaves(shape, cotangent.values() if isinstance(cotangent, dict)
                              else cotangent, out)
    return out


def _count_leaves(skeleton):
    return sum(1 if shape is None else _count_leaves(shape) for shape in skeleton)


def _applicable(function, args, kwargs):
    """The first rule that applies to the call, or None (also when rules are off)."""
    if not _Switch.on:
        return None
    for rule in function.rules:
        if rule.applies is None or rule.applies(*args, **kwargs):
            return rule
    return None


def _dispatch(function, args, kwargs):
    """A call of a fusable with rules on: a rule where one applies and no enclosing trace or
    picture asks for the plain function, else the plain function."""
    flat = function.drawn_as_op
    if kwargs or len(args) < len(function.parameters):  # rules see every argument, the
        args, kwargs = move_keywords_to_positions(  # defaults the function's own
            function.op_name, function.parameters, args, kwargs)
    leaves, skeleton = _leaves(args, flat)
    top = None
    for a in leaves:
        t = type(a)
        if t is Box:
            if top is None or a.trace.level > top.level:
                top = a.trace
        elif t is Batched or flat and t is tuple and holds_batched(a):  # under vmap: an
            if flat:  # op's batching rule, else the plain function
                return batched_call(function, args, kwargs, plain=function.plain)
            return function.plain(*args, **kwargs)
    if kwargs:
        check_keyword_only(function.op_name, kwargs, top)
    if top is None:  # nothing traced: the rule's output only
        rule = _applicable(function, args, kwargs)
        out = function.plain(*args, **kwargs) if rule is None else rule.body(*args, **kwargs)[0]
        if type(out) is np.ndarray or not flat:
            return out
        return as_op_output(out)  # an op's output: an array
    if not top.active:
        raise escaped_value_error(function.op_name, top)
    if top.picturing and not function.drawn_as_op:
        return function.plain(*args, **kwargs)
    values, parents = opened(leaves, top)
    if any(type(v) is Box for v in values) or any(type(v) is Box for v in kwargs.values()):
        return function.plain(*args, **kwargs)  # higher order: the traces record the ops
    plain_args = values if flat else _rebuilt(args, values)
    rule = _applicable(function, plain_args, kwargs)
    generators = {i: copy.deepcopy(v) for i, v in enumerate(values)  # as they were before
                  if type(v) is np.random.Generator}  # the call drew: for its plain function
    if rule is None and top.picturing:  # an op, drawn as one whichever body computes it
        rule = Rule(_plain_rule(function, values, parents, kwargs, generators), None)
    elif rule is None:
        return function.plain(*args, **kwargs)
    out, pullback, *traced = rule.body(*plain_args, **kwargs)
    if traced:
        traced = traced[0] if flat else _pullback_of_leaves(traced[0], skeleton)
    else:
        traced = _plain_function_pullback(function, plain_args, values, parents, kwargs, flat,
                                          generators)
    pullback = node_pullback(pullback, traced, None if flat else skeleton)
    if type(out) is not np.ndarray and type(out) is not Box:
        out = as_op_output(out)  # an array subclass (core/weak.py's) stays as it is
    n_args = max(len(leaves), len(function.parameters)) if flat else len(leaves)
    box = Box(out, top, Node(pullback, tuple(parents), function.op_name, out.shape, out.dtype,
                             n_args, RuleCall(function, rule, skeleton)))
    if top.on_op is not None:
        top.on_op(function, leaves, kwargs, box)
    return box


class RuleCall:
    """What a fast rule's node keeps to name a missing cotangent: the fusable, the rule, and
    the skeleton of the arguments' leaves (None for an op's)."""
    __slots__ = ("function", "rule", "skeleton")

    def __init__(self, function, rule, skeleton):
        self.function, self.rule, self.skeleton = function, rule, skeleton

    def check_missing_cotangent(self, node, leaf, parent, cotangents):
        """The rule's pullback gave None (`cotangents[leaf]`) for the traced float leaf number
        `leaf`: an error naming the rule and the argument (None means "no derivative": ints,
        static values), unless the same traced value is another leaf that got a cotangent
        (one object passed twice, as self-attention's x_q and x_kv, may get it whole once)."""
        if any(p is parent and i != leaf and cotangents[i] is not None
               for i, p in node.parents):
            return
        names = [name for name, _ in self.function.parameters]
        if self.skeleton is None:
            where = f"'{names[leaf]}'" if leaf < len(names) else f"args[{leaf}]"
        else:
            position, first = 0, 0
            for position, shape in enumerate(self.skeleton):
                count = 1 if shape is None else _count_leaves(shape)
                if leaf < first + count:
                    break
                first += count
            name = names[position] if position < len(names) else f"args[{position}]"
            where = f"'{name}'" if self.skeleton[position] is None else \
                f"'{name}' (its leaf {leaf - first} in tree order)"
        rule = getattr(self.rule.body, "__name__", "rule")
        raise TypeError(
            f"{self.function.op_name}: the fast rule {rule}'s pullback gave no cotangent "
            f"(None) for argument {where}, {parent.shape} {parent.dtype}, which is "
            "differentiated: None means that an argument has no derivative (an int, a static "
            "value); where the derivative is zero, return zeros")


def _pullback_of_leaves(pullback, skeleton):
    """A rule's pullback (one cotangent tree per argument) as the node's: one per leaf of
    the arguments, whose skeleton (`_leaves`) is given: the pullback keeps no argument."""
    def leaves_pullback(g):
        return tuple(_cotangent_leaves(skeleton, pullback(g), []))
    return _named_after(pullback, leaves_pullback)


def _plain_function_pullback(function, plain_args, values, parents, kwargs, flat, generators):
    """For a traced cotangent, the vjp of the plain function in its traced leaves, at the
    plain arguments the rule was given (`values`: their leaves), every other argument held,
    written with the library's ops. Each generator among them ({leaf: a copy as it was
    before the call drew}) draws again from a copy of that state: the plain function draws
    the masks the call drew (dropout)."""
    def of_traced(*traced_values):
        traced = [i for i, _ in parents]
        leaves = list(values)
        for i, v in zip(traced, traced_values):
            leaves[i] = v
        for i, generator in generators.items():
            leaves[i] = copied_generator(generator)
        return function.plain(*(leaves if flat else _rebuilt(plain_args, leaves)), **kwargs)

    def plain_function_pullback(g):
        traced = [i for i, _ in parents]
        _, pullback = vjp(of_traced, *[values[i] for i in traced])
        cotangents = [None] * len(values)
        for i, c in zip(traced, pullback(g)):
            cotangents[i] = c
        return tuple(cotangents)
    return plain_function_pullback


def _plain_rule(function, values, parents, kwargs, generators):
    """A rule for an op that a picture draws while no rule of its own runs: the plain
    function's output, and for every cotangent the plain function's vjp."""
    def plain_rule(*args, **kwargs):
        pullback = _plain_function_pullback(function, args, values, parents, kwargs, True,
                                            generators)
        pullback.__name__ = pullback.__qualname__ = f"{function.op_name}_pullback"
        return function.plain(*args, **kwargs), pullback, pullback
    return plain_rule


def node_pullback(pullback, traced_pullback, skeleton=None):
    """A rule's pullback as its node's: `pullback` for a plain cotangent, its cotangent trees
    (one per argument) read as one cotangent per leaf of the arguments whose skeleton
    (`_leaves`) is given (None: an op's, one per argument already); for a traced cotangent (a
    trace opened around the backward pass, as jvp's double vjp, or one that differentiates
    what the cotangent was made from) `traced_pullback`, which that trace records, and which
    gives one cotangent per leaf. One call on the way back, named as the rule's pullback."""
    if traced_pullback is pullback and skeleton is None:
        return pullback

    def fused_pullback(g):
        if type(g) is Box or type(g) is Batched:
            return traced_pullback(g)
        if skeleton is None:
            return pullback(g)
        return tuple(_cotangent_leaves(skeleton, pullback(g), []))
    return _named_after(pullback, fused_pullback)


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
