"""Graphviz text for a `View`, and rendering it with the `dot` program, run in a subprocess
(the only thing a picture needs installed is Graphviz). Nodes get an SVG class (`op`,
`param`, `data`, `input`, `const`, `call`, `output`, `legend`) by which tools and tests find
them in the SVG.
"""
import itertools
import os
import pathlib
import shutil
import subprocess
import warnings

from .labels import (call_counts, plural, shape_and_dtype, shape_text, shapes_text,
                     size_text)

FORMATS = (".svg", ".png", ".pdf", ".dot")
FONT = "Helvetica,Arial,sans-serif"
GREY, DARK = "#64748b", "#334155"
STYLE = {  # kind: (fill, border, what the legend calls it)
    "param": ("#dbeafe", "#2563eb", "parameter"),
    "input": ("#dcfce7", "#16a34a", "data input"),
    "data": ("#dcfce7", "#16a34a", "data input"),
    "const": ("#f8fafc", "#94a3b8", "constant"),
    "op": ("#ffffff", "#475569", "op  (output shape) dtype"),
    "call": ("#ede9fe", "#7c3aed", "function call (collapsed)"),
    "output": ("#fee2e2", "#dc2626", "output"),
}
KEPT, GRADIENT = "#ea580c", "#dc2626"
CLUSTER_FILLS = ("#f8fafc", "#eef2f7", "#e2e8f0", "#d5dde8")
INSTALL = ("Install Graphviz:\n"
           "  apt-get install graphviz                 (Debian, Ubuntu)\n"
           "  brew install graphviz                    (macOS)\n"
           "  conda install -c conda-forge graphviz    (conda)")
MAX_PIXELS = 30000  # cairo's bitmaps stop at 32767 pixels a side


class DotNotFoundError(RuntimeError):
    """Graphviz's `dot` program is not installed (or not on PATH)."""


def _esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _small(text, color=GREY):
    return f'<FONT POINT-SIZE="9" COLOR="{color}">{_esc(text)}</FONT>'


def _node(name, kind, label, extra=""):
    fill, border, _ = STYLE[kind]
    style = "rounded,filled,dashed" if kind == "const" else "rounded,filled"
    return (f'  {name} [label=<{label}>, class="{kind}", style="{style}", fillcolor="{fill}", '
            f'color="{border}"{extra}];')


def _item_node(item, backward, used):
    if item.kind == "op":
        label = (f"<B>{_esc(item.label)}</B>{_esc(item.extra and ' ' + item.extra)}"
                 f"  {_small(shape_and_dtype(item), DARK)}")
    else:
        label = f"{_esc(item.label)}<BR/>{_small(shape_and_dtype(item))}"
    notes = [f"saved {size_text(item.kept)}"] if backward and item.kept else []
    if backward and item.residual:  # an op's
        notes.append(f"+{size_text(item.residual)} residuals")
    if notes:
        label += "<BR/>" + _small(" · ".join(notes), KEPT)
    if item.kind != "op" and item.id not in used:
        label += "<BR/>" + _small("unused")
    kept = f', color="{KEPT}", penwidth=2.5' if backward and item.kept else ""
    return _node(f"n{item.id}", item.kind, label, kept)


def _box_node(name, box, backward, n_inside):
    """A collapsed call; with `backward`, what it saves and how many parameters drawn inside
    it (`n_inside`, so without a node and a gradient edge of their own) get gradients."""
    flow = (shapes_text([shape for _, shape in box.inputs], 4) + " → "
            + shapes_text(list(box.outputs.values()), 4))
    label = (f"<B>{_esc(box.scope.label)}</B><BR/>{_small(flow, DARK)}<BR/>"
             f"{_small(call_counts(box))}")
    if backward and box.kept:
        label += "<BR/>" + _small(f"saves {size_text(box.kept)} for backward", KEPT)
    if backward and n_inside:
        label += "<BR/>" + _small(f"⇠ gradients of {plural(n_inside, 'param')} inside", GRADIENT)
    return _node(name, "call", label, ', shape="box3d", margin="0.14,0.1"')


