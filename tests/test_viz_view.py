"""viz/view.py: what a picture at a depth shows. Every item is drawn either as a node of
its own or inside one collapsed call; and the picture modules import one another in one
direction only (record -> scopes, graph -> view, dot -> labels)."""
import ast
import pathlib

import autograd_lite as ag
from autograd_lite import viz
from autograd_lite.viz.view import View
from helpers.pictures import mlp, mlp_arguments


def test_each_item_is_a_node_or_inside_one_box_and_edges_join_what_is_drawn(rng):
    g = ag.viz.trace(mlp, *mlp_arguments(rng))  # mlp: layer (dense, then tanh), then dense
    ids = {it.label: it.id for it in g.items if it.kind != "op"}
    ops = [op.id for op in g.ops]  # matmul, add, tanh (in layer), matmul, add (dense in mlp)
    for depth in (None, 0, 1, 2, 3):
        view = g.view(depth)
        assert set(view.nodes).isdisjoint(view.box_of)
        assert set(view.nodes) | set(view.box_of) == {it.id for it in g.items}
        assert set(view.box_of.values()) == set(view.boxes)
        assert all(box.scope is scope and box.cluster == scope.path[:-1]
                   for scope, box in view.boxes.items())
        assert set(view.clusters) == set(view.nodes)
        assert all(0 <= source < len(g.items) and target in ops for source, target in view.edges)
    view = g.view(1)  # mlp's two calls are boxes, each holding its own parameters
    layer_box, dense_box = view.boxes
    assert (layer_box.name, dense_box.name) == ("layer", "dense")
    assert view.nodes == [ids["x"]]
    assert view.box_of == {ops[0]: layer_box, ops[1]: layer_box, ops[2]: layer_box,
                           ops[3]: dense_box, ops[4]: dense_box,
                           ids["p.l1.w"]: layer_box, ids["p.l1.b"]: layer_box,
                           ids["p.l2.w"]: dense_box, ids["p.l2.b"]: dense_box}
    assert view.edges == [(ids["x"], ops[0]), (ops[2], ops[3])]  # x into layer, layer into dense
    assert view.boxes[layer_box].inputs == [(ids["x"], (5, 3))]
    assert view.boxes[layer_box].outputs == {ops[2]: (5, 4)}
    view = g.view(2)  # inside layer, its dense is a box; the ops of mlp's dense are drawn
    (inner_dense,) = view.boxes
    assert repr(inner_dense) == "mlp/layer/dense" and view.clusters[ops[2]][-1].name == "layer"
    assert view.edges == [(ids["x"], ops[0]), (ops[1], ops[2]), (ops[2], ops[3]),
                          (ids["p.l2.w"], ops[3]), (ops[3], ops[4]), (ids["p.l2.b"], ops[4])]


def test_a_calls_view_is_the_picture_at_its_depth_cut_down_to_its_ops(rng):
    g = ag.viz.trace(mlp, *mlp_arguments(rng))
    whole, root = g.view(1), View(g, call=g.root)  # the root's call: every op, at depth 1
    assert (root.depth, root.nodes, root.box_of, root.edges, root.outputs) == (
        1, whole.nodes, whole.box_of, whole.edges, whole.outputs)
    assert [(b.scope, b.inputs, b.outputs) for b in root.boxes.values()] == [
        (b.scope, b.inputs, b.outputs) for b in whole.boxes.values()]
    layer = g.root.children[0]
    view, deeper = View(g, call=layer), g.view(2)
    ops = [op.id for op in g.ops]  # matmul, add, tanh (in layer), matmul, add (dense in mlp)
    x = next(it.id for it in g.items if it.label == "x")
    assert view.ops == g.ops[:3] and view.nodes == [x, ops[2]]  # x flows in, tanh is its own
    assert view.box_of == {i: b for i, b in deeper.box_of.items() if b.parent is layer}
    assert view.edges == [e for e in deeper.edges if e[1] in ops[:3]]
    assert view.outputs == [("output", ops[2])]  # tanh is used after the call, by dense


def relative_imports(path):
    """The sibling modules a module imports (`from .labels import ...`), anywhere in it."""
    return {node.module for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_the_picture_modules_import_one_another_without_a_circle():
    directory = pathlib.Path(viz.__file__).parent
    imports = {path.stem: relative_imports(path) for path in directory.glob("*.py")
               if path.stem != "__init__"}
    assert imports["dot"] == {"labels"} and imports["labels"] == set()
    assert imports["graph"] == {"dot", "explorer", "labels", "view"}
    assert imports["record"] == {"labels", "saved", "scopes", "values"}
    assert imports["explorer"] == {"labels", "layout", "view"}
    done, visiting = set(), []

    def visit(module):  # depth first; a module met again while being visited is a circle
        assert module not in visiting, " -> ".join(visiting + [module])
        if module not in done:
            visiting.append(module)
            for other in imports[module]:
                visit(other)
            visiting.pop()
            done.add(module)
    for module in imports:
        visit(module)
