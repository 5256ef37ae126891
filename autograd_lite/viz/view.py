"""What a picture of a recorded call shows (`View`): the items drawn as nodes, the calls
collapsed into boxes, the edges, the clusters and the outputs. dot.py writes a View as
Graphviz text; the explorer draws one call's View at a time.

Depth counts function scopes from the traced function (depth 1): `depth=None` draws every
op; `depth=0` the whole call as one box; `depth=k` the ops of scopes nested at most k deep,
each call at depth k + 1 as one box (its name, shapes in and out, op and parameter counts).
One call's view (`View(graph, call=scope)`) is the picture at that call's depth cut down to
its ops: its own ops, its nested calls as boxes, what flows in from outside (parameters,
data, constants, ops of other calls) and what flows out (used after the call, or an output).
A parameter or constant whose every use lies inside one box is drawn inside it.
"""
import numpy as np


class View:
    """What one picture shows. Every item of the view is either drawn as a node or inside
    a box:

    ops: the ops drawn, in the order recorded (every op, or those of `call`).
    nodes: ids of the items drawn as nodes of their own, in the order recorded.
    box_of: {item id: Scope} for the items drawn inside a collapsed call: its ops, and
        the parameters and constants used only there.
    boxes: {Scope: BoxInfo}, the collapsed calls, in the order of their first op.
    edges: (item id, op id) where the item's value flows into the op; each end is the
        item's own node or the box holding it; one edge per item and drawn target.
    outputs: (label, item id) of the values that leave: the graph's outputs, or for one
        call's view each value made in the call and used after it (named as the graph's
        output it is, else 'output').
    clusters: {item id: scope path} the nested clusters each node is drawn in (a box
        sits in the clusters of its call's callers, `BoxInfo.cluster`).
    """

    def __init__(self, graph, depth=None, call=None):
        self.graph, self.call = graph, call
        self.depth = depth if call is None else len(call.path)
        # the call's ops: those that ran in it or in a call nested in it
        self.ops = graph.ops if call is None else [op for op in graph.ops if call in op.scope.path]
        self.box_of = {}
        for op in self.ops:
            path = op.scope.path if op.scope is not None else ()
            if self.depth is not None and len(path) > self.depth:
                self.box_of[op.id] = path[self.depth]
        self.box_of.update(self._used_inside_one_box())
        self.nodes = [i for i in self._drawn() if i not in self.box_of]
        self.outputs = graph.outputs if call is None else self._leaving()
        self.boxes, self.edges = {}, []
        self._connect()
        self.clusters = self._place_nodes()

    def _drawn(self):
        """The ids of the items of the view: every item, or the call's ops and their inputs."""
        if self.call is None:
            return [it.id for it in self.graph.items]
        return sorted({op.id for op in self.ops}
                      | {source for op in self.ops for source, _ in op.inputs})

    def _used_inside_one_box(self):
        """{item id: Scope} for the parameters and constants whose every use is in one box."""
        holders = {}  # item id -> the boxes of the ops using it (None: an op drawn as a node)
        for op in self.ops:
            for source, _ in op.inputs:
                holders.setdefault(source, set()).add(self.box_of.get(op.id))
        return {source: next(iter(boxes)) for source, boxes in holders.items()
                if len(boxes) == 1 and None not in boxes
                and self.graph.items[source].kind in ("param", "const")}

    def _leaving(self):
        """(label, item id) for each value made in the call that is used outside it or is an
        output of the graph, in the order recorded."""
        inside = {op.id for op in self.ops}
        names = {}
        for label, source in self.graph.outputs:
            names.setdefault(source, label)
        consumers = self.graph.consumers
        return [(names.get(i, "output"), i) for i in sorted(inside)
                if i in names or any(user not in inside for user in consumers.get(i, ()))]

    def box(self, scope):
        """The BoxInfo of a collapsed call, made on first use."""
        return self.boxes.setdefault(scope, BoxInfo(scope))

    def _connect(self):
        """Fill the boxes with their ops and what flows out of them, and list the edges."""
        items, seen = self.graph.items, set()
        for op in self.ops:
            target_box = self.box_of.get(op.id)
            if target_box is not None:
                self.box(target_box).add_op(op, self.box_of, items)
            for source, _ in op.inputs:
                source_box = self.box_of.get(source)
                drawn_target = (source, target_box, op.id if target_box is None else None)
                if (source_box is not None and source_box is target_box) or drawn_target in seen:
                    continue  # a value used inside its own box, or an edge already drawn
                seen.add(drawn_target)
                self.edges.append((source, op.id))
                if source_box is not None:
                    self.box(source_box).outputs.setdefault(source, items[source].shape)
        for _, source in self.outputs:
            if source in self.box_of:
                self.box(self.box_of[source]).outputs.setdefault(source, items[source].shape)

    def _place_nodes(self):
        """{item id: scope path} for the nodes, ops first: an op in the clusters of its scope;
        a parameter or constant in the innermost cluster holding all its uses."""
        items = self.graph.items
        clusters = {}
        for i in self.nodes:
            if items[i].kind == "op":
                clusters[i] = items[i].scope.path if items[i].scope is not None else ()
        placed = {}
        for op in self.ops:
            box = self.box_of.get(op.id)
            where = box.path[:-1] if box is not None else clusters[op.id]
            for source, _ in op.inputs:
                if items[source].kind in ("param", "const") and source not in self.box_of:
                    placed[source] = common_path(placed.get(source, where), where)
        for i in self.nodes:
            if items[i].kind != "op":
                clusters[i] = placed.get(i, ())
        return clusters

    def count(self):
        """Nodes drawn (ops, boxes, inputs, constants and outputs), legend excluded."""
        return len(self.nodes) + len(self.boxes) + len(self.outputs)


def common_path(a, b):
    """The longest common prefix of two scope paths."""
    n = 0
    while n < len(a) and n < len(b) and a[n] is b[n]:
        n += 1
    return a[:n]


class BoxInfo:
    """A collapsed call: its ops (the first's id, how many, what they keep), the parameters
    it uses, what flows in and out (inputs: [(item id, shape passed)], the parameters and
    the constants drawn inside excepted; outputs: {item id: shape})."""

    def __init__(self, scope):
        self.scope, self.first, self.n_ops, self.kept = scope, None, 0, 0
        self.params, self.inputs, self.outputs = {}, [], {}

    @property
    def cluster(self):
        """The scope path of the clusters the box is drawn in: its call's callers."""
        return self.scope.path[:-1]

    def add_op(self, op, box_of, items):
        if self.first is None:
            self.first = op.id
        self.n_ops += 1
        self.kept += op.kept + op.residual
        for source, shape in op.inputs:
            item = items[source]
            if item.kind == "param":
                self.params[source] = item
            elif box_of.get(source) is not self.scope:
                if (source, shape) not in self.inputs:  # a slice of ids is an input of its own
                    self.inputs.append((source, shape))

    @property
    def n_param_values(self):
        return sum(int(np.prod(p.shape)) for p in self.params.values())
