"""What the explorer shows when one function call (a scope) is opened: the call's own ops,
each nested call as one box, the values that flow in from outside as stubs (parameters,
token ids, constants, ops of the callers) and the values that flow out as output stubs.

This is `view.py`'s picture at the scope's depth, cut down to one call: a page opens one
of these at a time, and `layout.py` lays each one out with Graphviz. A parameter or
constant whose every use in the call lies inside one nested call is drawn inside that
box (counted in its label), as in `view.py`.
"""
import numpy as np

from .labels import count_text, dtype_text, shape_text, size_text

MAX_LABEL = 48  # characters of a node's line of text


class Slot:
    """One node of a scope's view: kind ('op', 'call', 'param', 'input', 'data', 'const',
    'outer' for an op of another call, 'output'), ref (an item id, or the Scope of a call)
    and lines (its text, one string per line)."""

    __slots__ = ("kind", "ref", "lines")

    def __init__(self, kind, ref, lines):
        self.kind, self.ref, self.lines = kind, ref, [_cut(line) for line in lines]


def _cut(text):
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def consumers_of(graph):
    """{item id: [op ids that use it]} over the whole graph, in recorded order."""
    out = {}
    for op in graph.ops:
        for source, _ in op.inputs:
            users = out.setdefault(source, [])
            if not users or users[-1] != op.id:
                users.append(op.id)
    return out


def _inside(op, scope, depth):
    path = op.scope.path
    return len(path) >= depth and path[depth - 1] is scope


class ScopeView:
    """The view of one call. slots: the nodes, in recorded order (stubs and ops by item id,
    each call box at its first op, outputs last); edges: (slot index, slot index) pairs,
    one per pair of nodes that a value flows between."""

    def __init__(self, graph, scope, consumers):
        self.graph, self.scope, self.consumers = graph, scope, consumers
        depth = len(scope.path)
        items = graph.items
        place, calls = {}, {}  # item id -> slot key; child Scope -> its ops
        for op in graph.ops:
            if not _inside(op, scope, depth):
                continue
            if op.scope is scope:
                place[op.id] = ("item", op.id)
            else:
                child = op.scope.path[depth]
                calls.setdefault(child, []).append(op)
                place[op.id] = ("call", child)
        inside = set(place)
        uses = {}
        for op_id in inside:
            for source, _ in items[op_id].inputs:
                uses.setdefault(source, set()).add(place[op_id])
        for source, where in uses.items():
            if source in inside:
                continue
            if items[source].kind in ("param", "const") and len(where) == 1 \
                    and next(iter(where))[0] == "call":
                continue  # drawn inside that call's box
            place[source] = ("item", source)
        leaving = [i for i in sorted(inside) if self._leaves(i, inside, consumers)]
        order = sorted(set(place.values()), key=lambda key: self._first_id(key, calls))
        keys = order + [("out", i) for i in leaving]
        self.slots = [self._slot(key, calls) for key in keys]
        index = {key: n for n, key in enumerate(keys)}
        edges = []
        for op_id in sorted(inside):
            for source, _ in items[op_id].inputs:
                if source in place and place[source] != place[op_id]:
                    edges.append((index[place[source]], index[place[op_id]]))
        edges += [(index[place[i]], index[("out", i)]) for i in leaving]
        self.edges = list(dict.fromkeys(edges))

    def _leaves(self, item_id, inside, consumers):
        """Whether a value made in this call is used outside it, or is an output of the graph."""
        if any(source == item_id for _, source in self.graph.outputs):
            return True
        return any(user not in inside for user in consumers.get(item_id, ()))

    @staticmethod
    def _first_id(key, calls):
        return calls[key[1]][0].id if key[0] == "call" else key[1]

    def _slot(self, key, calls):
        kind, ref = key
        items = self.graph.items
        if kind == "call":
            return call_slot(ref, calls[ref], items,
                             lambda i, inside: self._leaves(i, inside, self.consumers))
        item = items[ref]
        if kind == "out":
            names = [label for label, source in self.graph.outputs if source == ref]
            return Slot("output", ref, [names[0] if names else "output", typed_text(item)])
        if item.kind == "op" and item.scope is not self.scope:
            return Slot("outer", ref, [f"{item.label} in {item.scope.label}", typed_text(item)])
        first = f"{item.label} {item.extra}".strip() if item.kind == "op" else item.label
        return Slot(item.kind, ref, [first, typed_text(item)])


def typed_text(item):
    """'(2, 16, 512) f32'"""
    return f"{shape_text(item.shape)} {dtype_text(item.dtype)}"


def call_slot(scope, ops, items, leaves):
    """A nested call as one box: its name, the shapes in and out (leaves(item id, inside):
    whether a value made in the call is used after it), its ops and parameters."""
    inside = {op.id for op in ops}
    ins, params = [], {}
    for op in ops:
        for source, shape in op.inputs:
            if items[source].kind == "param":
                params[source] = items[source]
            elif source not in inside and shape not in ins:
                ins.append(shape)
    outs = [op.shape for op in ops if leaves(op.id, inside)]
    flow = f"{_shapes(ins)} → {_shapes(outs)}"
    counts = f"{len(ops)} op{'s' * (len(ops) != 1)}"
    if params:
        n_values = sum(int(np.prod(p.shape)) for p in params.values())
        counts += f" · {len(params)} param{'s' * (len(params) != 1)} ({count_text(n_values)})"
    kept = sum(op.kept + op.residual for op in ops)
    if kept:
        counts += f" · keeps {size_text(kept)}"
    return Slot("call", scope, [scope.label, flow, counts])


def _shapes(shapes, limit=2):
    """'(2, 16, 512), (2, 1, 1, 16) +1'"""
    text = ", ".join(map(shape_text, shapes[:limit])) or "()"
    return text + (f" +{len(shapes) - limit}" if len(shapes) > limit else "")
