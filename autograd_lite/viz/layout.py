"""Graphviz layouts of the explorer's views, made when the page is written.

Each view becomes DOT text holding only what its layout depends on: each node's size (from
its lines of text, in the page's monospace font) and the edges. It names no parameter or
call, so the views of repeated calls (`encoder_block #1..#6`) are one text, laid out once.
The texts go to `dot -Tplain` as streams of graphs, two processes at a time. Units: pixels
at 72 per inch, y pointing down, as the page's SVG draws them.
"""
from concurrent.futures import ThreadPoolExecutor

from .dot import DotNotFoundError, INSTALL, dot_executable, run_dot

CHAR_WIDTH, LINE_HEIGHT, PAD_X, PAD_Y = 6.6, 14, 14, 8  # 11 px monospace, as explorer.css
PROCESSES = 2


def node_size(lines, bold_first=False):
    """(width, height) in pixels of a node holding `lines` of text."""
    width = max(len(line) for line in lines) * CHAR_WIDTH * (1.08 if bold_first else 1.0)
    return round(width + 2 * PAD_X), len(lines) * LINE_HEIGHT + 2 * PAD_Y


def layout_text(sizes, edges):
    """DOT text for nodes of `sizes` [(w, h)] named by their index, and `edges` [(i, j)]."""
    lines = ["digraph{graph[rankdir=TB,nodesep=0.3,ranksep=0.4];"
             'node[shape=box,fixedsize=true,label=""];']
    lines += [f"{n}[width={w / 72:.3f},height={h / 72:.3f}];" for n, (w, h) in enumerate(sizes)]
    lines += [f"{a}->{b};" for a, b in edges]
    return "".join(lines) + "}\n"


def parse_plain(text):
    """The layouts in `dot -Tplain` output of one or more graphs: per graph
    {"w", "h", "nodes": [[x, y], ...] centres by node index, "edges": [[i, j, [x, y, ...]]]}
    with each edge's cubic B-spline control points (1 + 3k points)."""
    layouts, current, height = [], None, 0.0
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "graph":
            height = float(parts[3])
            current = {"w": round(float(parts[2]) * 72), "h": round(height * 72),
                       "nodes": {}, "edges": []}
        elif parts[0] == "node":
            current["nodes"][int(parts[1])] = [round(float(parts[2]) * 72, 1),
                                               round((height - float(parts[3])) * 72, 1)]
        elif parts[0] == "edge":
            n = int(parts[3])
            numbers = [float(v) for v in parts[4:4 + 2 * n]]
            points = []
            for x, y in zip(numbers[0::2], numbers[1::2]):
                points += [round(x * 72, 1), round((height - y) * 72, 1)]
            current["edges"].append([int(parts[1]), int(parts[2]), points])
        elif parts[0] == "stop":
            nodes = current["nodes"]
            current["nodes"] = [nodes[i] for i in range(len(nodes))]
            layouts.append(current)
    return layouts


def _run_dot(texts):
    layouts = parse_plain(run_dot("".join(texts), "plain").decode("utf-8"))
    if len(layouts) != len(texts):
        raise RuntimeError(f"dot -Tplain laid out {len(layouts)} of {len(texts)} graphs")
    return layouts


def lay_out(texts):
    """The layout of each of the distinct DOT `texts`, in their order."""
    if dot_executable() is None:
        raise DotNotFoundError(f"Graphviz's `dot` program was not found on PATH: the "
                               f"explorer lays out its views with it. {INSTALL}")
    # split by total size, so that both processes get about the same amount of work
    shares, loads = [[] for _ in range(PROCESSES)], [0] * PROCESSES
    for text in sorted(texts, key=len, reverse=True):
        k = loads.index(min(loads))
        shares[k].append(text)
        loads[k] += len(text)
    with ThreadPoolExecutor(PROCESSES) as pool:
        results = list(pool.map(_run_dot, [s for s in shares if s]))
    found = {}
    for share, layouts in zip([s for s in shares if s], results):
        found.update(zip(share, layouts))
    return [found[text] for text in texts]
