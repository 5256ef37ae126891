"""Pictures of a training run and of a model, as PNG files (matplotlib's Agg renderer).

    plots.training_curves(history, "curves.png")                   # fit's history
    plots.training_health(history, "health.png")                   # fit(..., health_every=N)
    plots.confusion_matrix(labels, predicted, "confusion.png", class_names=stars)
    plots.probabilities_by_class(probabilities, labels, "probabilities.png")
    w = plots.transformer_cross_attention(p, src, tgt, src_pad=0)[0].mean(axis=0)  # (T, S)
    plots.attention(w, "cross.png", tgt_tokens, src_tokens, xlabel="source", ylabel="target")

Each function draws on its own matplotlib Figure (no pyplot: nothing global changes and
no window opens), writes `path` at figsize × dpi pixels, and returns the Figure.
"""
import functools

import numpy as np

try:
    from matplotlib import font_manager
    from matplotlib.figure import Figure
    from matplotlib.ft2font import FT2Font
    from matplotlib.ticker import FormatStrFormatter, FuncFormatter, MaxNLocator
except ImportError as error:  # matplotlib is in the `demos` extra, not a dependency
    raise ImportError("models.plots needs matplotlib: "
                      "pip install 'autograd-lite[demos]'") from error

import autograd_lite as ag
from autograd_lite.io.atomic import write_atomically

from .. import transformer


def _save(fig, path):
    """The PNG at the figure's own dpi (exactly figsize × dpi pixels), written atomically: a
    Ctrl-C or a crash leaves the old picture or the new one, never a truncated one."""
    write_atomically(path, lambda fh: fig.savefig(fh, format="png"), caller="plots")
    return fig


def training_curves(history, path, figsize=(10, 4), dpi=100, log_loss=None, bits=False,
                    per=None, val_label=None, final=None, val_name="val"):
    """fit's history over the optimizer steps, in two panels that share the step axis, each
    epoch's end a light vertical line. Left: the loss of every step (light), its running
    mean, and each epoch's train and validation loss; in nats, or in bits with bits=True
    (the losses divided by ln 2), "per" naming the unit counted (e.g. "character"); on a log
    scale when log_loss is True, or when None (the default) and the step losses span more
    than a decade. Right (when there are any): the other per-epoch metrics.
    val_label: the legend's words for the validation loss (say how it is measured, where a
    program reports another figure); val_name: what the labels call the validation batches
    ("test" where they are a test set); final: (value, label), a figure measured after
    training, in the panel's unit, drawn as a star at the last step. Epochs are numbered as
    the history numbers them, from 0."""
    epochs = history["epochs"]
    metrics = sorted({k for r in epochs for k in r} - {"epoch", "steps", "train_loss", "val_loss"})
    scale = 1 / np.log(2) if bits else 1.0
    step_loss = scale * np.asarray(history["step_loss"], dtype=np.float64)  # (steps,)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    axes = fig.subplots(1, 2 if metrics else 1, squeeze=False, sharex=True)[0]
    steps = np.arange(1, len(step_loss) + 1)
    ends = [r["steps"] for r in epochs]
    marker = "o-" if len(epochs) <= 20 else "-"  # a hundred markers only clutter
    _epoch_lines(axes, ends, [r["epoch"] for r in epochs])
    axes[0].plot(steps, step_loss, color="0.75", linewidth=0.6, label="each step")
    window = max(1, len(step_loss) // 25)
    if window > 1:
        axes[0].plot(steps[window - 1:], running_mean(step_loss, window), color="0.3",
                     linewidth=1.2, label=f"mean of {window} steps")
    for name in ("train_loss", "val_loss"):
        if any(name in r for r in epochs):
            label = (val_label if name == "val_loss" and val_label
                     else f"{_metric_name(name, val_name)} (epoch mean)")
            axes[0].plot(ends, [scale * r.get(name, np.nan) for r in epochs], marker,
                         label=label)
    if final is not None:
        axes[0].plot([len(step_loss)], [final[0]], "*", color="black", markersize=11,
                     label=final[1])
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
                         label=_metric_name(name, val_name))
        axes[1].set(xlabel="step", ylabel=_metrics_label(metrics),
                    title="measured after each epoch")
        axes[1].legend(fontsize="small")
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
    return _save(fig, path)


UPDATE_RATIO_GUIDE = 1e-3  # the update/parameter RMS ratio often quoted as healthy for Adam


