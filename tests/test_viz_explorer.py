"""viz/explorer.py and the modules under it (view, layout, values): what each call's
view holds, the layouts dot makes, the statistics and gradient norms against numpy and the
analytic gradient, the source line of each op, what the page carries, and bad input.
The tests that lay a page out need Graphviz's dot (the `dot` fixture). The page itself is
tested in a browser in test_viz_explorer_browser.py."""
import html
import inspect
import json
import re

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.viz import explorer, values
from autograd_lite.viz.view import View
from helpers.pictures import mlp, mlp_arguments
from helpers.tiny_models import tiny_transformer
from models import transformer

def scope_named(graph, path):
    return next(s for s in graph.root.walk() if repr(s) == path)


def view_text(graph, path):
    """[(kind, first line)] of the slots and [(first line, first line)] of the edges."""
    slots, edges = explorer.slots_and_edges(View(graph, call=scope_named(graph, path)))
    slots = [(s.kind, s.lines[0]) for s in slots]
    return slots, sorted((slots[a][1], slots[b][1]) for a, b in edges)


def test_each_calls_view_holds_its_ops_its_calls_as_boxes_and_stubs_for_what_flows(rng):
    g = ag.viz.trace(mlp, *mlp_arguments(rng))  # mlp: layer (dense, tanh), then dense
    slots, edges = view_text(g, "mlp")
    assert slots == [("input", "x"), ("call", "layer"), ("call", "dense"), ("output", "output")]
    assert edges == [("dense", "output"), ("layer", "dense"), ("x", "layer")]
    slots, edges = view_text(g, "mlp/layer")  # p.l1 is used only inside dense: in its box
    assert slots == [("input", "x"), ("call", "dense"), ("op", "tanh"), ("output", "output")]
    assert edges == [("dense", "tanh"), ("tanh", "output"), ("x", "dense")]
    slots, edges = view_text(g, "mlp/layer/dense")
    assert slots == [("param", "p.l1.w"), ("param", "p.l1.b"), ("input", "x"), ("op", "matmul"),
                     ("op", "add"), ("output", "output")]
    assert edges == [("add", "output"), ("matmul", "add"), ("p.l1.b", "add"),
                     ("p.l1.w", "matmul"), ("x", "matmul")]
    slots, _ = view_text(g, "mlp/dense")  # the tanh of the caller flows in as a stub
    assert ("outer", "tanh in layer") in slots


def test_statistics_against_hand_computed_values():
    stats = values.statistics(np.array([0.0, 1.0, -2.0, np.nan, np.inf, 3.0], np.float32))
    assert stats["mean"] == pytest.approx(0.5) and stats["std"] == pytest.approx(np.sqrt(3.25))
    assert (stats["min"], stats["max"], stats["nonfinite"]) == (-2.0, 3.0, 2)
    assert stats["zeros"] == pytest.approx(1 / 6)
    assert values.statistics(np.array([True, False, False, False]))["mean"] == 0.25
    empty = values.statistics(np.full(3, np.nan))
    assert empty["mean"] is None and empty["nonfinite"] == 3


def test_values_of_each_op_and_gradient_norms_against_the_analytic_gradient(rng):
    p, x = mlp_arguments(rng)
    g = ag.viz.trace(mlp, p, x, values=True)  # a (5, 2) output: the gradient of its sum
    y = np.tanh(x @ p.l1.w + p.l1.b)  # (5, 4)
    tanh_item = next(op for op in g.ops if op.label == "tanh")
    assert tanh_item.stats["mean"] == pytest.approx(y.mean(), rel=1e-12)
    assert tanh_item.stats["max"] == pytest.approx(y.max(), rel=1e-12)
    dy = np.ones((5, 2)) @ p.l2.w.T * (1 - y ** 2)  # d sum / d (x W1 + b1)
    expected = {"p.l1.w": x.T @ dy, "p.l1.b": dy.sum(0), "p.l2.w": y.T @ np.ones((5, 2)),
                "p.l2.b": np.full(2, 5.0), "x": dy @ p.l1.w.T}
    norms = {it.label: it.grad_norm for it in g.items if it.kind in ("param", "input")}
    assert norms == pytest.approx({k: np.linalg.norm(v) for k, v in expected.items()}, rel=1e-10)


@pytest.mark.usefixtures("dot")
def test_an_infinite_gradient_norm_reaches_the_page(tmp_path):
    x = np.array([0.0, 4.0])  # d sqrt(x) / dx = 1 / (2 sqrt(x)): infinite at 0
    with np.errstate(divide="ignore"):
        ex = ag.viz.explore(lambda x: ag.sum(ag.sqrt(x)), x, values=True)
    data = json.loads(re.search(r'id="explorer-data">(.*?)</script>', ex.html, re.S).group(1))
    assert [it["grad_norm"] for it in data["items"] if it["kind"] == "input"] == ["inf"]
    assert data["items"][0]["stats"]["zeros"] == 0.5


def scaled(x):
    return ag.exp(x) * 2.0  # the line the explorer shows for exp and mul


def test_each_op_knows_its_source_line_and_pullback(rng):
    g = ag.viz.trace(scaled, rng.standard_normal(3))
    line = inspect.getsourcelines(scaled)[1] + 1
    for op in g.ops:
        assert op.source == (__file__, line, "return ag.exp(x) * 2.0  # the line the explorer "
                                             "shows for exp and mul")
    assert [op.pullback for op in g.ops] == ["exp_pullback", "mul_pullback"]


