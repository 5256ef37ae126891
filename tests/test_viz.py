"""ag.viz: pictures of traced calls, rendered with the real Graphviz `dot`."""
import re
import shlex
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.core import tracer
from helpers.pictures import (MLP, SVG, Dense, dense, engine_node_count, mlp, mlp_arguments,
                              svg_groups)

MLP_OPS = ["matmul", "add", "tanh", "matmul", "add"]  # counted by hand from helpers.pictures
MLP_PATHS = ["p.l1.w", "p.l1.b", "p.l2.w", "p.l2.b", "x"]


@pytest.fixture
def mlp_args(rng):
    return mlp_arguments(rng)


def render_svg(graph, tmp_path, **options):
    path = graph.render(tmp_path / "g.svg", **options)
    return path.read_text()


@pytest.mark.usefixtures("dot")
def test_svg_has_a_cluster_per_call_and_every_parameter_path(mlp_args, tmp_path):
    svg = render_svg(ag.viz.trace(mlp, *mlp_args), tmp_path)
    clusters = sorted(text.strip() for _, text in svg_groups(svg, "scope"))
    assert clusters == ["dense", "dense", "layer", "mlp"]  # dense in layer, dense in mlp
    inputs = [text for _, text in svg_groups(svg, "param") + svg_groups(svg, "input")]
    for path in MLP_PATHS:
        assert sum(text.split()[0] == path for text in inputs) == 1, path
    assert "x" in [t.split()[0] for _, t in svg_groups(svg, "input")]


@pytest.mark.usefixtures("dot")
def test_one_node_per_primitive_call(mlp_args, tmp_path):
    g = ag.viz.trace(mlp, *mlp_args)
    svg = render_svg(g, tmp_path)
    ops = [text.split()[0] for _, text in svg_groups(svg, "op")]
    assert len(ops) == len(MLP_OPS)
    assert sorted(ops) == sorted(MLP_OPS)
    assert [op.label for op in g.ops] == MLP_OPS  # in the order they ran


@ag.primitive
def softplus(x):
    out = np.logaddexp(0, x)  # its body's own numpy ops are not pictured
    return out, lambda g: (g * ag.sigmoid(x),)


def messy(x, w):
    """Operators, numpy functions on traced values, composite ops, a fused op with nested
    primitives inside (cross_entropy), a user primitive, a comprehension."""
    h = np.tanh(x @ w) * 0.5 + ag.var(x, axis=1, keepdims=True)
    parts = ag.split(h, 2, axis=1)
    h = ag.concatenate([softplus(q) for q in parts], axis=1)
    return ag.cross_entropy(h, np.array([0, 1, 2, 3])) + ag.sum(np.exp(h.T))


@pytest.mark.usefixtures("dot")
def test_node_count_equals_the_engines_count_of_primitive_calls(rng, tmp_path):
    x, w = rng.standard_normal((4, 6)), rng.standard_normal((6, 6))
    g = ag.viz.trace(messy, x, w)
    expected = engine_node_count(messy, x, w)
    assert len(g.ops) == expected
    svg = render_svg(g, tmp_path)
    assert len(svg_groups(svg, "op")) == expected
    # composite ops with several primitives get a cluster of their own; concatenate does not
    labels = sorted(text.strip() for _, text in svg_groups(svg, "scope"))
    assert labels == ["messy", "split", "var"]
    assert "cross_entropy" in [op.label for op in g.ops] and "log_softmax" not in [op.label for op in g.ops]


