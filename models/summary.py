"""summary(params): a per-layer table of a parameter tree and its total, like Flux's `show`.

    >>> print(models.summary(classifier.init(rng, 7455, 5)))
    Classifier
      embed                     table (7455, 32)        238,560
      encoder[0].self_attn.wq   w (32, 32), b (32,)       1,056
      ...
    Total: 21 arrays, 251,552 parameters, 0.960 MiB

A layer is the container that holds arrays directly; its row lists each array's field
and shape. Only floating arrays count as parameters: hyperparameters (ints, strings,
None) and integer arrays are left out.
"""
import numpy as np

import autograd_lite as ag


def is_parameter(leaf):
    return isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f"


def split_path(path):
    """'encoder[0].self_attn.wq.w' -> ('encoder[0].self_attn.wq', 'w'); '[2]' -> ('', '[2]')."""
    cut = max(path.rfind("."), path.rfind("["))
    if cut <= 0:
        return "", path.lstrip(".")
    return path[:cut], path[cut:].lstrip(".")


def layer_rows(params):
    """[(layer path, ['w (32, 32)', ...], parameter count, bytes)] in tree order."""
    rows = {}
    for path, leaf in zip(ag.tree_paths(params), ag.tree_leaves(params)):
        if not is_parameter(leaf):
            continue
        layer, field = split_path(path)
        shapes, count, nbytes = rows.get(layer, ([], 0, 0))
        shapes.append(f"{field} {leaf.shape}" if field else str(leaf.shape))
        rows[layer] = (shapes, count + leaf.size, nbytes + leaf.nbytes)
    return [(layer or "(root)", shapes, count, nbytes)
            for layer, (shapes, count, nbytes) in rows.items()]


def summary(params):
    """The table as a string: a header with the tree's type, one row per layer (path, array
    shapes, parameter count), then 'Total: <arrays> arrays, <n> parameters, <size> MiB'."""
    rows = layer_rows(params)
    n_arrays = sum(is_parameter(leaf) for leaf in ag.tree_leaves(params))
    total = sum(count for _, _, count, _ in rows)
    nbytes = sum(b for _, _, _, b in rows)
    names = [layer for layer, _, _, _ in rows]
    shapes = [", ".join(s) for _, s, _, _ in rows]
    counts = [f"{count:,}" for _, _, count, _ in rows]
    wide = [max(map(len, column), default=0) for column in (names, shapes, counts)]
    lines = [type(params).__name__]
    lines += [f"  {n:<{wide[0]}}  {s:<{wide[1]}}  {c:>{wide[2]}}"
              for n, s, c in zip(names, shapes, counts)]
    lines.append(f"Total: {n_arrays} arrays, {total:,} parameters, {nbytes / 2**20:.3f} MiB")
    return "\n".join(lines)
