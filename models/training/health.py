"""Training health: the numbers that say whether a training step is sound beyond its loss,
measured by `train.fit(..., health_every=N)` on every N-th update and kept in the history.

The parameters fall into groups by the first level of their tree path (an LM's "embed",
"blocks[0]", "blocks[1]", "norm", "head"; a whole array is the group "params"). For each
group g with gradient G_g, parameters P_g before the update and P'_g after it:

    grad_norm[g]     = ‖G_g‖ = √(Σ G_g²)                   before clipping
    update_ratio[g]  = RMS(P'_g - P_g) / RMS(P_g) = ‖P'_g - P_g‖ / ‖P_g‖   (the sizes cancel)

and for the whole tree: the global gradient norm ‖G‖ = √(Σ_g ‖G_g‖²) before clipping, whether
clipping fired (clip_by_global_norm's test: max_norm / (‖G‖ + 1e-6) < 1), and the fraction of
gradient entries that are NaN or infinite. An update ratio near 1e-3 is the usual healthy
figure for Adam; one far below says the group hardly learns, one near 1 that it is thrown about.

With fit(..., example_health=True) a record also holds the quantiles of the examples' own
gradient norms, ‖∇ loss_i‖ for each example i of the batch (`example_gradient_norms`, one
ag.vmap of the gradient): a wide spread says a few examples drive the step (outliers, label
noise); their median, beside the batch's norm, how much the examples' gradients agree.

    groups = parameter_groups(params)                    # {name: [leaf index, ...]}
    record = gradient_health(grads, groups, clip_norm)  # before the update
    record["update_ratio"] = update_ratios(snapshot(params, groups), new_params, groups)
"""
import math

import numpy as np

import autograd_lite as ag

ROOT_GROUP = "params"  # the name of the one group of a tree that is a single array


def group_name(path):
    """The first level of a tree path: 'blocks[0].ff.linear1.w' -> 'blocks[0]', 'head.w' ->
    'head', '[1].w' -> '[1]' (a tuple of parameters); '' (the tree is one array) -> 'params'."""
    if not path:
        return ROOT_GROUP
    head = path.split(".", 1)[0]
    return head[:head.index("]") + 1] if head.startswith("[") else head


def parameter_groups(params):
    """{group name: [indices in tree_leaves(params) of its float array leaves]}, groups in the
    order their first leaf comes."""
    groups = {}
    for index, (path, leaf) in enumerate(zip(ag.tree_paths(params), ag.tree_leaves(params))):
        if (isinstance(leaf, np.ndarray) or ag.array_module(leaf) is not np) \
                and ag.is_differentiable(leaf):  # a numpy or a device's float array
            groups.setdefault(group_name(path), []).append(index)
    return groups


def _by_group(tree, groups):
    """{group: [its leaves of `tree`]} (the tree flattened once; None gradients left out)."""
    leaves = ag.tree_leaves(tree)
    return {name: [leaves[i] for i in indices if leaves[i] is not None]
            for name, indices in groups.items()}


def gradient_health(grads, groups, clip_norm=None):
    """{"grad_norm", "clipped", "nonfinite_fraction", "group_grad_norm": {group: norm}} of a
    gradient tree before clipping; "clipped" is False when clip_norm is None."""
    group_norms = {name: ag.optim.global_norm(leaves)
                   for name, leaves in _by_group(grads, groups).items()}
    norm = math.sqrt(sum(n * n for n in group_norms.values()))
    clipped = clip_norm is not None and float(clip_norm) / (norm + 1e-6) < 1.0
    return {"grad_norm": norm, "clipped": bool(clipped),
            "nonfinite_fraction": nonfinite_fraction(grads, groups, norm),
            "group_grad_norm": group_norms}


def nonfinite_fraction(grads, groups, norm=None):
    """The fraction of the groups' gradient entries that are NaN or ±inf (0.0 without counting
    when `norm`, the global norm, is known to be finite)."""
    if norm is not None and math.isfinite(norm):
        return 0.0
    leaves = [g for group in _by_group(grads, groups).values() for g in group]
    total = sum(g.size for g in leaves)
    return sum(int(np.count_nonzero(~np.isfinite(g))) for g in leaves) / max(total, 1)


