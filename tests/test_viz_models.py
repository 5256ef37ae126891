"""Pictures of the models: the encoder-decoder and the classifier at depth 1 and 2."""
import re
import struct

import numpy as np
import pytest

import autograd_lite as ag
from models import classifier, transformer
from helpers.pictures import engine_node_count, svg_groups


def calls_and_clusters(graph, tmp_path, depth):
    svg = graph.render(tmp_path / f"depth{depth}.svg", depth=depth).read_text()
    calls = sorted(t for _, t in svg_groups(svg, "call"))
    clusters = sorted(t.strip() for _, t in svg_groups(svg, "scope"))
    nodes = [g for g in svg_groups(svg, "node") if g[0] != "legend"]
    return calls, clusters, len(nodes)


def _box_label(text):
    """'encoder_block #1 (2, 7, 16) → ...' -> 'encoder_block #1'"""
    return text.split(" (")[0].strip()


@pytest.fixture
def tokens(rng):
    src = rng.integers(1, 11, (2, 7))
    src[0, -2:] = 0
    return src, rng.integers(1, 13, (2, 6))


def transformer_graph(rng, tokens, n_layers):
    p = transformer.init(rng, 11, 13, d_model=16, n_heads=2, d_ff=32, n_encoder=n_layers,
                         n_decoder=n_layers, max_len=20)
    return p, ag.viz.trace(transformer.apply, p, *tokens, 0)


@pytest.mark.usefixtures("dot")
def test_transformer_pictures_at_depth_1_and_2(rng, tokens, tmp_path):
    p, g = transformer_graph(rng, tokens, 2)
    assert len(g.ops) == engine_node_count(lambda p, s, t: transformer.apply(p, s, t, 0), p, *tokens)

    calls, clusters, _ = calls_and_clusters(g, tmp_path, 1)
    assert [_box_label(c) for c in calls] == ["decode", "encode"]
    assert clusters == ["apply"]

    calls, clusters, _ = calls_and_clusters(g, tmp_path, 2)
    labels = [_box_label(c) for c in calls]
    assert clusters == ["apply", "decode", "encode"]
    for name in ("encoder_block #1", "encoder_block #2", "decoder_block #1", "decoder_block #2"):
        assert labels.count(name) == 1, name
    assert not any(label.startswith("multihead_attention") for label in labels)

    # every op knows its full scope: attention inside a block inside a stack inside apply
    scopes = {repr(op.scope) for op in g.ops}
    assert "apply/encode/encoder_block #2/multihead_attention/scaled_dot_product_attention" in scopes
    assert "apply/decode/decoder_block #1/multihead_attention/scaled_dot_product_attention" in scopes
    assert "apply/decode/decoder_block #1/cross_attention/scaled_dot_product_attention" in scopes


def test_the_position_table_is_named_and_each_stack_gets_its_own_rows(rng, tokens):
    _, g = transformer_graph(rng, tokens, 1)
    rows = sorted(it.shape for it in g.items if it.label == "position_rows")
    assert rows == [(6, 16), (7, 16)]  # tgt (2, 6) and src (2, 7): PE[:T] and PE[:S]
    listing = g.summary()
    assert "position_rows:f32[7,16]" in listing and "position_rows:f32[6,16]" in listing
    names = {it.label for it in g.items if it.kind == "const"}
    assert names == {"position_rows", "mask", "self_mask", "mem_mask"}


@pytest.mark.usefixtures("dot")
def test_base_transformer_at_depth_2_stays_readable(rng, tokens, tmp_path):
    _, g = transformer_graph(rng, tokens, 6)  # the base model's 6 + 6 layers, a small width
    assert len(g.ops) > 400
    calls, _, n_nodes = calls_and_clusters(g, tmp_path, 2)
    assert n_nodes < 80
    labels = [_box_label(c) for c in calls]
    assert sum(label.startswith("encoder_block #") for label in labels) == 6
    assert sum(label.startswith("decoder_block #") for label in labels) == 6


