"""Pictures: Graphviz computation graphs of any traced call, clustered by the
functions the model is written as.

    g = ag.viz.trace(loss, params, batch)      # records one call
    print(g.summary())                          # one line per op, like a jaxpr
    g.render("loss.svg", depth=2)               # .svg .png .pdf .dot
    ag.viz.draw(apply, p, src, tgt, path="apply.png", depth=2, backward=True)
    ag.viz.explore(loss, params, batch, path="loss.html", values=True)   # a page to walk through
    w = ag.viz.capture(apply, p, src, tgt, op="softmax", scope="cross_attention")  # capture.py

One node per primitive application, labelled with the op and its output shape
and dtype; inputs labelled by their tree path in the arguments (`p.encoder[0].attn.wq`,
`x`); clusters follow the Python functions the call went through, found while
tracing; `depth` collapses calls into boxes; `backward=True` shows what the pullbacks
keep and the gradient edges. Rendering needs Graphviz's `dot` program.

Every user function is a cluster, except lambdas, comprehensions and generators, and
the functions model code marks (marks.py; a marker only registers the function):

    @ag.viz.transparent     no cluster: its ops are drawn in its caller's (wiring such as
                            a residual connection, whose sublayer the picture shows)
    @ag.viz.alias           another name for the function it calls: the two calls are one
                            cluster under the alias's name (cross_attention)

How it is made, one module per step, each seam public:
- `record.py` runs the call once on an engine trace with a recording hook
  (`tracer.Trace(on_op=...)`, the only thing the engine offers pictures; ordinary
  tracing never sets it and pays one attribute test per op);
- `scopes.py` finds the function scopes with a `sys.setprofile` hook around that one
  call, and holds the rule for which calls open one;
- `graph.py` holds the result as plain data (`Graph`: `summary()`, `to_dot()`,
  `render()`); `view.py` decides what a picture shows, at a depth or of one call;
  `dot.py` writes it as Graphviz text; `labels.py` writes labels, shapes and sizes;
  `saved.py` measures what the pullbacks keep;
- the explorer (`explore`, `Graph.explore`): each call's view (view.py) laid out with
  `dot` by `layout.py`, `explorer.py` writes the page with its data and our script
  `explorer.js` (its API in explorer.py's docstring); `values.py` measures statistics
  and gradient norms for it;
- `capture.py` returns the outputs of chosen ops of one call, on the same hook (the
  attention plots read the model's own weights through it).
The markers and capture load with this package; the modules that record, draw and
write pages load on first use.
"""
import importlib

from .capture import capture
from .marks import alias, transparent

__all__ = ["trace", "draw", "explore", "capture", "transparent", "alias", "Graph", "Explorer",
           "DotNotFoundError", "FORMATS"]
_LOADED_ON_USE = {"Graph": "graph", "Explorer": "explorer", "DotNotFoundError": "dot",
                  "FORMATS": "dot"}  # name -> its module


def __getattr__(name):
    """The names of `_LOADED_ON_USE`, and the modules (`ag.viz.dot`), imported on first use."""
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    target = f"{__name__}.{_LOADED_ON_USE.get(name, name)}"
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError as error:
        if error.name != target:  # a module that the one found imports is missing
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(module, name) if name in _LOADED_ON_USE else module


def trace(f, *args, values=False):
    """Run f(*args) once and record its graph: a `Graph`.

    Float leaves of the arguments are traced (as in `ag.gradient`) and named by their
    tree path, rooted at f's parameter names; other array leaves (token ids, masks)
    are data inputs; Python values pass through. values=True also measures each value's
    statistics and each float input's gradient norm (values.py), for the explorer.
    """
    from .graph import Graph
    from .record import record
    items, root, outputs = record(f, args, values=values)
    name = root.name if root is not None else getattr(f, "__name__", type(f).__name__)
    return Graph(name, items, root, outputs, has_values=values)


def explore(f, *args, path=None, backward=True, values=False):
    """Trace f(*args) and make its explorer page (explorer.py): an `Explorer`, written to
    `path` (.html) if given, shown inline in Jupyter. backward: the memory plot and the
    gradient edges; values: statistics of every value and gradient norms of the inputs."""
    return trace(f, *args, values=values).explore(path, backward=backward, values=values)


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
