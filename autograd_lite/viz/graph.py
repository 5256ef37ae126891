"""The recorded graph of one call, and what a picture of it shows at a given depth.

A `Graph` holds plain data: the items (inputs, constants, ops) and the tree of
function scopes. `Graph.view(depth)` decides which items are drawn and which
calls are collapsed into one box; `dot.py` writes that view as Graphviz text.

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

NOTEBOOK_NODES = 150  # a notebook shows the deepest picture with at most this many nodes

_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
           "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool"}


def dtype_text(dtype):
    return _DTYPES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def shape_text(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def typed(item, shape=None):
    """jaxpr-style type: f32[2,7,16]; `shape` when an op is passed a slice of the item."""
    return f"{dtype_text(item.dtype)}[{','.join(map(str, item.shape if shape is None else shape))}]"


def size_text(nbytes):
    for unit in ("B", "KB", "MB", "GB"):
        if nbytes < 1024 or unit == "GB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024


def count_text(n):
    if n < 1000:
        return str(n)
    return f"{n / 1000:.1f}k" if n < 10 ** 6 else f"{n / 10 ** 6:.2f}M"


def _finish_scopes(root, items):
    """Count ops per scope; dissolve empty scopes and composite ops that are a single op of
    their own name (ag.concatenate); number repeated calls: 'encoder_block #3'."""
    ops = [it for it in items if it.kind == "op"]
    for op in ops:
        s = op.scope
        while s is not None:
            s.n_ops += 1
            s = s.parent
    dissolved = set()
    stack = [root] if root is not None else []
    while stack:
        s = stack.pop()
        if s.n_ops == 0 or (s.composite and s.n_ops == 1 and s.children == []
                            and any(op.scope is s and op.label == s.name for op in ops)):
            dissolved.add(s)
        stack.extend(s.children)
    for op in ops:
        while op.scope in dissolved:
            op.scope = op.scope.parent
    stack = [root] if root is not None and root not in dissolved else []
    while stack:
        s = stack.pop()
        kept, queue = [], list(s.children)
        while queue:
            c = queue.pop(0)
            if c in dissolved:
                queue[:0] = c.children
            else:
                c.parent = s
                kept.append(c)
        s.children = kept
        for c in kept:
            same = [d for d in kept if d.name == c.name]
            c.label = c.name if len(same) == 1 else f"{c.name} #{same.index(c) + 1}"
        stack.extend(kept)
    return root if root is not None and root not in dissolved else None


class View:
    """What one picture shows.

    nodes: item ids drawn as nodes; boxes: {Scope: BoxInfo} for collapsed calls;
    edges: (source key, target key, item id) with keys item ids or Scopes;
    cluster_of: key -> tuple of Scopes (the clusters it is drawn in).
    """

    def __init__(self, graph, depth):
        self.graph, self.depth = graph, depth
        items = graph.items
        self.key = {}
        for it in items:
            if it.kind == "op":
                path = it.scope.path if it.scope is not None else ()
                self.key[it.id] = it.id if depth is None or len(path) <= depth else path[depth]
        consumers = {}
        for op in graph.ops:
            for source, _ in op.inputs:
                consumers.setdefault(source, set()).add(self.key[op.id])
        self.boxes = {}
        for it in items:
            if it.kind != "op":
                users = consumers.get(it.id, set())
                one = next(iter(users)) if len(users) == 1 else None
                absorbed = it.kind in ("param", "const") and one is not None and type(one) is not int
                self.key[it.id] = one if absorbed else it.id
        self.nodes = [it.id for it in items if self.key[it.id] == it.id]
        self.edges, seen = [], set()
        for op in graph.ops:
            target = self.key[op.id]
            if type(target) is not int:
                box = self.boxes.setdefault(target, BoxInfo(target))
                box.add_op(op, self.key, items)
            for source, _ in op.inputs:
                s = self.key[source]
                if s != target and (s, target, source) not in seen:
                    seen.add((s, target, source))
                    self.edges.append((s, target, source))
                    if type(s) is not int:
                        self.boxes.setdefault(s, BoxInfo(s)).outputs.setdefault(source, items[source].shape)
        for _, source in graph.outputs:
            s = self.key[source]
            if type(s) is not int:
                self.boxes.setdefault(s, BoxInfo(s)).outputs.setdefault(source, items[source].shape)
        self.cluster_of = {}
        for k in self.nodes:
            if items[k].kind == "op":
                scope = items[k].scope
                self.cluster_of[k] = scope.path if scope is not None else ()
        placed = {}  # a parameter or constant sits in the innermost cluster holding all its uses
        for op in graph.ops:
            where = self.cluster_of.get(op.id) or (self.key[op.id].path[:-1]
                                                   if type(self.key[op.id]) is not int else ())
            for source, _ in op.inputs:
                if items[source].kind in ("param", "const") and self.key[source] == source:
                    placed[source] = _common(placed.get(source, where), where)
        for k in self.nodes:
            if items[k].kind != "op":
                self.cluster_of[k] = placed.get(k, ())
        for s in self.boxes:
            self.cluster_of[s] = s.path[:-1]

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

    def add_op(self, op, key, items):
        self.n_ops += 1
        self.kept += op.kept + op.residual
        for source, shape in op.inputs:
            item = items[source]
            if item.kind == "param":
                self.params[source] = item
            elif key[source] != self.scope:
                if (source, shape) not in self.inputs:  # a slice of ids is an input of its own
                    self.inputs.append((source, shape))

    @property
    def n_param_values(self):
        return sum(int(np.prod(p.shape)) for p in self.params.values())


class Graph:
    """The graph of one recorded call: `summary()`, `to_dot()`, `render(path)`;
    in a notebook it shows itself as SVG."""

    def __init__(self, name, items, root, outputs):
        self.name, self.items, self.outputs = name, items, outputs
        self.root = _finish_scopes(root, items)
        self.ops = [it for it in items if it.kind == "op"]

    def view(self, depth=None):
        if depth is not None and (not isinstance(depth, int) or depth < 0):
            raise ValueError(f"depth must be None or an int >= 0, got {depth!r}")
        return View(self, depth)

    @property
    def params(self):
        return [it for it in self.items if it.kind == "param"]

    def saved_bytes(self):
        """(activations, arguments): bytes the backward pass keeps; activations are op
        outputs and other arrays made during the call, arguments are the inputs' own arrays."""
        made = sum(it.kept + it.residual for it in self.items if it.kind in ("op", "const"))
        given = sum(it.kept for it in self.items if it.kind not in ("op", "const"))
        return made, given

    def title(self):
        n_values = sum(int(np.prod(p.shape)) for p in self.params)
        return (f"{self.name}: {len(self.ops)} ops, {len(self.params)} parameters "
                f"({count_text(n_values)} values)")

    def summary(self):
        """A text listing like a jaxpr: the inputs, then one line per op with its scope,
        the op, its inputs and its output (`%n` names an op's output)."""
        number = {op.id: n for n, op in enumerate(self.ops, 1)}

        def ref(i, shape=None):
            it = self.items[i]
            return (f"%{number[i]}" if it.kind == "op" else it.label) + ":" + typed(it, shape)
        lines = [self.title(), "inputs"]
        values = [it for it in self.items if it.kind != "op"]
        label_width = max((len(it.label) for it in values), default=0)
        type_width = max((len(typed(it)) for it in values), default=0)
        lines += [f"  {it.label:<{label_width}}  {typed(it):<{type_width}}  {it.kind}"
                  for it in values]
        rows = []
        for n, op in enumerate(self.ops, 1):
            scope = repr(op.scope) if op.scope is not None else "-"
            name = op.label + (" " + op.extra if op.extra else "")
            ins = ", ".join(ref(i, shape) for i, shape in op.inputs)
            rows.append((scope, name, f"{ins} -> %{n}:{typed(op)}"))
        w1 = max((len(r[0]) for r in rows), default=0)
        w2 = max((len(r[1]) for r in rows), default=0)
        lines.append("ops")
        lines += [f"  {a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows]
        lines.append("outputs")
        lines += [f"  {label} = {ref(i)}" for label, i in self.outputs]
        made, given = self.saved_bytes()
        lines.append(f"backward pass keeps {size_text(made + given)}: {size_text(made)} made "
                     f"during the call, {size_text(given)} of the arguments")
        return "\n".join(lines)

    def to_dot(self, depth=None, backward=False):
        """Graphviz DOT text of the picture (see the module docstring for `depth`)."""
        from .dot import to_dot
        return to_dot(self.view(depth), backward)

    def render(self, path, depth=None, backward=False):
        """Write the picture to `path`; the format comes from its suffix (.svg .png .pdf .dot)."""
        from .dot import render
        return render(self.view(depth), backward, path)

    def readable_depth(self, max_nodes=NOTEBOOK_NODES):
        """The deepest depth whose picture has at most `max_nodes` nodes: None (every op)
        when the whole graph fits, else the k of view(k), 0 at least."""
        if self.view().count() <= max_nodes:
            return None
        depth, deepest = 0, self.scope_depth()
        while depth < deepest and self.view(depth + 1).count() <= max_nodes:
            depth += 1
        return depth

    def scope_depth(self):
        """How deeply the function scopes nest (the traced function alone is 1)."""
        deepest, stack = 0, [(self.root, 1)] if self.root is not None else []
        while stack:
            scope, level = stack.pop()
            deepest = max(deepest, level)
            stack.extend((c, level + 1) for c in scope.children)
        return deepest

    def _repr_svg_(self):
        """In a notebook: the picture at readable_depth(), so a large model stays legible."""
        from .dot import run_dot
        return run_dot(self.to_dot(depth=self.readable_depth()), "svg").decode("utf-8")

    def __repr__(self):
        return f"<Graph {self.title()}>"
