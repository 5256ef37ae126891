"""The recorded graph of one call (`Graph`): the items that record.py made and the tree of
function scopes that scopes.py found, as plain data; its listing and its pictures."""
import numpy as np

from .dot import render, run_dot, to_dot
from .explorer import Explorer
from .labels import count_text, size_text, typed
from .view import View

NOTEBOOK_NODES = 150  # a notebook shows the deepest picture with at most this many nodes


def _finish_scopes(root, items):
    """Count ops per scope; dissolve empty scopes and composite ops that are a single op of
    their own name (ag.concatenate); number repeated calls: 'encoder_block #3'."""
    if root is None:
        return None
    ops = [it for it in items if it.kind == "op"]
    for op in ops:
        for s in op.scope.path if op.scope is not None else ():
            s.n_ops += 1
    dissolved = set()  # the scopes under an empty scope are empty too
    for s in root.walk():
        if s.n_ops == 0 or (s.composite and s.n_ops == 1 and not s.children
                            and any(op.scope is s and op.label == s.name for op in ops)):
            dissolved.add(s)
    for op in ops:
        while op.scope in dissolved:
            op.scope = op.scope.parent
    if root in dissolved:
        return None
    for s in root.walk():
        s.children = [c for c in s.children if c not in dissolved]
        for c in s.children:
            same = [d for d in s.children if d.name == c.name]
            c.label = c.name if len(same) == 1 else f"{c.name} #{same.index(c) + 1}"
    return root


class Graph:
    """The graph of one recorded call: `summary()`, `to_dot()`, `render(path)`;
    in a notebook it shows itself as SVG."""

    def __init__(self, name, items, root, outputs, has_values=False):
        self.name, self.items, self.outputs = name, items, outputs
        self.has_values = has_values  # recorded with values=True: statistics, gradient norms
        self.root = _finish_scopes(root, items)
        self.ops = [it for it in items if it.kind == "op"]
        self.consumers = {}  # item id -> the ids of the ops that use it, in recorded order
        for op in self.ops:
            for source, _ in op.inputs:
                users = self.consumers.setdefault(source, [])
                if not users or users[-1] != op.id:
                    users.append(op.id)

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

    def saved_text(self):
        """'backward pass keeps 1.5 KB: 1.0 KB made during the call, 512 B of the arguments'"""
        made, given = self.saved_bytes()
        return (f"backward pass keeps {size_text(made + given)}: {size_text(made)} made "
                f"during the call, {size_text(given)} of the arguments")

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
        lines.append(self.saved_text())
        return "\n".join(lines)

    def to_dot(self, depth=None, backward=False):
        """Graphviz DOT text of the picture (`depth`: view.py)."""
        return to_dot(self.view(depth), backward)

    def render(self, path, depth=None, backward=False):
        """Write the picture to `path`; the format comes from its suffix (.svg .png .pdf .dot)."""
        return render(self.view(depth), backward, path)

    def explore(self, path=None, backward=True, values=False):
        """The explorer page of this call (explorer.py): an `Explorer`, written to `path`
        (.html) if given. values=True needs a graph traced with values=True."""
        return Explorer(self, path, backward, values)

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
        return max(len(s.path) for s in self.root.walk()) if self.root is not None else 0

    def _repr_svg_(self):
        """In a notebook: the picture at readable_depth(), so a large model stays legible."""
        return run_dot(self.to_dot(depth=self.readable_depth()), "svg").decode("utf-8")

    def __repr__(self):
        return f"<Graph {self.title()}>"