def training_health(history, path, figsize=(12, 4), dpi=100):
    """fit's health records (health_every=N) against the step, on log scales. Left: each
    parameter group's gradient norm and the global norm before clipping, red where clipping
    fired. Middle: each group's update RMS / parameter RMS, with 1e-3 dotted for reference.
    Then, where the records have them (fit(..., example_health=True)): the quantiles of the
    per-example gradient norms, the median as a line, 25-75% and 5-95% as bands. Right, only
    when some gradient entry was NaN or infinite: the fraction that was."""
    records = history.get("health") or []
    if not records:
        raise ValueError("training_health: the history has no health records; train with "
                         "fit(..., health_every=N)")
    steps = np.array([r["step"] for r in records])
    nonfinite = np.array([r["nonfinite_fraction"] for r in records])
    examples = all("example_grad_norm" in r for r in records)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    axes = fig.subplots(1, 2 + examples + bool(nonfinite.any()), squeeze=False)[0]
    if examples:
        _draw_example_norms(axes[2], steps, [r["example_grad_norm"] for r in records])
    _draw_groups(axes[0], steps, records, "group_grad_norm")
    norms, clipped = np.array([r["grad_norm"] for r in records]), np.array(
        [r["clipped"] for r in records], bool)
    axes[0].plot(steps, norms, color="black", linewidth=1.5, label="global")
    axes[0].plot(steps[clipped], norms[clipped], "o", color="red", markersize=3,
                 label=f"clipped ({clipped.sum()} of {len(steps)})")
    axes[0].set(title="gradient norm (before clipping)", ylabel="‖g‖")
    _draw_groups(axes[1], steps, records, "update_ratio")
    axes[1].axhline(UPDATE_RATIO_GUIDE, color="0.5", linestyle=":", linewidth=1,
                    label=f"{UPDATE_RATIO_GUIDE:g} (a usual guide)")
    axes[1].set(title="update RMS / parameter RMS", ylabel="ratio")
    if nonfinite.any():
        axes[-1].plot(steps, nonfinite, "o-", color="red")
        axes[-1].set(title="non-finite gradient entries", ylabel="fraction", yscale="log")
    for ax in axes:
        ax.set(xlabel="step")
    handles = axes[0].get_lines() + axes[1].get_lines()[-1:]  # the groups, global, clipped, guide
    fig.legend(handles=handles, loc="outside right upper", fontsize="small")
    return _save(fig, path)


def _draw_example_norms(ax, steps, quantiles):
    """The per-example gradient norms' quantiles ({"q05", "q25", "q50", "q75", "q95"} per
    record): the median, and bands between 25 and 75% and between 5 and 95%."""
    q = {k: np.array([r[k] for r in quantiles]) for k in ("q05", "q25", "q50", "q75", "q95")}
    ax.fill_between(steps, q["q05"], q["q95"], color="0.85", label="examples 5-95%")
    ax.fill_between(steps, q["q25"], q["q75"], color="0.65", label="examples 25-75%")
    ax.plot(steps, q["q50"], color="black", linewidth=1.2, label="examples' median")
    ax.set(title="per-example gradient norm", ylabel="‖g_i‖", yscale="log")
    ax.legend(fontsize="small")


def _draw_groups(ax, steps, records, key):
    """One line per parameter group of records[i][key] ({group: value}), log y, each group
    in its own colour and dash (_group_style)."""
    groups = list(dict.fromkeys(name for r in records for name in r[key]))
    for k, name in enumerate(groups):
        color, dashes = _group_style(k)
        ax.plot(steps, [r[key].get(name, np.nan) for r in records], color=color,
                linestyle=dashes, linewidth=1.1, label=name)
    ax.set_yscale("log")


# Okabe and Ito's colours, told apart with the common colour blindnesses, less their black
# (the global norm's) and their yellow (faint on white); past six groups the dash tells them.
GROUP_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
GROUP_DASHES = ("-", "--", ":", "-.")