@pytest.mark.usefixtures("dot")
def test_depth_collapses_calls_into_boxes(mlp_args, tmp_path):
    g = ag.viz.trace(mlp, *mlp_args)

    def kinds(depth):
        svg = render_svg(g, tmp_path, depth=depth)
        return ({k: len(svg_groups(svg, k)) for k in ("op", "call", "param", "input", "output")},
                sorted(t.split()[0] for _, t in svg_groups(svg, "call")))
    assert kinds(None) == ({"op": 5, "call": 0, "param": 4, "input": 1, "output": 1}, [])
    # depth 0: the whole call is one box, its parameters drawn inside it
    assert kinds(0) == ({"op": 0, "call": 1, "param": 0, "input": 1, "output": 1}, ["mlp"])
    # depth 1: the calls mlp makes are boxes
    assert kinds(1) == ({"op": 0, "call": 2, "param": 0, "input": 1, "output": 1},
                        ["dense", "layer"])
    # depth 2: the ops of layer (tanh) and of mlp's dense are drawn, layer's dense is a box
    assert kinds(2) == ({"op": 3, "call": 1, "param": 2, "input": 1, "output": 1}, ["dense"])
    assert kinds(3) == kinds(None)
    assert g.view(0).count() < g.view(1).count() < g.view(2).count() < g.view(None).count()
    box = svg_groups(render_svg(g, tmp_path, depth=1), "call")
    layer_text = next(t for _, t in box if t.split()[0] == "layer")
    assert "(5, 3) → (5, 4)" in layer_text and "3 ops · 2 params (16)" in layer_text
    with pytest.raises(ValueError, match="depth"):
        g.to_dot(depth=-1)


@pytest.mark.usefixtures("dot")
def test_png_pdf_and_dot_files(mlp_args, tmp_path):
    g = ag.viz.trace(mlp, *mlp_args)
    png = g.render(tmp_path / "g.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert g.render(tmp_path / "g.pdf").read_bytes()[:5] == b"%PDF-"
    assert g.render(tmp_path / "g.dot").read_text().startswith("digraph")
    # a small picture is drawn at 144 dpi: twice the SVG's size in points
    svg_width = float(re.search(r'<svg width="(\d+)pt"', render_svg(g, tmp_path)).group(1))
    png_width = struct.unpack(">I", png[16:20])[0]
    assert png_width == pytest.approx(2 * svg_width, rel=0.02)
    with pytest.raises(ValueError, match=r"'\.jpg'.*\.svg, \.png, \.pdf, \.dot"):
        g.render(tmp_path / "g.jpg")


@pytest.mark.usefixtures("dot")
def test_draw_writes_the_file(mlp_args, tmp_path):
    g = ag.viz.draw(mlp, *mlp_args, path=tmp_path / "d.svg", depth=1, backward=True)
    assert isinstance(g, ag.viz.Graph)
    assert len(svg_groups((tmp_path / "d.svg").read_text(), "call")) == 2


def test_summary_lists_every_op(mlp_args):
    text = ag.viz.trace(mlp, *mlp_args).summary()
    lines = text.splitlines()
    ops = lines[lines.index("ops") + 1:lines.index("outputs")]
    assert [line.split()[1] for line in ops] == MLP_OPS
    assert [line.split()[0] for line in ops] == ["mlp/layer/dense"] * 2 + ["mlp/layer"] + ["mlp/dense"] * 2
    assert "x:f64[5,3], p.l1.w:f64[3,4] -> %1:f64[5,4]" in ops[0]
    assert lines[lines.index("outputs") + 1].split() == ["output", "=", "%5:f64[5,2]"]


def test_missing_dot_says_how_to_install_and_writes_the_dot_file(mlp_args, tmp_path, monkeypatch):
    g = ag.viz.trace(mlp, *mlp_args)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ag.viz.DotNotFoundError) as error:
        g.render(tmp_path / "g.svg")
    message = str(error.value)
    for hint in ("apt-get install graphviz", "brew install graphviz",
                 "conda install -c conda-forge graphviz", "g.dot"):
        assert hint in message
    assert (tmp_path / "g.dot").read_text() == g.to_dot()
    assert not (tmp_path / "g.svg").exists()
    with pytest.raises(ag.viz.DotNotFoundError):
        g._repr_svg_()


@pytest.mark.usefixtures("dot")
def test_notebook_svg(mlp_args):
    svg = ag.viz.trace(mlp, *mlp_args)._repr_svg_()
    assert "<svg" in svg and len(svg_groups(svg, "op")) == 5  # small: every op


def deep_chain(x, levels=4):
    """Two calls of itself per level, `levels` deep, then one tanh: 2**levels ops."""
    if levels == 0:
        return ag.tanh(x)
    for _ in range(2):
        x = deep_chain(x, levels - 1)
    return x


