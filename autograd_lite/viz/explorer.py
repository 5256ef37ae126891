"""The explorer: one standalone HTML page in which a recorded call can be walked through
(docs/pictures.md shows what it offers).

    ex = ag.viz.explore(loss, params, batch, path="loss.html", backward=True, values=True)
    ex = g.explore(path="loss.html")     # the same from a recorded Graph
    ex                                   # in Jupyter: the page inline (an iframe)

Each call has a view (view.py): its ops, its nested calls as boxes, what flows in and out.
The views are laid out by Graphviz when the file is written (layout.py); our script
(explorer.js) draws them, and the page loads nothing from the network (its
Content-Security-Policy forbids it).

The page's script offers a small API, used by the tests and by anyone driving the page:

    window.autogradExplorer.scopes()      every call's path, 'loss/apply/encode/encoder_block #3'
    window.autogradExplorer.current()     the path of the view shown
    window.autogradExplorer.open(path)    show that call's view (true, or false if unknown)
    window.autogradExplorer.search(text)  [{id, op, scope, label}] of the ops, inputs and calls
                                          (id null, op 'call') whose op, label, parameter path,
                                          call path or shape text contains `text`
    window.autogradExplorer.select(id)    open the view that shows item `id`, highlight it, and
                                          return its details: {id, kind, op, label, shape, dtype,
                                          scope, source, pullback, saved_bytes, param_path,
                                          inputs, consumers, stats, grad_norm}
"""
import html
import itertools
import json
import math
import os
import pathlib

from .labels import (call_counts, dtype_text, shape_and_dtype, shape_text, shapes_text,
                     size_text)
from .layout import layout_text, lay_out, node_size
from .view import View, common_path

_HERE = pathlib.Path(__file__).resolve().parent
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")
MAX_LABEL = 48  # characters of a node's line of text


class Slot:
    """One node of a call's view on the page: kind ('op', 'call', 'param', 'input', 'data',
    'const', 'outer' for an op of another call, 'output'), ref (an item id, or the Scope of
    a call) and lines (its text, one string per line)."""

    __slots__ = ("kind", "ref", "lines")

    def __init__(self, kind, ref, lines):
        self.kind, self.ref = kind, ref
        self.lines = [t if len(t) <= MAX_LABEL else t[:MAX_LABEL - 1] + "…" for t in lines]


def slots_and_edges(view):
    """The nodes of one call's `View` as the page draws them: the slots in recorded order
    (each node by its item id, each box at its first op, the outputs last), and the edges
    as (slot index, slot index) pairs, one per pair of slots a value flows between."""
    def key(item_id):
        box = view.box_of.get(item_id)
        return ("item", item_id) if box is None else ("call", box)
    keys = sorted([("item", i) for i in view.nodes] + [("call", s) for s in view.boxes],
                  key=lambda k: view.boxes[k[1]].first if k[0] == "call" else k[1])
    keys += [("out", n) for n in range(len(view.outputs))]
    index = {k: n for n, k in enumerate(keys)}
    edges = [(index[key(source)], index[key(target)]) for source, target in view.edges]
    edges += [(index[key(source)], index[("out", n)])
              for n, (_, source) in enumerate(view.outputs)]
    return [_slot(view, k) for k in keys], list(dict.fromkeys(edges))


def _slot(view, key):
    kind, ref = key
    if kind == "call":
        return call_slot(view.boxes[ref])
    if kind == "out":
        label, source = view.outputs[ref]
        return Slot("output", source, [label, shape_and_dtype(view.graph.items[source])])
    item = view.graph.items[ref]
    if item.kind == "op" and item.scope is not view.call:
        return Slot("outer", ref, [f"{item.label} in {item.scope.label}", shape_and_dtype(item)])
    first = f"{item.label} {item.extra}".strip() if item.kind == "op" else item.label
    return Slot(item.kind, ref, [first, shape_and_dtype(item)])


