"""What one picture of a recorded call shows at a given depth: which items are drawn as
nodes, which calls are collapsed into boxes, the edges between them and the clusters
they sit in. `dot.py` writes a `View` as Graphviz text.

Depth counts function scopes from the traced function itself:

- `depth=None`: every op is drawn, inside one cluster per function call;
- `depth=0`: the whole call is one box;
- `depth=k`: ops in scopes nested at most k deep (the traced function is depth 1,
  the functions it calls depth 2, ...) are drawn; each call at depth k + 1 is one
  box with its function name, input and output shapes, op count, parameter count.

A parameter or constant whose every use lies inside one box is drawn inside it
(counted in its label, not as a node of its own).
"""
import numpy as np


class View:
    """What one picture shows. Every item is either drawn as a node or inside a box:

    nodes: ids of the items drawn as nodes of their own, in the order recorded.
    box_of: {item id: Scope} for the items drawn inside a collapsed call: its ops, and
        the parameters and constants used only there.
    boxes: {Scope: BoxInfo}, the collapsed calls, in the order of their first op.
    edges: (item id, op id) where the item's value flows into the op; each end is the
        item's own node or the box holding it; one edge per item and drawn target.
    clusters: {item id: scope path} the nested clusters each node is drawn in (a box
        sits in the clusters of its call's callers, `BoxInfo.cluster`).
    """

    def __init__(self, graph, depth):
        self.graph, self.depth = graph, depth
        self.box_of = {}
        for op in graph.ops:
            path = op.scope.path if op.scope is not None else ()
            if depth is not None and len(path) > depth:
                self.box_of[op.id] = path[depth]
        self.box_of.update(self._used_inside_one_box())
        self.nodes = [it.id for it in graph.items if it.id not in self.box_of]
        self.boxes, self.edges = {}, []
        self._connect()
        self.clusters = self._place_nodes()

    def _used_inside_one_box(self):
        """{item id: Scope} for the parameters and constants whose every use is in one box."""
        holders = {}  # item id -> the boxes of the ops using it (None: an op drawn as a node)
        for op in self.graph.ops:
            for source, _ in op.inputs:
                holders.setdefault(source, set()).add(self.box_of.get(op.id))
        inside = {}
        for it in self.graph.items:
            boxes = holders.get(it.id, set())
            if it.kind in ("param", "const") and len(boxes) == 1 and None not in boxes:
                inside[it.id] = next(iter(boxes))
        return inside

    def box(self, scope):
        """The BoxInfo of a collapsed call, made on first use."""
        return self.boxes.setdefault(scope, BoxInfo(scope))

    def _connect(self):
        """Fill the boxes with their ops and what flows out of them, and list the edges."""
        items, seen = self.graph.items, set()
        for op in self.graph.ops:
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
        for _, source in self.graph.outputs:
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
        for op in self.graph.ops:
            box = self.box_of.get(op.id)
            where = box.path[:-1] if box is not None else clusters[op.id]
            for source, _ in op.inputs:
                if items[source].kind in ("param", "const") and source not in self.box_of:
                    placed[source] = _common(placed.get(source, where), where)
        for i in self.nodes:
            if items[i].kind != "op":
                clusters[i] = placed.get(i, ())
        return clusters

    def count(self):
        """Nodes drawn (ops, boxes, inputs, constants and outputs), legend excluded."""
        return len(self.nodes) + len(self.boxes) + len(self.graph.outputs)


def _common(a, b):
    """The longest common prefix of two scope paths."""
    n = 0
    while n < len(a) and n < len(b) and a[n] is b[n]:
        n += 1
    return a[:n]


class BoxInfo:
    """A collapsed call: its ops, the parameters used only inside it, what flows in and out
    (inputs: [(item id, shape passed)]; outputs: {item id: shape})."""

    def __init__(self, scope):
        self.scope, self.n_ops, self.kept = scope, 0, 0
        self.params, self.inputs, self.outputs = {}, [], {}

    @property
    def cluster(self):
        """The scope path of the clusters the box is drawn in: its call's callers."""
        return self.scope.path[:-1]

    def add_op(self, op, box_of, items):
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