@pytest.mark.usefixtures("dot")
def test_notebook_shows_the_deepest_picture_that_stays_legible(rng):
    g = ag.viz.trace(deep_chain, rng.standard_normal(3))
    assert len(g.ops) == 16 and g.scope_depth() == 5
    assert g.readable_depth(max_nodes=100) is None  # 16 ops: every op fits
    sizes = {d: g.view(d).count() for d in range(6)}
    assert sizes == {0: 3, 1: 4, 2: 6, 3: 10, 4: 18, 5: 18}  # input, 2**(d-1) boxes, output
    assert g.readable_depth(max_nodes=10) == 3 and g.readable_depth(max_nodes=9) == 2
    assert g.readable_depth(max_nodes=1) == 0
    big = ag.viz.trace(deep_chain, rng.standard_normal(3), 8)  # 256 ops, 9 levels of calls
    depth = big.readable_depth()
    assert big.view().count() > 150 and big.view(depth).count() <= 150 < big.view(depth + 1).count()
    svg = big._repr_svg_()
    assert len(svg_groups(svg, "op")) + len(svg_groups(svg, "call")) == big.view(depth).count() - 2


def test_saved_bytes_follow_the_pullbacks(rng):
    # exp's pullback keeps its output y (not x); sum's keeps the same y for its shape
    g = ag.viz.trace(lambda x: ag.sum(ag.exp(x)), rng.standard_normal((3, 4)))
    assert g.saved_bytes() == (96, 0)
    # matmul keeps both operands: the argument x and the parameter w
    g = ag.viz.trace(lambda x, w: x @ w, rng.standard_normal((2, 3)), rng.standard_normal((3, 5)))
    assert g.saved_bytes() == (0, 2 * 3 * 8 + 3 * 5 * 8)


class Block(NamedTuple):
    w: np.ndarray


def block(p, h):
    return ag.relu(h @ p.w)


def stack_of_blocks(blocks, table, ids):
    h = ag.gather(table, ids) * 0.5
    for p in blocks:
        h = block(p, h)
    return h


@pytest.mark.usefixtures("dot")
def test_repeated_calls_tokens_and_folded_constants(rng, tmp_path):
    blocks = [Block(rng.standard_normal((4, 4)).astype(np.float32)) for _ in range(3)]
    table = rng.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    g = ag.viz.trace(stack_of_blocks, blocks, table, ids)
    svg = render_svg(g, tmp_path)
    labels = sorted(t.strip() for _, t in svg_groups(svg, "scope"))
    assert labels == ["block #1", "block #2", "block #3", "stack_of_blocks"]
    assert [t.split()[0] for _, t in svg_groups(svg, "data")] == ["ids"]
    assert [t.split()[0] for _, t in svg_groups(svg, "param")] == ["blocks[0].w", "blocks[1].w",
                                                                  "blocks[2].w"]
    mul = next(t for _, t in svg_groups(svg, "op") if t.startswith("mul"))
    assert mul.split() == ["mul", "(·,", "0.5)", "(2,", "3,", "4)", "f32"]
    gather = next(t for _, t in svg_groups(svg, "op") if t.startswith("gather"))
    assert gather.split() == ["gather", "(2,", "3,", "4)", "f32"]
    # depth 1: gather, mul, three block boxes (their weights inside), table, ids, output
    assert g.view(1).count() == 8


def sinusoids(length, d):
    """A table made during the call, returned by a user-level function: a constant."""
    return np.sin(np.arange(length * d, dtype=np.float32).reshape(length, d))


def add_rows(x, table):
    return x + table[:x.shape[1]]  # a slice of the table, as long as x


def lookup(table, ids):
    return ag.gather(table, ids)


def two_lengths(table, ids):
    """Two slices of one token array and two of one constant table, of different lengths."""
    long = add_rows(lookup(table, ids), sinusoids(6, 4))  # (2, 5, 4) + rows 0..4
    short = add_rows(lookup(table, ids[:, :-2]), sinusoids(6, 4))  # (2, 3, 4) + rows 0..2
    return ag.sum(long) + ag.sum(short)


