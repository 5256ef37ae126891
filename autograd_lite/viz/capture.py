"""Reading an intermediate value of any call: the outputs of the ops that match a name and a
function scope, in the order they ran, without changing the code that computes them.

    weights = ag.viz.capture(transformer.apply, p, src, tgt, op="softmax", scope="cross_attention")

It runs the call once as a picture does (record.py), with `scopes.ScopeTracker` following
the functions the call goes through: the scopes are a picture's clusters. Only ops that
depend on a float leaf of the arguments are seen: parameters closed over by `f`, rather than
passed to it, are constants and their ops run unseen. Its trace ends when the call returns.
"""
from ..core.differentiate import box_input
from ..core.tracer import Trace, end_trace
from ..core.tree import is_differentiable, tree_map
from .scopes import ScopeTracker


class Catch:
    """The recording hook of one capture: keeps the outputs of the matching ops, and the
    name of every op seen, for the error when nothing matched."""

    def __init__(self, op, scope, scopes):
        self.op, self.scope, self.scopes = op, scope, scopes
        self.outputs, self.ops_seen = [], set()

    def in_scope(self):
        """Whether a function named self.scope is in the current scope path."""
        current = self.scopes.scope
        return current is not None and any(s.name == self.scope for s in current.path)

    def on_op(self, op, args, kwargs, box):
        self.ops_seen.add(op.op_name)
        if op.op_name == self.op and (self.scope is None or self.in_scope()):
            self.outputs.append(box.value)

    def nothing_matched(self, f):
        """The error for a capture that found no op: the ops and scopes that ran instead."""
        where = "" if self.scope is None else f" in a function named {self.scope!r}"
        root = self.scopes.root
        scopes = sorted({s.name for s in root.walk()}) if root is not None else []
        seen = (f"ops seen: {', '.join(sorted(self.ops_seen))}; scopes seen: {', '.join(scopes)}"
                if self.ops_seen else
                "no op was recorded: pass the parameters as an argument, not in a closure")
        return ValueError(f"ag.viz.capture: no {self.op!r} op ran{where} during "
                          f"{getattr(f, '__name__', type(f).__name__)} ({seen})")


def capture(f, *args, op="softmax", scope=None):
    """Run f(*args) once and return the outputs of its ops named `op` (an op's `op_name`:
    'softmax', 'matmul', 'layer_norm', ...) that ran inside a function named `scope`
    (anywhere below it; None: anywhere), in call order: a list of arrays (of values traced
    by an enclosing ag.gradient, when capture runs inside one).

    Float leaves of the arguments are traced (as ag.viz.trace does); f's result is dropped.
    Raises ValueError, naming the ops and scopes that did run, when no op matched.
    """
    if not isinstance(op, str) or not op:
        raise TypeError(f"ag.viz.capture: op must be an op's name such as 'softmax', got {op!r}")
    if scope is not None and (not isinstance(scope, str) or not scope):
        raise TypeError(f"ag.viz.capture: scope must be None or a function's name such as "
                        f"'cross_attention', got {scope!r}")
    scopes = ScopeTracker()
    catch = Catch(op, scope, scopes)
    trace = Trace(on_op=scopes.unobserved(catch.on_op), caller="viz.capture", picturing=True)
    boxed = [tree_map(lambda leaf: box_input(leaf, trace) if is_differentiable(leaf) else leaf,
                      arg) for arg in args]
    try:
        with scopes:
            f(*boxed)
    finally:
        end_trace(trace)
    if not catch.outputs:
        raise catch.nothing_matched(f)
    return catch.outputs