@pytest.mark.usefixtures("dot")
def test_classifier_pictures_at_depth_1_and_2(rng, tmp_path):
    p = classifier.init(rng, 30, 5, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=10, pad=0)
    ids = rng.integers(0, 30, (3, 10))
    g = ag.viz.trace(classifier.apply, p, ids)
    assert len(g.ops) == engine_node_count(classifier.apply, p, ids)

    calls, clusters, _ = calls_and_clusters(g, tmp_path, 1)
    assert "encode" in [_box_label(c) for c in calls]
    assert clusters == ["apply"]

    calls, clusters, _ = calls_and_clusters(g, tmp_path, 2)
    labels = [_box_label(c) for c in calls]
    assert "encode" in clusters and "apply" in clusters
    assert labels.count("encoder_block #1") == 1 and labels.count("encoder_block #2") == 1
    svg = g.render(tmp_path / "full.svg").read_text()
    assert [t.split()[0] for _, t in svg_groups(svg, "data")] == ["ids"]
    params = [t.split()[0] for _, t in svg_groups(svg, "param")]
    assert sorted(params) == sorted(ag.tree_paths(p, root="p")[i]
                                    for i, leaf in enumerate(ag.tree_leaves(p))
                                    if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f")


@pytest.mark.usefixtures("dot")
def test_large_pictures_grow_their_canvas_instead_of_shrinking_the_text(rng, tokens, tmp_path):
    _, g = transformer_graph(rng, tokens, 1)
    assert g.view().count() > 100
    assert not re.search(r"[ ,\[]size=", g.to_dot())  # no page size: nothing scales it down
    svg = g.render(tmp_path / "full.svg").read_text()
    svg_width = float(re.search(r'<svg width="(\d+)pt"', svg).group(1))
    png = g.render(tmp_path / "full.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # 96 dpi: 11 pt text stays 15 px high, however wide the picture is
    assert struct.unpack(">I", png[16:20])[0] == pytest.approx(svg_width * 96 / 72, rel=0.02)


@pytest.mark.usefixtures("dot")
@pytest.mark.parametrize("depth", [1, 2, 3, None])
def test_backward_picture_reaches_every_parameter_at_every_depth(depth, rng, tmp_path):
    """Each parameter gets its gradient shown once: a dashed gradient edge when it is drawn
    as a node, else counted in the collapsed call that holds it ("gradients of N params
    inside"). Tied embeddings make one parameter feed two calls."""
    p = transformer.init(rng, 11, 13, d_model=16, n_heads=2, d_ff=32, n_encoder=2, n_decoder=2,
                         max_len=12, share_embeddings=True, dtype=np.float64)
    src, tgt = rng.integers(1, 11, (2, 5)), rng.integers(1, 13, (2, 4))
    graph = ag.viz.trace(lambda p, src, tgt: ag.sum(transformer.apply(p, src, tgt)), p, src, tgt)
    n_params = len([leaf for leaf in ag.tree_leaves(p)
                    if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f"])
    svg = graph.render(tmp_path / "b.svg", depth=depth, backward=True).read_text()
    param_titles = {title: text.split()[0] for title, text in svg_groups(svg, "param")}
    reached = {param_titles[t.split("->")[1]] for t, _ in svg_groups(svg, "gradient")}
    inside = sum(int(n) for _, text in svg_groups(svg, "call")
                 for n in re.findall(r"gradients of (\d+) params? inside", text))
    assert len(reached) + inside == n_params
    if depth is None:
        assert inside == 0 and len(svg_groups(svg, "call")) == 0
    else:
        assert inside > 0


@pytest.mark.usefixtures("dot")
def test_the_table_shared_by_all_three_is_one_parameter_feeding_three_calls(rng, tokens,
                                                                            tmp_path):
    """share_embeddings="all": at depth 2 one parameter box, p.tgt_embed.table, feeds both
    embed_with_positions (source and target) and project; in the explorer it is one item
    whose consumers are the two embeddings' gathers and the projection's transpose."""
    from autograd_lite.viz import explorer
    p = transformer.init(rng, 13, 13, d_model=16, n_heads=2, d_ff=32, n_encoder=1,
                         n_decoder=1, max_len=20, share_embeddings="all")
    g = ag.viz.trace(transformer.apply, p, *tokens, 0)
    svg = g.render(tmp_path / "shared.svg", depth=2).read_text()
    params = {title: text.split()[0] for title, text in svg_groups(svg, "param")}
    assert "p.src_embed.table" not in params.values() and "p.out.w" not in params.values()
    (table,) = [title for title, label in params.items() if label == "p.tgt_embed.table"]
    boxes = {title: _box_label(text) for title, text in svg_groups(svg, "call")}
    fed = [boxes[t.split("->")[1]] for t, _ in svg_groups(svg, "edge")
           if t.startswith(table + "->")]
    assert sorted(fed) == ["embed_with_positions", "embed_with_positions", "project"]

    page = explorer.page_data(g, backward=True, values=False)
    (item,) = [it for it in page["items"] if it["label"] == "p.tgt_embed.table"]
    labels = {it["id"]: it["label"] for it in page["items"]}
    assert sorted(labels[c] for c in item["consumers"]) == ["gather", "gather", "transpose"]
    assert page["scopes"][item["home"]]["path"] == "apply"  # the call that holds all three
