"""Recording one call for a picture: `record(f, args)` boxes the float leaves of the
arguments on a fresh engine trace (as `gradient` does) whose recording hook is
`Recorder.on_op` (`tracer.Trace(on_op=...)`), and runs `f` once inside a `ScopeTracker`.

Each op the engine records becomes one item: its traced inputs, its static operands
(integer arrays and masks become input nodes, small constants are folded into its label,
from the op's `op_name` and `parameters`), its scope and its `Node`. So exactly what the
engine records is pictured: a primitive's body runs on plain arrays, unseen, unless the call
itself differentiates (a picture of `ag.grad(f)`). Keyword-only arguments are not shown.
Constants made during the call are named by the variable holding them in user code, else
by the user function that returned them. Afterwards saved.py measures what the pullbacks
keep; the result is plain data (`Item`s and `Scope`s), the boxes, nodes and pullbacks
released.
"""
import inspect

import numpy as np

from ..core.differentiate import argument_names, box_input
from ..core.tracer import Box, Trace
from ..core.tree import is_differentiable, tree_leaves, tree_map, tree_paths
from .labels import OPERAND_NAMES, describe, foldable
from .saved import measure_kept, owner
from .scopes import ScopeTracker, user_source_line
from .values import gradient_norms, statistics


class Item:
    """A node of the picture: an op, or a value that is not an op's output.

    kind: 'param' (a float leaf inside an argument's container: p.encoder[0].attn.wq),
    'input' (an argument that is itself a float array: x), 'data' (an array leaf that is
    not float: token ids, masks), 'const' (an array made inside the call), 'op'.
    inputs (ops): (item id, shape of the array passed) per array operand.
    kept: bytes of this value that pullbacks keep for the backward pass;
    residual (ops): bytes of other arrays this op's pullback keeps (x_hat, masks, ...).
    source (ops): (file, line number, line text) of the user code that applied the op.
    pullback (ops): the name of the op's pullback function.
    stats: the value's statistics (values.py) when recorded with values=True, else None;
    grad_norm (float inputs, values=True): the norm of the output's gradient by this value.
    """

    __slots__ = ("id", "kind", "label", "shape", "dtype", "nbytes", "scope", "inputs",
                 "extra", "kept", "residual", "source", "pullback", "stats", "grad_norm")

    def __init__(self, id, kind, label, shape, dtype, nbytes, scope=None):
        self.id, self.kind, self.label, self.scope = id, kind, label, scope
        self.shape, self.dtype, self.nbytes = tuple(shape), np.dtype(dtype), int(nbytes)
        self.inputs, self.extra, self.kept, self.residual = [], "", 0, 0
        self.source, self.pullback, self.stats, self.grad_norm = None, None, None, None