def _group_style(k):
    """(colour, line style) of group k: the six colours solid, then dashed, dotted, ..."""
    return (GROUP_COLORS[k % len(GROUP_COLORS)],
            GROUP_DASHES[k // len(GROUP_COLORS) % len(GROUP_DASHES)])


def _two_and_five(value, _):
    """A minor tick label on a log axis: 0.2 and 0.5 (each decade's 2 and 5), the others blank."""
    leading = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def running_mean(values, window):
    """The mean of each `window` consecutive values: (N,) -> (N - window + 1,)."""
    sums = np.cumsum(np.concatenate([[0.0], values]))
    return (sums[window:] - sums[:-window]) / window


def _metric_name(name, val_name):
    """A history's name in words: "val_accuracy" -> "val accuracy" (val_name "test": "test
    accuracy")."""
    if name.startswith("val_"):
        name = f"{val_name}_{name[4:]}"
    return name.replace("_", " ")


def _epoch_lines(axes, ends, numbers, most_labels=10):
    """A light vertical line at the last step of each epoch (of every k-th when there are
    more than most_labels epochs, the last among them), on every panel; the first panel
    names them "epoch k" along its top, k the history's number of the epoch (from 0)."""
    every = max(1, -(-len(ends) // most_labels))
    shown = [(number, end) for k, (number, end) in enumerate(zip(numbers, ends))
             if (k + 1) % every == 0]
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


def drawable(labels):
    """(labels, font families) to draw user text (class names, tokens) with: matplotlib's
    default font, then each installed font that has a character it lacks; a character no
    installed font has (an emoji, where no emoji font is installed) is written as its
    escape, 😀 -> \\U0001f600, rather than as an empty box."""
    default = font_manager.findfont(font_manager.FontProperties())
    fonts, shown = [default], []
    for label in labels:
        characters = []
        for character in str(label):
            font = _font_with(character, default)
            if font is not None and font not in fonts:
                fonts.append(font)
            characters.append(ascii(character)[1:-1] if font is None else character)
        shown.append("".join(characters))
    return shown, [font_manager.FontProperties(fname=font).get_name() for font in fonts]


def _font_with(character, default):
    """The path of a font that draws `character`: the default font if it has it, else the
    first installed outline font that does (not matplotlib's Last Resort, which draws a
    box naming the character's block); None if none has it. (Whitespace and control
    characters count as drawn.)"""
    if not character.isprintable() or character.isspace():
        return default
    for path in [default] + [f.fname for f in font_manager.fontManager.ttflist
                             if not f.name.startswith("Last Resort")]:  # its glyphs: boxes
        if ord(character) in _characters_of(path):
            return path
    return None


@functools.lru_cache(maxsize=None)
def _characters_of(path):
    """The character codes a scalable font file has glyphs for (none for a bitmap font, as
    colour emoji fonts are, which the Agg renderer cannot scale)."""
    try:
        font = FT2Font(path)
    except (OSError, RuntimeError):
        return frozenset()
    return frozenset(font.get_charmap()) if font.scalable else frozenset()


def _drawable_pair(first, second):
    """drawable of two lists of labels at once: -> ((first', second'), families)."""
    shown, families = drawable([*first, *second])
    return (shown[:len(first)], shown[len(first):]), families


def _set_font(texts, families):
    """Each matplotlib Text in `texts` drawn with the font families `drawable` gave."""
    for text in texts:
        text.set_fontfamily(families)


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
    names, families = drawable(_class_names(class_names, n))
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
    _set_font(ax.get_xticklabels() + ax.get_yticklabels(), families)
    if max(map(len, names)) > 6:  # side by side they would run into each other
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
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
    names, families = drawable(_class_names(class_names, n))
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    for k, ax in enumerate(fig.subplots(1, n, sharey=True, squeeze=False)[0]):
        rows = probabilities[true_labels == k]  # (N_k, C)
        ax.bar(range(n), rows.mean(axis=0) if len(rows) else np.zeros(n))
        ax.set(xticks=range(n), xticklabels=names, ylim=(0, 1), xlabel="predicted class",
               title=f"true {names[k]} (n={len(rows)})")
        _set_font([ax.title, *ax.get_xticklabels()], families)
    fig.axes[0].set_ylabel("mean predicted probability")
    fig.suptitle("what the model predicts for the samples of each true class")
    return _save(fig, path)


def transformer_cross_attention(p, src, tgt, src_pad=None, layer=-1):
    """The attention weights over the source of decoder block `layer` (negative counts from
    the last) of an encoder-decoder, read from transformer.apply (ag.viz.capture), without
    dropout: row t is the attention of the position fed tgt[:, t], the one that predicts the
    token after it.  src (B, S), tgt (B, T) (BOS first, as in transformer.apply) -> (B, H, T, S)"""
    if not -len(p.decoder) <= layer < len(p.decoder):
        raise ValueError(f"transformer_cross_attention: layer {layer} of a transformer with "
                         f"{len(p.decoder)} decoder blocks")
    return ag.viz.capture(transformer.apply, p, src, tgt, src_pad, op="softmax",
                          scope="cross_attention")[layer]


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
    (keys, queries), families = _drawable_pair(key_tokens, query_tokens)
    ax.set_xticklabels(keys, rotation=90)
    ax.set_yticklabels(queries)
    _set_font(ax.get_xticklabels() + ax.get_yticklabels(), families)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight (each row sums to 1)")
    return _save(fig, path)