def _legend(view, backward):
    """One node: a row of cells in the colours of the kinds of node this picture has."""
    present = {view.graph.items[i].kind for i in view.nodes}
    kinds = [k for k in ("param", "input", "data", "const", "op") if k in present]
    if "input" in kinds and "data" in kinds:
        kinds.remove("data")
    kinds += (["call"] if view.boxes else []) + (["output"] if view.outputs else [])
    cells = [f'<TD BGCOLOR="{STYLE[k][0]}" COLOR="{STYLE[k][1]}" STYLE="rounded">'
             f'{_esc(STYLE[k][2])}</TD>' for k in kinds]
    explained = ""
    if backward:
        cells.append(f'<TD COLOR="{KEPT}" BORDER="2" STYLE="rounded">saved for backward</TD>')
        cells.append(f'<TD BORDER="0"><FONT COLOR="{GRADIENT}">⇠ gradient (dashed)</FONT></TD>')
        explained = (f'<TR><TD BORDER="0" COLSPAN="{len(cells) + 1}" ALIGN="LEFT">'
                     f'<FONT COLOR="{KEPT}">saved N: the bytes of this value that the backward '
                     f'pass keeps · +N residuals: other arrays an op\'s pullback makes and keeps '
                     f'(a normalized x, a mask)</FONT></TD></TR>')
    # at the bottom, below the outputs (rank=sink): a node of its own would float to the side
    return [f'  legend [shape=plaintext, class="legend", fontsize=9, '
            f'label=<<TABLE BORDER="0" CELLBORDER="1" '
            f'CELLSPACING="4" CELLPADDING="3"><TR><TD BORDER="0"><B>legend</B></TD>'
            f'{"".join(cells)}</TR>{explained}</TABLE>>];',
            '  { rank=sink; legend; }']


def _title(view, backward):
    text = view.graph.title() + ("" if view.depth is None else f", depth {view.depth}")
    return text + ("<BR/>" + view.graph.saved_text() if backward else "")


def _node_lines(view, backward, box_names):
    """(cluster path, DOT line) for each node, then each box."""
    items = view.graph.items
    used = {source for source, _ in view.edges}
    lines = [(path, _item_node(items[i], backward, used))
             for i, path in view.clusters.items()]
    for scope, box in view.boxes.items():
        n_inside = sum(view.box_of.get(i) is scope for i in box.params)
        lines.append((box.cluster, _box_node(box_names[scope], box, backward, n_inside)))
    return lines


def _cluster_lines(node_lines):
    """The nodes' DOT lines inside nested clusters, one per function call, depth first."""
    tree = {(): ([], [])}  # scope path -> (child clusters, node lines)
    for path, line in node_lines:
        for n in range(1, len(path) + 1):
            if path[:n] not in tree:
                tree[path[:n]] = ([], [])
                tree[path[:n - 1]][0].append(path[:n])
        tree[path][1].append(line)
    lines, cluster_ids = [], itertools.count()

    def write(path):  # its nodes, then its clusters
        children, nodes = tree[path]
        indent = "  " * len(path)
        if path:
            fill = CLUSTER_FILLS[(len(path) - 1) % len(CLUSTER_FILLS)]
            lines.append(f"{indent}subgraph cluster_{next(cluster_ids)} {{")
            lines.append(f'{indent}  label=<<B>{_esc(path[-1].label)}</B>>; class="scope"; '
                         f'style="rounded,filled"; fillcolor="{fill}"; color="#94a3b8"; '
                         f'fontsize=11; fontcolor="{DARK}";')
        lines.extend(indent + line for line in nodes)
        for child in children:
            write(child)
        if path:
            lines.append(indent + "}")
    write(())
    return lines


