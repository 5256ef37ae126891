"""Pictures of a traced call: Graphviz graphs clustered by the functions the model is
written as, and an explorer page to walk through them (docs/pictures.md shows them).

    g = ag.viz.trace(loss, params, batch)      # records one call: a Graph
    print(g.summary())                          # one line per op, like a jaxpr
    g.render("loss.svg", depth=2)               # .svg .png .pdf .dot
    ag.viz.draw(apply, p, src, tgt, path="apply.png", depth=2, backward=True)
    ag.viz.explore(loss, params, batch, path="loss.html", values=True)
    w = ag.viz.capture(apply, p, src, tgt, op="softmax", scope="cross_attention")

One module per step: record.py runs the call on an engine trace with a recording hook;
scopes.py finds the function scopes (the rule for which calls are clusters, and the
markers of marks.py); graph.py holds the result as data; view.py decides what a picture
shows; dot.py writes it as Graphviz text, labels.py its text; saved.py measures what the
pullbacks keep, values.py the statistics; layout.py and explorer.py make the page.
The markers and capture load with this package, the rest on first use.
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
