"""summary(params): a per-layer table of a parameter tree and its total, like Flux's `show`.

    >>> print(models.summary(classifier.init(rng, 7455, 5)))
    Classifier
      embed                     table (7455, 32)        238,560
      encoder[0].self_attn.wq   w (32, 32), b (32,)       1,056
      ...
    Total: 21 arrays, 251,552 parameters, 0.960 MiB

A layer is the container that holds parameters directly; its row lists each one's field
and shape. The parameters are the leaves the optimizers move (`ag.is_differentiable`):
hyperparameters (ints, strings, None, `ag.Hyper` settings) and integer arrays are left out.
"""
import numpy as np

import autograd_lite as ag


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
        if not ag.is_differentiable(leaf):
            continue
        # a float scalar counts as one parameter of shape (); a device's array as it is
        array = leaf if ag.device_name(leaf) != "cpu" else np.asarray(leaf)
        layer, field = split_path(path)
        shapes, count, nbytes = rows.get(layer, ([], 0, 0))
        shapes.append(f"{field} {array.shape}" if field else str(array.shape))
        rows[layer] = (shapes, count + array.size, nbytes + array.nbytes)
    return [(layer or "(root)", shapes, count, nbytes)
            for layer, (shapes, count, nbytes) in rows.items()]


def summary(params):
    """The table as a string: a header with the tree's type, one row per layer (path, array
    shapes, parameter count), then 'Total: <arrays> arrays, <n> parameters, <size> MiB'."""
    rows = layer_rows(params)
    n_arrays = sum(ag.is_differentiable(leaf) for leaf in ag.tree_leaves(params))
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
