"""Pictures of a training run and of a model, as PNG files (matplotlib's Agg renderer).

    plots.training_curves(history, "curves.png")                   # fit's history
    plots.confusion_matrix(labels, predicted, "confusion.png", class_names=stars)
    plots.probabilities_by_class(probabilities, labels, "probabilities.png")
    w = plots.classifier_attention(p, ids[:1], layer=0)[0, head]   # (T, T)
    plots.attention(w, "attention.png", tokens)
    w = plots.transformer_cross_attention(p, src, tgt, src_pad=0)[0].mean(axis=0)  # (T, S)
    plots.attention(w, "cross.png", tgt_tokens, src_tokens, xlabel="source", ylabel="target")
    plots.position_encoding("pe.png", max_len=50, d_model=32)

Each function draws on its own matplotlib Figure (no pyplot: nothing global changes and
no window opens), writes `path` at figsize × dpi pixels, and returns the Figure.
"""
import numpy as np

try:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter, FuncFormatter, MaxNLocator
except ImportError as error:  # matplotlib is in the `demos` extra, not a dependency
    raise ImportError("models.plots needs matplotlib: "
                      "pip install 'autograd-lite[demos]'") from error

from . import classifier, layers, transformer
from .attention import (causal_mask, keys_and_values, multihead_attention, padding_mask,
                        scaled_dot_product_attention, split_heads)
from .blocks import decoder_block, residual


def _save(fig, path):
    fig.savefig(path, format="png")  # at the figure's own dpi: exactly figsize × dpi pixels
    return fig