class Recorder:
    """The items of one recorded call, filled by the trace's recording hook `on_op`."""

    def __init__(self, scopes, values=False):
        self.scopes = scopes  # the ScopeTracker: the current scope, names of constants
        self.values = values  # measure each value's statistics
        self.items = []
        self.by_node = {}    # Node -> item id
        self.by_owner = {}   # id(owning array) -> item id, for arguments' arrays and op outputs
        self.by_view = {}    # (owner, offset, shape, strides, dtype) -> item id, for constants
        self.const_owner = {}  # id(owning array) -> the first constant item over its memory
        self.keep = []       # every array seen, so that ids stay unique while recording
        self.nodes = []      # (item id, Node) of each recorded op, for the saved-array analysis

    def new_item(self, kind, label, value, scope=None):
        nbytes = int(np.prod(value.shape)) * np.dtype(value.dtype).itemsize  # value may be a Box
        item = Item(len(self.items), kind, label, value.shape, value.dtype, nbytes, scope)
        if self.values and type(value) is np.ndarray:
            item.stats = statistics(value)
        self.items.append(item)
        return item

    def add_input(self, path, name, boxed):
        """A param or input item for a float leaf of the arguments, traced as `boxed`."""
        value = boxed.value
        kind = "param" if path != name else "input"  # a leaf inside a container, or a bare array
        item = self.new_item(kind, path, value)
        self.by_node[boxed.node] = item.id
        if type(value) is np.ndarray:
            self.keep.append(value)
            self.by_owner[id(owner(value))] = item.id

    def add_argument_array(self, label, value):
        """A data item for an array leaf of the arguments (token ids, masks), one per owning
        array: a slice of it passed to an op is an edge from it, labelled with its shape."""
        base = owner(value)
        if id(base) not in self.by_owner:
            self.keep.append(base)
            self.by_owner[id(base)] = self.new_item("data", label, value).id

    def operand_item(self, name, a):
        """The item of a plain array operand: the argument or op output whose memory it is,
        else a constant made during the call, one item per view (two slices of a position
        table are two constants, each of its own shape). Named by the variable that holds it
        in user code, else by the user function that returned it, else by the parameter."""
        source = self.by_owner.get(id(owner(a)))
        if source is not None:
            return source
        key = (id(owner(a)), a.__array_interface__["data"][0], a.shape, a.strides, a.dtype)
        if key not in self.by_view:
            self.keep.append(a)
            label = (self.scopes.bound_name(a) or self.scopes.returned_name(a)
                     or ("const" if name in OPERAND_NAMES else name))
            self.by_view[key] = self.new_item("const", label, a).id
            self.const_owner.setdefault(id(owner(a)), self.by_view[key])
        return self.by_view[key]

    def on_op(self, op, args, kwargs, box):
        """The trace's recording hook: one op item, in the current scope, with its inputs
        and a label from the op's name and its static arguments (`softmax axis=0`)."""
        node = box.node
        item = self.new_item("op", op.op_name, box.value, self.scopes.scope)
        self.keep.append(box.value)
        self.by_node[node] = item.id
        self.by_owner.setdefault(id(owner(box.value)), item.id)
        self.nodes.append((item.id, node))
        item.source = user_source_line()
        item.pullback = getattr(node.pullback, "__name__", None)
        traced = dict(node.parents)
        positional, options = [], []
        for i, a in enumerate(args):
            name, default = (op.parameters[i] if i < len(op.parameters)
                             else ("xs", inspect.Parameter.empty))  # under *xs
            if i in traced:
                source = self.by_node.get(traced[i])
                if source is None:  # made where the recorder could not see it
                    source = self.new_item("const", "untracked", a.value).id
                item.inputs.append((source, a.shape))
                positional.append("·")
            elif isinstance(a, np.ndarray) and (id(owner(a)) in self.by_owner or not foldable(a)):
                item.inputs.append((self.operand_item(name, a), a.shape))
                positional.append("·")
            else:
                shown = describe(name, default, a)
                if shown is not None:
                    (positional if shown[0] == "operand" else options).append(shown[1])
        text = f"({', '.join(positional)})" if any(p != "·" for p in positional) else ""
        item.extra = (text + " " + " ".join(options)).strip()


def record(f, args, values=False):
    """Run f(*args) once with its float leaves traced: (items, root scope, outputs).

    outputs: (label, item id) for each traced leaf of the result.
    values: also measure each value's statistics and, by a backward pass over the recorded
    call, the gradient norm of each float input (`values.gradient_norms`).
    """
    scopes = ScopeTracker()
    recorder = Recorder(scopes, values)
    trace = Trace(on_op=scopes.unobserved(recorder.on_op), picturing=True)
    boxed = []
    for name, arg in zip(argument_names(f, len(args)), args):
        paths = iter(tree_paths(arg, root=name))  # in the order tree_map visits the leaves

        def box(leaf):
            path = next(paths)
            if is_differentiable(leaf):
                boxed = box_input(leaf, trace)
                recorder.add_input(path, name, boxed)
                return boxed
            if isinstance(leaf, np.ndarray):
                recorder.add_argument_array(path, leaf)
            return leaf
        boxed.append(tree_map(box, arg))
    with scopes:
        out = f(*boxed)
    leaves = zip(tree_leaves(out), tree_paths(out, root="output"))
    traced = [(path, leaf.node) for leaf, path in leaves  # the outputs on this trace
              if type(leaf) is Box and leaf.trace is trace]
    outputs = [(path, recorder.by_node[node]) for path, node in traced if node in recorder.by_node]
    measure_kept(recorder)
    if values:
        gradient_norms(recorder, [node for _, node in traced])
    return recorder.items, scopes.root, outputs