def to_dot(view, backward=False):
    """DOT text: nodes inside nested clusters (one per function call), edges, a legend."""
    items = view.graph.items
    box_names = {scope: f"call{i}" for i, scope in enumerate(view.boxes)}

    def name(item_id):  # the DOT node an item is drawn as: its own (n7) or its box's (call2)
        box = view.box_of.get(item_id)
        return f"n{item_id}" if box is None else box_names[box]
    lines = ["digraph autograd_lite {",
             f'  graph [rankdir=TB, newrank=true, fontname="{FONT}", fontsize=12, nodesep=0.25, '
             f'ranksep=0.35, labelloc=t, labeljust=l, label=<{_title(view, backward)}>];',
             f'  node [shape=box, fontname="{FONT}", fontsize=11, height=0.3, margin="0.1,0.04", '
             f'penwidth=1.2];',
             f'  edge [color="{GREY}", arrowsize=0.6, fontname="{FONT}", fontsize=9, '
             f'fontcolor="{GREY}"];']
    lines += _cluster_lines(_node_lines(view, backward, box_names))
    for source, target in view.edges:  # before the outputs': dot lays out in the order of edges
        attrs = []
        item = items[source]
        from_box, into_box = view.box_of.get(source), view.box_of.get(target)
        if from_box is not None:
            attrs.append(f'label=" {shape_text(item.shape)}"')
        elif item.kind == "data":  # a slice of token ids: the shape passed
            passed = items[target].inputs if into_box is None else view.boxes[into_box].inputs
            shapes = {shape for i, shape in passed if i == source}
            if shapes and shapes != {item.shape}:
                attrs.append(f'label=" {", ".join(map(shape_text, shapes))}"')
        lines.append(f"  {name(source)} -> {name(target)}"
                     f"{' [' + ', '.join(attrs) + ']' if attrs else ''};")
        if backward and item.kind in ("param", "input") and from_box is None:
            lines.append(f'  {name(target)} -> {name(source)} [style=dashed, color="{GRADIENT}", '
                         f'constraint=false, arrowsize=0.5, class="gradient"];')
    for k, (label, source) in enumerate(view.outputs):
        out = f"out{k}"
        shape = _small(shape_and_dtype(items[source]), DARK)
        lines.append(_node(out, "output", f"<B>{_esc(label)}</B>  {shape}"))
        lines.append(f"  {name(source)} -> {out};")
    lines += _legend(view, backward)
    if view.outputs:  # keeps the legend under the outputs, not beside the graph
        lines.append(f"  out{len(view.outputs) - 1} -> legend [style=invis];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_executable():
    return shutil.which("dot")


def run_dot(text, fmt, *options):
    """`dot -T<fmt>` on DOT text: the output bytes. Raises DotNotFoundError without Graphviz."""
    exe = dot_executable()
    if exe is None:
        raise DotNotFoundError(f"Graphviz's `dot` program was not found on PATH. {INSTALL}")
    done = subprocess.run([exe, f"-T{fmt}", *options], input=text.encode("utf-8"),
                          capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _png_dpi(text, n_nodes):
    """Dots per inch for a PNG: sharp for small pictures; for large ones as many as fit
    cairo's limit, measured on a first layout (fonts keep their size, the canvas grows)."""
    if n_nodes <= 60:
        return 144
    plain = run_dot(text, "plain").split(b"\n", 1)[0].split()  # graph scale width height
    inches = max(float(plain[2]), float(plain[3]))
    dpi = min(96, int(MAX_PIXELS / inches))
    if dpi < 48:
        warnings.warn(f"the picture is {inches:.0f} inches across: a PNG must shrink it to {dpi} "
                      "dpi; use .svg or .pdf, or a smaller depth=", stacklevel=3)
    return dpi


def render(view, backward, path):
    """Write the picture; the format comes from the suffix of `path`. Returns the path."""
    path = pathlib.Path(os.fspath(path))
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"cannot render '{path.name}': unsupported suffix '{suffix}'; "
                         f"use one of {', '.join(FORMATS)}")
    text = to_dot(view, backward)
    if suffix == ".dot":
        path.write_text(text, encoding="utf-8")
        return path
    if dot_executable() is None:
        dot_path = path.with_suffix(".dot")
        dot_path.write_text(text, encoding="utf-8")
        raise DotNotFoundError(
            f"Graphviz's `dot` program was not found on PATH, so {path.name} cannot be drawn. "
            f"{INSTALL}\nThe DOT text was written to {dot_path}; once Graphviz is installed: "
            f"dot -T{suffix[1:]} {dot_path.name} -o {path.name}")
    options = [f"-Gdpi={_png_dpi(text, view.count())}"] if suffix == ".png" else []
    path.write_bytes(run_dot(text, suffix[1:], *options))
    return path