def transformer_page(n_layers=3):
    p = tiny_transformer(0, n_encoder=n_layers, n_decoder=n_layers)
    src, tgt = np.array([[1, 2, 3, 4]]), np.array([[1, 5, 6]])
    g = ag.viz.trace(lambda p, src, tgt: ag.sum(transformer.apply(p, src, tgt)), p, src, tgt)
    return g, explorer.page_data(g, backward=True, values=False)


@pytest.mark.usefixtures("dot")
def test_previous_and_next_step_between_repeated_calls_at_the_same_place():
    _, data = transformer_page()
    paths = [s["path"] for s in data["scopes"]]
    by_path = {s["path"]: s for s in data["scopes"]}

    def step(path, way):
        k = by_path[path][way]
        return None if k is None else paths[k]
    enc = [p for p in paths if p.endswith("multihead_attention") and "encoder_block" in p]
    assert [re.search(r"#(\d)", p).group(1) for p in enc] == ["1", "2", "3"]
    assert step(enc[1], "next") == enc[2] and step(enc[1], "prev") == enc[0]
    assert step(enc[0], "prev") is None and step(enc[2], "next") is None
    for name in ("multihead_attention", "cross_attention"):  # each decoder block's, in call order
        calls = [p for p in paths if re.search(rf"decoder_block #\d/{name}$", p)]
        assert [p.split("/")[-2] for p in calls] == [f"decoder_block #{k}" for k in (1, 2, 3)]
        assert [step(p, "next") for p in calls] == calls[1:] + [None]
        assert by_path[calls[1]]["repeat"] == [2, 3]


@pytest.mark.usefixtures("dot")
def test_repeated_calls_share_one_layout_and_layouts_fit_their_nodes():
    g, data = transformer_page()
    blocks = [s for s in data["scopes"] if re.search(r"encoder_block #\d$", s["path"])]
    # block 1's input comes from the embedding, the others' from the block before
    assert len(blocks) == 3 and blocks[1]["layout"] == blocks[2]["layout"]
    assert len(data["layouts"]) < len(data["scopes"])
    for scope in data["scopes"]:
        lay = data["layouts"][scope["layout"]]
        boxes = [(x - s[3] / 2, y - s[4] / 2, x + s[3] / 2, y + s[4] / 2)
                 for (x, y), s in zip(lay["nodes"], scope["slots"])]
        for i, a in enumerate(boxes):  # inside the drawing, and no two nodes overlap
            assert a[0] >= -1 and a[1] >= -1 and a[2] <= lay["w"] + 1 and a[3] <= lay["h"] + 1
            for b in boxes[i + 1:]:
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
        for tail, head, points in lay["edges"]:  # each spline leaves its tail, reaches its head
            assert (len(points) // 2 - 1) % 3 == 0
            assert near(boxes[tail], points[0], points[1])
            assert near(boxes[head], points[-2], points[-1], slack=12)  # the arrow's length


def near(box, x, y, slack=2):
    return box[0] - slack <= x <= box[2] + slack and box[1] - slack <= y <= box[3] + slack


@pytest.mark.usefixtures("dot")
def test_the_memory_curve_adds_up_to_what_the_backward_pass_keeps():
    g, data = transformer_page(1)
    made, given = g.saved_bytes()
    assert data["memory"][-1] == made and data["arguments_kept"] == given
    assert all(b >= a for a, b in zip(data["memory"], data["memory"][1:]))
    assert len(data["memory"]) == len(g.ops)
    assert data["scopes"][0]["kept"] == sum(op.kept + op.residual for op in g.ops)


@pytest.mark.usefixtures("dot")
def test_the_page_carries_its_data_and_forbids_the_network(rng, tmp_path):
    ex = ag.viz.explore(mlp, *mlp_arguments(rng), path=tmp_path / "mlp.html", values=True)
    page = (tmp_path / "mlp.html").read_text()
    assert page == ex.html and ex.path == tmp_path / "mlp.html"
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    data = json.loads(re.search(r'id="explorer-data">(.*?)</script>', page, re.S).group(1))
    assert [s["path"] for s in data["scopes"]] == ["mlp", "mlp/layer", "mlp/layer/dense",
                                                   "mlp/dense"]
    srcdoc = re.fullmatch(r'<iframe srcdoc="(.*)" style="[^"]*"></iframe>', ex._repr_html_(), re.S)
    assert html.unescape(srcdoc.group(1)) == page


def test_bad_input_gets_one_line_errors(rng, tmp_path):
    args = mlp_arguments(rng)
    with pytest.raises(FileNotFoundError, match="its folder .*missing' does not exist"):
        ag.viz.explore(mlp, *args, path=tmp_path / "missing" / "x.html")
    with pytest.raises(ValueError, match=r"must end in \.html"):
        ag.viz.explore(mlp, *args, path=tmp_path / "x.svg")
    with pytest.raises(ValueError, match="recorded no op"):
        ag.viz.explore(lambda ids: ids + 1, np.arange(3))
    with pytest.raises(ValueError, match="values=True needs a graph recorded with values"):
        ag.viz.trace(mlp, *args).explore(values=True)
