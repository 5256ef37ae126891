"""Reading pictures back, and the network most picture tests draw.

    svg_groups(svg_text, cls)       (title, text) of each SVG group of a class ('op', 'call',
                                    'scope', 'param', ...), as Graphviz writes them
    engine_node_count(f, *args)     primitive applications as the engine itself records them:
                                    the nodes reachable from the output of one call traced
                                    as a picture traces it (fused model ops as their
                                    references: tracer.Trace(picturing=True))
    mlp(p, x), mlp_arguments(rng)   x (5, 3) -> dense (3, 4) -> tanh -> dense (4, 2):
                                    matmul, add, tanh, matmul, add
"""
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np

import autograd_lite as ag
from autograd_lite.core import tracer

SVG = "{http://www.w3.org/2000/svg}"


def svg_groups(svg_text, cls):
    out = []
    for g in ET.fromstring(svg_text).iter(SVG + "g"):
        if cls in g.get("class", "").split():
            out.append((g.find(SVG + "title").text,
                        " ".join(t.text or "" for t in g.iter(SVG + "text"))))
    return out


def engine_node_count(f, *args):
    """Every float array of the arguments (trees too) is an input node of one trace."""
    trace = tracer.Trace(picturing=True)

    def box(leaf):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f":
            return tracer.Box(leaf, trace, tracer.Node(None, (), "input", leaf.shape, leaf.dtype))
        return leaf
    out = f(*(ag.tree_map(box, a) for a in args))
    seen, stack = set(), [out.node]
    while stack:
        node = stack.pop()
        if node not in seen and node.parents:
            seen.add(node)
            stack.extend(parent for _, parent in node.parents)
    return len(seen)


class Dense(NamedTuple):
    w: np.ndarray
    b: np.ndarray


class MLP(NamedTuple):
    l1: Dense
    l2: Dense


def dense(p, x):
    return x @ p.w + p.b  # matmul, add


def layer(p, x):
    return ag.tanh(dense(p, x))  # tanh


def mlp(p, x):
    return dense(p.l2, layer(p.l1, x))


def mlp_arguments(rng):
    p = MLP(Dense(rng.standard_normal((3, 4)), rng.standard_normal(4)),
            Dense(rng.standard_normal((4, 2)), rng.standard_normal(2)))
    return p, rng.standard_normal((5, 3))
