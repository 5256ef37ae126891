"""Pictures: Graphviz computation graphs of any traced call, clustered by the
functions the model is written as.

    g = ag.viz.trace(loss, params, batch)      # records one call
    print(g.summary())                          # one line per op, like a jaxpr
    g.render("loss.svg", depth=2)               # .svg .png .pdf .dot
    ag.viz.draw(apply, p, src, tgt, path="apply.png", depth=2, backward=True)
    w = ag.viz.capture(apply, p, src, tgt, op="softmax", scope="cross_attention")  # capture.py

One node per primitive application, labelled with the op and its output shape
and dtype; inputs labelled by their tree path in the arguments (`p.encoder[0].attn.wq`,
`x`); clusters follow the Python functions the call went through, found while
tracing (no annotation in model code); `depth` collapses calls into boxes;
`backward=True` shows what the pullbacks keep and the gradient edges. Rendering
needs Graphviz's `dot` program.

How it is made, one module per step, each seam public:
- `record.py` runs the call once on an engine trace with a recording hook
  (`tracer.Trace(on_op=...)`, the only thing the engine offers pictures; ordinary
  tracing never sets it and pays one attribute test per op);
- `scopes.py` finds the function scopes with a `sys.setprofile` hook around that one
  call, and holds the rule for which functions are transparent (lambdas,
  comprehensions, generators, `_private` helpers, and functions marked
  `@ag.viz.transparent`: their ops belong to the caller's cluster);
- `graph.py` holds the result as plain data (`Graph`: `summary()`, `to_dot()`,
  `render()`); `view.py` decides what a picture at a depth shows; `dot.py` writes it
  as Graphviz text; `labels.py` writes labels, shapes and sizes; `saved.py` measures
  what the pullbacks keep.
"""
from .dot import FORMATS, DotNotFoundError
from .graph import Graph
from .record import record
from .scopes import transparent
from .capture import capture

__all__ = ["trace", "draw", "capture", "transparent", "Graph", "DotNotFoundError", "FORMATS"]


def trace(f, *args):
    """Run f(*args) once and record its graph: a `Graph`.

    Float leaves of the arguments are traced (as in `ag.gradient`) and named by their
    tree path, rooted at f's parameter names; other array leaves (token ids, masks)
    are data inputs; Python values pass through.
    """
    items, root, outputs = record(f, args)
    name = root.name if root is not None else getattr(f, "__name__", type(f).__name__)
    return Graph(name, items, root, outputs)


def draw(f, *args, path="graph.svg", depth=None, backward=False):
    """Trace f(*args) and render its picture to `path` (.svg .png .pdf .dot): the Graph.

    depth: None draws every op; 0 the whole call as one box; k draws the ops of the
    traced function and of the functions nested up to k levels in it (f itself is
    level 1), each deeper call collapsed into one box.
    backward: also show what the backward pass keeps and the gradient edges.
    """
    graph = trace(f, *args)
    graph.render(path, depth=depth, backward=backward)
    return graph