@pytest.mark.usefixtures("dot")
def test_slices_of_one_array_show_the_shape_each_op_is_passed(rng, tmp_path):
    table, ids = rng.standard_normal((10, 4)).astype(np.float32), rng.integers(0, 10, (2, 5))
    g = ag.viz.trace(two_lengths, table, ids)
    adds = [line for line in g.summary().splitlines() if re.search(r"add_rows #\d +add ", line)]
    assert [re.findall(r"sinusoids:f32\[\d,\d\]", line) for line in adds] == [
        ["sinusoids:f32[5,4]"], ["sinusoids:f32[3,4]"]]  # named after the function that made it
    gathers = [line for line in g.summary().splitlines() if " gather " in line]
    assert ["ids:i64[2,5]" in gathers[0], "ids:i64[2,3]" in gathers[1]] == [True, True]
    consts = sorted(it.shape for it in g.items if it.kind == "const")
    assert consts == [(3, 4), (5, 4)]  # one node per slice, each of its own shape
    # a collapsed call lists the shapes it is passed: the slice of ids, not the whole array
    boxes = [t for _, t in svg_groups(g.render(tmp_path / "d1.svg", depth=1).read_text(), "call")]
    assert sorted(t.split(" → ")[0] for t in boxes if t.startswith("lookup")) == [
        "lookup #1 (10, 4), (2, 5)", "lookup #2 (10, 4), (2, 3)"]


def test_two_dtypes_over_one_memory_are_two_constants(rng):
    def weigh(x):
        keep = x > 0  # (5,) bool
        return ag.sum(x * keep) + ag.sum(x * keep.view(np.uint8))  # the same bytes as uint8
    g = ag.viz.trace(weigh, rng.standard_normal(5))
    consts = sorted(str(it.dtype) for it in g.items if it.kind == "const")
    assert consts == ["bool", "uint8"]
    assert "keep:bool[5]" in g.summary() and "const:u8[5]" in g.summary()  # the view is unnamed