def call_slot(box):
    """A nested call as one box (a `view.BoxInfo`): its name, the shapes in and out, its
    ops, parameters and what it keeps."""
    ins = list(dict.fromkeys(shape for _, shape in box.inputs))
    outs = [box.outputs[i] for i in sorted(box.outputs)]
    flow = f"{shapes_text(ins, 2)} → {shapes_text(outs, 2)}"
    kept = f" · keeps {size_text(box.kept)}" if box.kept else ""
    return Slot("call", box.scope, [box.scope.label, flow, call_counts(box) + kept])


def _repeats(scopes):
    """{scope: (previous, next, k, n)}: the calls of the same function at the same place in
    the call tree (the same chain of function names: every `multihead_attention` of every
    `decoder_block`), in call order; k counts from 1 among the n of them."""
    runs = {}
    for scope in scopes:
        runs.setdefault(tuple(s.name for s in scope.path), []).append(scope)
    out = {}
    for run in runs.values():
        for k, scope in enumerate(run):
            out[scope] = (run[k - 1] if k else None, run[k + 1] if k + 1 < len(run) else None,
                          k + 1, len(run))
    return out


def _home(item, graph):
    """The scope whose view draws `item`: an op's own; an input's, the innermost call holding
    all its uses (None for an unused input: the root's view)."""
    if item.kind == "op":
        return item.scope
    common = None
    for user in graph.consumers.get(item.id, ()):
        path = graph.items[user].scope.path
        common = path if common is None else common_path(common, path)
    return common[-1] if common else None


def _source(source):
    """[file, line, text] with the file relative to the working folder when inside it."""
    if source is None:
        return None
    path, line, text = source
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        relative = ".."
    return [path if relative.startswith("..") else relative, line, text]


def _number(v):
    """A float for JSON, which has no NaN or infinity: those as the text 'nan', 'inf', '-inf'
    (an exploding gradient is what the page is for)."""
    return v if v is None or math.isfinite(v) else str(v)


def _item_data(item, graph, index, values):
    home = _home(item, graph)
    return {"id": item.id, "kind": item.kind, "label": item.label, "extra": item.extra,
            "shape": list(item.shape), "dtype": dtype_text(item.dtype),
            "shape_text": shape_text(item.shape), "nbytes": item.nbytes,
            "scope": index[item.scope] if item.scope is not None else None,
            "home": index[home] if home is not None else 0,
            "inputs": [source for source, _ in item.inputs],
            "consumers": graph.consumers.get(item.id, []), "kept": item.kept,
            "residual": item.residual, "source": _source(item.source),
            "pullback": item.pullback, "stats": item.stats if values else None,
            "grad_norm": _number(item.grad_norm) if values else None}


def _memory(graph):
    """Bytes the backward pass holds after each op of the forward (op.kept and its residuals,
    a constant's at its first use), and the arguments' own arrays the pullbacks keep."""
    const_at = {}
    for n, op in enumerate(graph.ops):
        for source, _ in op.inputs:
            if graph.items[source].kind == "const":
                const_at.setdefault(source, n)
    added = [op.kept + op.residual for op in graph.ops]
    for source, n in const_at.items():
        added[n] += graph.items[source].kept
    arguments = sum(it.kept for it in graph.items if it.kind in ("param", "input", "data"))
    return list(itertools.accumulate(added)), arguments


def _laid_out_views(graph, scopes, index):
    """Each scope's slots [kind, ref, lines, width, height] and the index of its layout in
    the list of distinct layouts (repeated calls share one): (views, layout ids, layouts)."""
    views, texts = [], []
    for scope in scopes:
        slots, edges = slots_and_edges(View(graph, call=scope))
        sizes = [node_size(slot.lines) for slot in slots]
        texts.append(layout_text(sizes, edges))
        views.append([[slot.kind, index[slot.ref] if slot.kind == "call" else slot.ref,
                       slot.lines, w, h] for slot, (w, h) in zip(slots, sizes)])
    layout_of = {text: n for n, text in enumerate(dict.fromkeys(texts))}
    return views, [layout_of[text] for text in texts], lay_out(list(layout_of))