def describe_nonfinite(grads, groups):
    """Where a gradient is not finite, in one clause: how many entries are NaN or ±inf and
    in which groups; when none is (a loss that is not finite, or a norm past the float
    range), the group with the largest norm, measured in float64."""
    by_group = _by_group(grads, groups)
    counts = {name: sum(int(np.count_nonzero(~np.isfinite(g))) for g in leaves)
              for name, leaves in by_group.items()}
    bad, total = sum(counts.values()), sum(g.size for leaves in by_group.values() for g in leaves)
    if bad:
        return (f"{bad:,} of the gradient's {total:,} entries are NaN or infinite, in "
                + ", ".join(name for name, n in counts.items() if n))
    norms = {name: math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in leaves))
             for name, leaves in by_group.items()}
    if not norms:
        return "the gradient has no float entries"
    largest = max(norms, key=norms.get)
    return (f"every gradient entry is finite; the largest group's norm is {largest}'s, "
            f"{norms[largest]:.3g}")


def snapshot(params, groups):
    """Copies of the groups' leaves before an update ({group: [arrays]}): an optimizer with
    in_place=True would otherwise change them under us."""
    return {name: [ag.array_module(leaf).array(leaf) for leaf in leaves]  # copies
            for name, leaves in _by_group(params, groups).items()}


def update_ratios(before, params, groups):
    """{group: ‖P' - P‖ / ‖P‖}: RMS of the update over RMS of the parameters before it
    (inf for a group whose parameters were all zero and moved, 0.0 if they did not move)."""
    ratios = {}
    for name, leaves in _by_group(params, groups).items():
        old = before[name]
        change = ag.optim.global_norm([new - p for new, p in zip(leaves, old)])
        size = ag.optim.global_norm(old)
        ratios[name] = change / size if size else (math.inf if change else 0.0)
    return ratios


def summary(records):
    """One line on fit's health records: the global gradient norm at the first and last
    record, how often clipping fired, the median over groups of the update ratio at the
    first and last, and the non-finite entries if any (records: history.get("health"))."""
    if not records:
        return "training health: not recorded (fit(..., health_every=N) records it)"
    first, last = records[0], records[-1]
    clipped = sum(r["clipped"] for r in records)
    ratio = [float(np.median(list(r["update_ratio"].values()))) for r in (first, last)]
    worst = max(r["nonfinite_fraction"] for r in records)
    return (f"training health (steps {first['step']}..{last['step']}, {len(records)} records): "
            f"gradient norm {first['grad_norm']:.3g} -> {last['grad_norm']:.3g}, clipped in "
            f"{clipped} of {len(records)}; update/parameter RMS (median of groups) "
            f"{ratio[0]:.2g} -> {ratio[1]:.2g}; "
            + (f"non-finite entries up to {worst:.2g}" if worst else "no NaN or inf"))


EXAMPLE_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def example_gradient_norms(loss_fn, params, batch, rng):
    """‖∇ loss of each example‖ (B,): the loss of one example is loss_fn of a batch holding
    it alone (each array of the batch sliced along its first axis, kept as a batch of one),
    its gradients for all B examples in one call through ag.vmap. The loss of a batch must be
    the mean (or sum) of its examples' for these to be the gradients that make the step's.
    Dropout's masks are those a loop over the examples draws from rng, example after example
    (vmap's randomness="different")."""
    def example_loss(p, example):
        one = ag.tree_map(lambda a: a[None] if hasattr(a, "shape") else a, example)
        out = loss_fn(p, one, rng)
        return out[0] if isinstance(out, tuple) else out

    in_axes = ag.tree_map(lambda a: 0 if hasattr(a, "shape") else None, batch)
    grads = ag.vmap(ag.grad(example_loss), in_axes=(None, in_axes),
                    randomness="different")(params, batch)
    squares = [np.square(g, dtype=np.float64).reshape(len(g), -1).sum(axis=1)
               for g in ag.tree_leaves(grads) if g is not None]
    return np.sqrt(np.sum(squares, axis=0))


def example_norm_quantiles(norms):
    """{"q05": ..., "q25", "q50", "q75", "q95"}: quantiles of the per-example gradient norms."""
    return {f"q{round(100 * q):02d}": float(np.quantile(norms, q)) for q in EXAMPLE_QUANTILES}