def training_curves(history, path, figsize=(10, 4), dpi=100, log_loss=None, bits=False,
                    per=None):
    """fit's history over the optimizer steps, in two panels that share the step axis, each
    epoch's end a light vertical line. Left: the loss of every step (light), its running
    mean, and each epoch's train and validation loss; in nats, or in bits with bits=True
    (the losses divided by ln 2), "per" naming the unit counted (e.g. "character"); on a log
    scale when log_loss is True, or when None (the default) and the step losses span more
    than a decade. Right (when there are any): the other per-epoch metrics."""
    epochs = history["epochs"]
    metrics = sorted({k for r in epochs for k in r} - {"epoch", "steps", "train_loss", "val_loss"})
    scale = 1 / np.log(2) if bits else 1.0
    step_loss = scale * np.asarray(history["step_loss"], dtype=np.float64)  # (steps,)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    axes = fig.subplots(1, 2 if metrics else 1, squeeze=False, sharex=True)[0]
    steps = np.arange(1, len(step_loss) + 1)
    ends = [r["steps"] for r in epochs]
    marker = "o-" if len(epochs) <= 20 else "-"  # a hundred markers only clutter
    _epoch_lines(axes, ends)
    axes[0].plot(steps, step_loss, color="0.75", linewidth=0.6, label="each step")
    window = max(1, len(step_loss) // 25)
    if window > 1:
        axes[0].plot(steps[window - 1:], running_mean(step_loss, window), color="0.3",
                     linewidth=1.2, label=f"mean of {window} steps")
    for name in ("train_loss", "val_loss"):
        if any(name in r for r in epochs):
            axes[0].plot(ends, [scale * r.get(name, np.nan) for r in epochs], marker,
                         label=f"{name.replace('_', ' ')} (epoch mean)")
    unit = ("bits" if bits else "nats") + (f" per {per}" if per else "")
    axes[0].set(xlabel="step", ylabel=f"cross-entropy ({unit})", title="training loss")
    positive = step_loss[step_loss > 0]
    if log_loss or (log_loss is None and len(positive) and positive.max() > 10 * positive.min()):
        axes[0].set_yscale("log")
        axes[0].yaxis.set_major_formatter(FormatStrFormatter("%g"))  # 0.01, not 10⁻²
        axes[0].yaxis.set_minor_formatter(FuncFormatter(_two_and_five))  # 0.2, 0.5, not 2×10⁻¹
    axes[0].legend(fontsize="small")
    if metrics:
        for name in metrics:
            axes[1].plot(ends, [r.get(name, np.nan) for r in epochs], marker,
                         label=name.replace("_", " "))
        axes[1].set(xlabel="step", ylabel=_metrics_label(metrics),
                    title="measured after each epoch")
        axes[1].legend(fontsize="small")
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
    return _save(fig, path)


def _two_and_five(value, _):
    """A minor tick label on a log axis: 0.2 and 0.5 (each decade's 2 and 5), the others blank."""
    leading = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def running_mean(values, window):
    """The mean of each `window` consecutive values: (N,) -> (N - window + 1,)."""
    sums = np.cumsum(np.concatenate([[0.0], values]))
    return (sums[window:] - sums[:-window]) / window


def _epoch_lines(axes, ends, most_labels=10):
    """A light vertical line at the last step of each epoch (of every k-th when there are
    more than most_labels epochs), on every panel; the first panel names them "epoch k"
    (counting from 1) along its top."""
    every = max(1, -(-len(ends) // most_labels))
    shown = [(k + 1, end) for k, end in enumerate(ends) if (k + 1) % every == 0]
    for ax in axes:
        for number, end in shown:
            ax.axvline(end, color="0.85", linewidth=0.8, zorder=0)
            if ax is axes[0]:
                ax.annotate(f"epoch {number}", (end, 1), xycoords=("data", "axes fraction"),
                            xytext=(-2, -2), textcoords="offset points", rotation=90,
                            ha="right", va="top", fontsize="x-small", color="0.5")


def _metrics_label(names):
    """The y label of the metrics panel: the kind the names share ("accuracy" for
    train_accuracy and val_accuracy, "exact match" for held_out_exact_match), else "value"."""
    kinds = {name.split("_", 1)[1] if name.startswith(("train_", "val_")) else name
             for name in names}
    return kinds.pop().replace("_", " ") if len(kinds) == 1 else "value"


def confusion_counts(true_labels, predicted_labels, n_classes):
    """counts[i, j] = how many samples of true class i were predicted as j: -> (n, n) ints."""
    true_labels, predicted_labels = (np.asarray(a) for a in (true_labels, predicted_labels))
    for name, a in (("true_labels", true_labels), ("predicted_labels", predicted_labels)):
        in_range = a.size == 0 or 0 <= a.min() <= a.max() < n_classes
        if a.ndim != 1 or a.dtype.kind not in "iu" or not in_range:
            raise ValueError(f"confusion_matrix: {name} must be integer labels 0..{n_classes - 1} "
                             f"(N,), got {a.dtype} {a.shape}")
    if true_labels.shape != predicted_labels.shape:
        raise ValueError(f"confusion_matrix: true_labels {true_labels.shape} and predicted_labels "
                         f"{predicted_labels.shape} differ in length")
    return np.bincount(true_labels * n_classes + predicted_labels,
                       minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def _class_names(class_names, n_classes):
    names = [str(i) for i in range(n_classes)] if class_names is None else list(class_names)
    if len(names) != n_classes:
        raise ValueError(f"plots: {len(names)} class names for {n_classes} classes")
    return names


def row_percentages(counts):
    """Each row of counts as percentages of its sum (0 for an empty row).  (n, n) -> (n, n)"""
    totals = counts.sum(axis=1, keepdims=True)  # (n, 1)
    return 100.0 * counts / np.maximum(totals, 1)


def confusion_matrix(true_labels, predicted_labels, path, class_names=None, figsize=(5, 5),
                     dpi=100):
    """The confusion matrix as a heatmap: each cell holds its count and its share of the
    true class (row_percentages), which colours it; rows are the true classes, columns the
    predicted ones. Classes: len(class_names), else max label + 1."""
    n = len(class_names) if class_names is not None else \
        int(max(np.max(true_labels, initial=0), np.max(predicted_labels, initial=0))) + 1
    counts = confusion_counts(true_labels, predicted_labels, n)
    names = _class_names(class_names, n)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    ax = fig.subplots()
    shares = row_percentages(counts)  # (n, n)
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=100)
    for (i, j), count in np.ndenumerate(counts):
        ax.text(j, i, f"{count}\n{shares[i, j]:.0f}%", ha="center", va="center",
                color="white" if shares[i, j] > 50 else "black")
    ax.set(xticks=range(n), yticks=range(n), xticklabels=names, yticklabels=names,
           xlabel="predicted class", ylabel="true class",
           title=f"confusion matrix, {counts.sum():,} samples\n"
                 f"each cell: count and % of its true class")
    fig.colorbar(image, ax=ax, shrink=0.8, label="% of the true class")
    return _save(fig, path)


def probabilities_by_class(probabilities, true_labels, path, class_names=None, figsize=(12, 3),
                           dpi=100):
    """One bar chart per true class: the mean predicted probability of every class over the
    samples of that class (the seed's evaluation charts). probabilities (N, C), true_labels (N,)."""
    probabilities, true_labels = np.asarray(probabilities), np.asarray(true_labels)
    if probabilities.ndim != 2 or true_labels.shape != probabilities.shape[:1]:
        raise ValueError(f"probabilities_by_class: probabilities (N, C) and true_labels (N,) "
                         f"expected, got {probabilities.shape} and {true_labels.shape}")
    n = probabilities.shape[1]
    names = _class_names(class_names, n)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    for k, ax in enumerate(fig.subplots(1, n, sharey=True, squeeze=False)[0]):
        rows = probabilities[true_labels == k]  # (N_k, C)
        ax.bar(range(n), rows.mean(axis=0) if len(rows) else np.zeros(n))
        ax.set(xticks=range(n), xticklabels=names, ylim=(0, 1), xlabel="predicted class",
               title=f"true {names[k]} (n={len(rows)})")
    fig.axes[0].set_ylabel("mean predicted probability")
    fig.suptitle("what the model predicts for the samples of each true class")
    return _save(fig, path)


def attention_weights(p, x_q, x_kv, mask=None):
    """The weights softmax(q kᵀ / √d_k) of multi-head attention p, its queries made from
    x_q (B, T_q, D), its keys from x_kv (B, T_k, D): -> (B, H, T_q, T_k), rows summing to 1
    (0 for a query with every key masked)."""
    q = split_heads(layers.dense(p.wq, x_q), p.n_heads)  # (B, H, T_q, d_head)
    k, v = keys_and_values(p, x_kv)  # (B, H, T_k, d_head) each
    return scaled_dot_product_attention(q, k, v, mask)[1]  # (B, H, T_q, T_k)


def self_attention_weights(p, x, mask=None):
    """The weights of multi-head self-attention p on x (B, T, D): -> (B, H, T, T)."""
    return attention_weights(p, x, x, mask)


def classifier_attention(p, ids, layer=0):
    """The self-attention weights of encoder block `layer` of a classifier (post-LN: the block's
    input is what the blocks before it return), without dropout. ids (B, T) -> (B, H, T, T)"""
    if not 0 <= layer < len(p.encoder):
        raise ValueError(f"classifier_attention: layer {layer} of a classifier with "
                         f"{len(p.encoder)} blocks")
    ids = classifier.check_ids(p, ids)
    x = classifier.encode(p._replace(encoder=p.encoder[:layer]), ids)  # (B, T, D)
    return self_attention_weights(p.encoder[layer].self_attn, x, padding_mask(ids, p.pad))


def transformer_cross_attention(p, src, tgt, src_pad=None, layer=-1):
    """The attention weights over the source of decoder block `layer` (negative counts from
    the last) of an encoder-decoder, without dropout: row t is the attention of the position
    fed tgt[:, t], the one that predicts the token after it.
    src (B, S), tgt (B, T) (BOS first, as in transformer.apply) -> (B, H, T, S)"""
    if not -len(p.decoder) <= layer < len(p.decoder):
        raise ValueError(f"transformer_cross_attention: layer {layer} of a transformer with "
                         f"{len(p.decoder)} decoder blocks")
    layer %= len(p.decoder)
    memory = transformer.encode(p, src, src_pad)  # (B, S, D)
    memory_mask = transformer.memory_mask(src, src_pad, memory)  # (B, 1, 1, S) or None
    transformer.check_tokens("transformer_cross_attention", "tgt", tgt, p.max_len)
    self_mask = causal_mask(tgt.shape[1])  # (1, 1, T, T)
    x = layers.embed_with_positions(p.tgt_embed, tgt, p.max_len)  # (B, T, D)
    for block in p.decoder[:layer]:
        x = decoder_block(block, x, memory, self_mask, memory_mask, p.norm)  # (B, T, D)
    block = p.decoder[layer]
    x = residual(block.norm1, x, lambda h: multihead_attention(block.self_attn, h, h, self_mask),
                 p.norm)  # (B, T, D)
    # the cross-attention sublayer's input, as blocks.residual gives it: pre-LN normalizes x
    queries = layers.layer_norm(block.norm2, x) if p.norm == "pre" else x  # (B, T, D)
    return attention_weights(block.cross_attn, queries, memory, memory_mask)  # (B, H, T, S)


def attention(weights, path, query_tokens, key_tokens=None, figsize=(6, 6), dpi=100, *,
              xlabel="key", ylabel="query", title="attention"):
    """A heatmap of one input's attention weights (T_q, T_k), queries down, keys across,
    labelled with their tokens (key_tokens default: the query tokens, for self-attention)."""
    weights = np.asarray(weights)
    key_tokens = query_tokens if key_tokens is None else key_tokens
    if weights.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"attention: weights {weights.shape} for {len(query_tokens)} query "
                         f"and {len(key_tokens)} key tokens; one head of one input is (T_q, T_k)")
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set(xticks=range(len(key_tokens)), yticks=range(len(query_tokens)),
           xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xticklabels(key_tokens, rotation=90)
    ax.set_yticklabels(query_tokens)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight (each row sums to 1)")
    return _save(fig, path)


def position_encoding(path, max_len=50, d_model=32, figsize=(8, 4), dpi=100):
    """A heatmap of the sinusoidal position encoding PE (max_len, d_model) of §3.5."""
    table = layers.position_encoding(max_len, d_model, np.float64)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set(xlabel="dimension i", ylabel="position", title="position encoding")
    fig.colorbar(image, ax=ax, label="PE(position, i)")
    return _save(fig, path)