def _scope_data(graph, scopes, index, views, layout_ids):
    """Per scope: its path, label, parent and children, its ops' range in the forward (for
    the memory plot) and what they keep, its repeated twins, its view."""
    ops_in = {scope: [] for scope in scopes}  # the positions of the ops in the forward
    for n, op in enumerate(graph.ops):
        for scope in op.scope.path:
            ops_in[scope].append(n)
    repeats = _repeats(scopes)
    out = []
    for scope, slots, layout in zip(scopes, views, layout_ids):
        previous, following, k, n = repeats[scope]
        own = ops_in[scope]
        out.append({
            "path": repr(scope), "label": scope.label, "name": scope.name,
            "parent": index.get(scope.parent), "children": [index[c] for c in scope.children],
            "n_ops": len(own), "ops": [own[0], own[-1]] if own else None,
            "kept": sum(graph.ops[i].kept + graph.ops[i].residual for i in own),
            "prev": index[previous] if previous else None,
            "next": index[following] if following else None, "repeat": [k, n],
            "layout": layout, "slots": slots})
    return out


def page_data(graph, backward, values):
    """Everything the page shows, as JSON-ready data."""
    scopes = graph.root.walk()  # depth first in call order, the root first
    index = {scope: n for n, scope in enumerate(scopes)}
    items = [_item_data(it, graph, index, values) for it in graph.items]
    views, layout_ids, layouts = _laid_out_views(graph, scopes, index)
    memory, arguments_kept = _memory(graph)
    return {"title": graph.title(), "backward": bool(backward), "values": bool(values),
            "items": items, "scopes": _scope_data(graph, scopes, index, views, layout_ids),
            "layouts": layouts, "order": [op.id for op in graph.ops], "memory": memory,
            "arguments_kept": arguments_kept}


def _asset(name):
    return (_HERE / name).read_text(encoding="utf-8")


def page_html(data):
    """The standalone page: the data as JSON, the style and the script, all inline."""
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    title = html.escape(data["title"])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title>\n<style>\n{_asset('explorer.css')}</style></head>\n"
            f'<body>\n<script type="application/json" id="explorer-data">{payload}</script>\n'
            f"<script>\n{_asset('explorer.js')}</script>\n</body></html>\n")


def _checked_path(path):
    path = pathlib.Path(os.fspath(path))
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"explore: path '{path}' must end in .html (got suffix "
                         f"'{path.suffix}')")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"explore: cannot write '{path}': its folder '{path.parent}' "
                                f"does not exist")
    return path


class Explorer:
    """One explorer page of a recorded call. html: the page's text; path: where it was
    written (None if not); save(path) writes it; in Jupyter it shows itself inline."""

    def __init__(self, graph, path=None, backward=True, values=False):
        if path is not None:
            path = _checked_path(path)
        if not graph.ops:
            raise ValueError(f"explore: {graph.name} recorded no op: nothing to explore "
                             f"(is any argument a float array the function computes with?)")
        if values and not graph.has_values:
            raise ValueError("explore: values=True needs a graph recorded with values: "
                             "ag.viz.trace(f, *args, values=True), or ag.viz.explore(f, *args, "
                             "values=True)")
        self.graph = graph
        self.html = page_html(page_data(graph, backward, values))
        self.path = None
        if path is not None:
            self.save(path)

    def save(self, path):
        """Write the page to `path` (.html); returns the path."""
        path = _checked_path(path)
        path.write_text(self.html, encoding="utf-8")
        self.path = path
        return path

    def _repr_html_(self):
        """The page in an iframe, so that its script runs and its style stays its own."""
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; '
                f'height: 640px; border: 1px solid #cbd5e1;"></iframe>')

    def __repr__(self):
        where = f" at {self.path}" if self.path else ""
        return f"<Explorer of {self.graph.title()}{where}>"