def test_recording_leaves_no_trace_on_the_normal_path(mlp_args):
    ag.viz.trace(mlp, *mlp_args)
    assert sys.getprofile() is None
    assert tracer.Node.__slots__ == ("pullback", "parents", "op", "shape", "dtype", "n_args",
                                     "rule")
    code = ("import sys, numpy as np, autograd_lite as ag\n"
            "ag.gradient(lambda x: ag.sum(ag.tanh(x)), np.ones(3))\n"
            "assert 'autograd_lite.viz' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_model_that_marks_its_functions_loads_the_markers_and_capture_alone():
    code = ("import sys, models.attention, models.blocks\n"
            "print(sorted(m for m in sys.modules if m.startswith('autograd_lite.viz')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["['autograd_lite.viz',", "'autograd_lite.viz.capture',",
                                  "'autograd_lite.viz.marks',", "'autograd_lite.viz.saved',",
                                  "'autograd_lite.viz.scopes']"]
    assert ag.viz.dot.FORMATS is ag.viz.FORMATS  # the rest on first use, modules too
    assert ag.viz.Graph is ag.viz.graph.Graph and ag.viz.Explorer is ag.viz.explorer.Explorer
    with pytest.raises(AttributeError, match="has no attribute 'picture'"):
        ag.viz.picture


class Scale:
    """A callable object: its __call__ is pictured under the class name."""

    def __call__(self, x):
        return x * 2.0


class Shift:
    """A callable object whose __call__ does not call its instance `self`."""

    def __call__(layer, x):  # noqa: N805
        return x + 1.0


class Halve:
    """A static __call__: its first argument is the data, not an instance."""

    @staticmethod
    def __call__(x):
        return x * 0.5


def strings_and_objects(x):
    namespace = {"ag": ag}
    exec("def from_a_string(x):\n    return ag.exp(x)\n", namespace)  # as notebooks and docs run code
    return Halve()(Shift()(Scale()(namespace["from_a_string"](x))))


def test_code_run_from_strings_and_callable_objects_get_clusters(rng):
    g = ag.viz.trace(strings_and_objects, rng.standard_normal(3))
    assert [repr(op.scope) for op in g.ops] == ["strings_and_objects/from_a_string",
                                                "strings_and_objects/Scale",
                                                "strings_and_objects/Shift",
                                                "strings_and_objects/__call__"]


def test_a_picture_of_a_gradient_holds_the_forward_and_the_backward_ops(rng):
    def loss(x):
        return ag.sum(ag.tanh(x) ** 2)
    g = ag.viz.trace(ag.grad(loss), rng.standard_normal(4))
    forward = [(op.label, repr(op.scope)) for op in g.ops[:3]]
    assert forward == [("tanh", "gradient_of_f/loss"), ("pow", "gradient_of_f/loss"),
                       ("sum", "gradient_of_f/loss")]
    assert len(g.ops) > 3 and all(g.items[i].kind != "const" for op in g.ops for i, _ in op.inputs)
    assert [g.items[i].label for _, i in g.outputs] == ["mul"]  # the last op of tanh's pullback


def fake_dot(directory, stderr_line, exit_code=1):
    """A `dot` program in `directory` that reads its input, prints one line to stderr, and
    fails. Shell builtins only: PATH will hold nothing but `directory`."""
    directory.mkdir()
    script = directory / "dot"
    script.write_text(f"#!/bin/sh\nwhile read -r line; do :; done\n"
                      f"echo {shlex.quote(stderr_line)} >&2\nexit {exit_code}\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("suffix", [".svg", ".png", ".pdf"])
def test_a_failing_dot_raises_with_its_message_and_writes_nothing(mlp_args, tmp_path, monkeypatch,
                                                                 suffix):
    g = ag.viz.trace(mlp, *mlp_args)
    complaint = "Error: <stdin>: syntax error in line 7 near 'legend'"
    fake_dot(tmp_path / "bin", complaint)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # as in the missing-dot test: only ours
    assert ag.viz.dot.dot_executable() == str(tmp_path / "bin" / "dot")
    with pytest.raises(RuntimeError, match=rf"^dot -T{suffix[1:]} failed: {re.escape(complaint)}$"):
        g.render(tmp_path / f"g{suffix}")
    assert not (tmp_path / f"g{suffix}").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]  # no partial or .dot file
    with pytest.raises(RuntimeError, match=rf"^dot -Tsvg failed: {re.escape(complaint)}$"):
        g._repr_svg_()
    with pytest.raises(RuntimeError, match="dot -Tsvg failed"):  # and through draw
        ag.viz.draw(mlp, *mlp_args, path=tmp_path / "d.svg", backward=True)
    assert g.render(tmp_path / "g.dot").read_text() == g.to_dot()  # .dot needs no program


def relu_mlp(p, x):
    return dense(p.l2, ag.relu(dense(p.l1, x)))  # matmul, add, relu, matmul, add


@pytest.mark.usefixtures("dot")
def test_draw_backward_shows_saved_values_residuals_total_and_gradient_edges(tmp_path,
                                                                             fast_rules_on):
    """float32 MLP x (5, 3) -> dense (3, 4) -> relu -> dense (4, 2). What each op's
    pullback holds, read from the ops' code (autograd_lite/ops):
      matmul keeps both operands a, b;  add keeps only its operands' shapes (no array);
      relu keeps only the bool mask x > 0 (an array no op made: a residual).
    Each array counts once, on the node that made it (an argument or an op's output)."""
    rng = np.random.default_rng(0)
    f32 = np.dtype(np.float32)
    shapes = {"x": (5, 3), "p.l1.w": (3, 4), "p.l1.b": (4,), "p.l2.w": (4, 2), "p.l2.b": (2,)}
    arrays = {k: rng.standard_normal(s).astype(f32) for k, s in shapes.items()}
    p = MLP(Dense(arrays["p.l1.w"], arrays["p.l1.b"]), Dense(arrays["p.l2.w"], arrays["p.l2.b"]))

    def nbytes(shape, dtype=f32):
        return int(np.prod(shape)) * np.dtype(dtype).itemsize
    hidden, out = (5, 4), (5, 2)
    # x and the weights are matmul operands; the biases are only added
    saved_args = {k: nbytes(s) if k.endswith("w") or k == "x" else 0 for k, s in shapes.items()}
    saved_ops = {"matmul #1": 0,               # feeds add #1 only
                 "add #1": 0,                  # its output feeds relu only, which keeps a mask
                 "relu": nbytes(hidden),       # kept by matmul #2 (its operand a)
                 "matmul #2": 0,               # feeds add #2 only
                 "add #2": 0}                  # the output: nothing after it
    relu_residual = nbytes(hidden, np.bool_)   # the mask x > 0
    made = sum(saved_ops.values()) + relu_residual
    given = sum(saved_args.values())
    # made = 4·20 + 1·20 = 100 B; given = 4·(15 + 12 + 8) = 140 B

    g = ag.viz.draw(relu_mlp, p, arrays["x"], path=tmp_path / "b.svg", backward=True)
    assert g.saved_bytes() == (made, given)
    dot_text = g.render(tmp_path / "b.dot", backward=True).read_text()
    svg = (tmp_path / "b.svg").read_text()
    assert f"backward pass keeps {made + given} B: {made} B made during the call, " \
           f"{given} B of the arguments" in dot_text
    graph_label = [t.text for t in ET.fromstring(svg).find(SVG + "g").findall(SVG + "text")]
    assert graph_label[1:] == [f"backward pass keeps {made + given} B: {made} B made during the "
                               f"call, {given} B of the arguments"]

    ops = [t.split() for _, t in svg_groups(svg, "op")]
    assert sorted(o[0] for o in ops) == sorted(["matmul", "add", "relu", "matmul", "add"])
    by_shape = {}
    for words in ops:  # matmul #1 (5, 4) and matmul #2 (5, 2) tell themselves apart by shape
        by_shape[(words[0], " ".join(words[1:3]))] = " ".join(words)
    expected_ops = {("matmul", "(5, 4)"): saved_ops["matmul #1"], ("add", "(5, 4)"): 0,
                    ("relu", "(5, 4)"): saved_ops["relu"],
                    ("matmul", "(5, 2)"): saved_ops["matmul #2"], ("add", "(5, 2)"): 0}
    for key, saved in expected_ops.items():
        text = by_shape[key]
        if saved:
            assert f"saved {saved} B" in text, (key, text)
        else:
            assert "saved" not in text, (key, text)
    assert f"+{relu_residual} B residuals" in by_shape[("relu", "(5, 4)")]
    assert sum("residuals" in t for t in by_shape.values()) == 1  # the only residual

    leaves = {t.split()[0]: t for _, t in svg_groups(svg, "param") + svg_groups(svg, "input")}
    assert sorted(leaves) == sorted(shapes)
    for name, saved in saved_args.items():
        if saved:
            assert f"saved {saved} B" in leaves[name], (name, leaves[name])
        else:
            assert "saved" not in leaves[name], (name, leaves[name])

    # gradient edges: one dashed edge back to every parameter and to x, from the op using it
    leaf_groups = svg_groups(svg, "param") + svg_groups(svg, "input")
    name_of = {title: t.split()[0] for title, t in leaf_groups}
    op_of = {title: " ".join(t.split()[:3]) for title, t in svg_groups(svg, "op")}
    edges = {name_of[t.split("->")[1]]: op_of[t.split("->")[0]]
             for t, _ in svg_groups(svg, "gradient")}
    assert len(svg_groups(svg, "gradient")) == len(edges) == len(shapes)
    assert edges == {"x": "matmul (5, 4)", "p.l1.w": "matmul (5, 4)", "p.l1.b": "add (5, 4)",
                     "p.l2.w": "matmul (5, 2)", "p.l2.b": "add (5, 2)"}  # dense: x @ w + b
    assert 'class="gradient"' not in g.to_dot(backward=False)


def legend_cells(svg_text):
    """{cell text: (fill, border)} from the legend's table, in the order drawn."""
    legend = next(g for g in ET.fromstring(svg_text).iter(SVG + "g") if "legend" in g.get("class", ""))
    cells, fill, border = {}, None, None
    for element in legend:
        if element.tag == SVG + "path":
            if element.get("fill") not in ("none", "transparent"):
                fill = element.get("fill")
            if element.get("stroke") not in ("none", "transparent"):
                border = element.get("stroke")
        elif element.tag == SVG + "text" and element.text != "legend" and \
                not element.text.startswith("saved N:"):  # the explanation below the cells
            cells[" ".join(element.text.split())] = (fill, border)  # dot writes a no-break space
            fill = border = None
    return cells


def node_colours(svg_text, cls):
    """{(fill, border)} of the nodes of one class (their first filled shape)."""
    colours = set()
    for g in ET.fromstring(svg_text).iter(SVG + "g"):
        if cls in g.get("class", "").split() and "legend" not in g.get("class", ""):
            shape = next(e for e in g if e.tag in (SVG + "path", SVG + "polygon")
                         and e.get("fill") not in ("none", "transparent"))
            colours.add((shape.get("fill"), shape.get("stroke")))
    return colours


LEGEND_NAMES = {"param": "parameter", "input": "data input", "op": "op (output shape) dtype",
                "call": "function call (collapsed)", "output": "output"}


@pytest.mark.usefixtures("dot")
@pytest.mark.parametrize("depth, backward", [(None, False), (None, True), (1, True), (2, False)])
def test_the_legend_names_the_kinds_drawn_in_their_colours(depth, backward, mlp_args, tmp_path):
    graph = ag.viz.trace(mlp, *mlp_args)
    svg = graph.render(tmp_path / "g.svg", depth=depth, backward=backward).read_text()
    cells = legend_cells(svg)
    drawn = {cls: node_colours(svg, cls) for cls in LEGEND_NAMES}
    kinds = [cls for cls in LEGEND_NAMES if drawn[cls]]
    assert {"input", "output"} <= set(kinds) and ("call" in kinds) == (depth is not None)
    extra = ["saved for backward", "⇠ gradient (dashed)"] if backward else []
    assert sorted(cells) == sorted([LEGEND_NAMES[k] for k in kinds] + extra)
    for cls in kinds:
        assert {fill for fill, _ in drawn[cls]} == {cells[LEGEND_NAMES[cls]][0]}, cls


def svg_box(svg_text, cls):
    """(left, top, right, bottom) of the shapes and texts of the first group of class `cls`."""
    group = next(g for g in ET.fromstring(svg_text).iter(SVG + "g")
                 if cls in g.get("class", "").split())
    xs, ys = [], []
    for element in group.iter():
        if element.tag == SVG + "text":
            xs.append(float(element.get("x")))
            ys.append(float(element.get("y")))
        elif element.get("points") or element.get("d"):
            numbers = [float(n) for n in re.findall(r"-?\d+\.?\d*",
                                                    element.get("points") or element.get("d"))]
            xs += numbers[0::2]
            ys += numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


@pytest.mark.usefixtures("dot")
def test_the_legend_sits_below_the_output_and_the_backward_picture_explains_its_notes(
        mlp_args, tmp_path):
    """The legend sits below the output and within the picture's width, and the backward
    picture explains its "saved N" and "+N residuals" notes (the forward one has none)."""
    graph = ag.viz.trace(mlp, *mlp_args)
    for backward in (False, True):
        svg = graph.render(tmp_path / "g.svg", backward=backward).read_text()
        legend, output = svg_box(svg, "legend"), svg_box(svg, "output")
        assert legend[1] > output[3], (legend, output)  # svg y grows downwards
        width = float(ET.fromstring(svg).get("width").rstrip("pt"))
        assert legend[2] - legend[0] < width
        explained = "saved N: the bytes of this value that the backward pass keeps" in svg
        assert explained == backward
        assert ("+N residuals: other arrays an op&#39;s pullback makes and keeps" in svg or
                "+N residuals: other arrays an op's pullback makes and keeps" in svg) == backward
