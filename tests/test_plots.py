"""plots: every picture is a PNG of figsize × dpi pixels that matplotlib reads back, not blank;
the numbers drawn are checked against hand counts, numpy means and torch."""
import warnings

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import matplotlib.image  # noqa: E402

import autograd_lite as ag  # noqa: E402
from models import classifier, plots  # noqa: E402
from helpers.tiny_models import tiny_classifier, tiny_transformer  # noqa: E402

HISTORY = {"epochs": [{"epoch": 0, "steps": 3, "train_loss": 1.0, "val_loss": 1.2,
                       "accuracy": 0.5},
                      {"epoch": 1, "steps": 6, "train_loss": 0.6, "val_loss": 0.9,
                       "accuracy": 0.7}],
           "step_loss": [1.3, 1.0, 0.8, 0.7, 0.6, 0.5]}


def draw(name, path, **size):
    """Call plot function `name` on small inputs, writing `path`."""
    rng = np.random.default_rng(1)
    if name == "training_curves":
        return plots.training_curves(HISTORY, path, **size)
    if name == "confusion_matrix":
        return plots.confusion_matrix(rng.integers(0, 4, 50), rng.integers(0, 4, 50), path, **size)
    if name == "probabilities_by_class":
        return plots.probabilities_by_class(rng.dirichlet(np.ones(3), 40), rng.integers(0, 3, 40),
                                            path, **size)
    weights = ag.viz.capture(classifier.apply, tiny_classifier(),
                             np.array([[3, 4, 5, 6, 0, 0]]), op="softmax")[0]  # (1, H, T, T)
    return plots.attention(weights[0, 1], path, ["a", "b", "c", "d", "pad", "pad"], **size)


NAMES = ["training_curves", "confusion_matrix", "probabilities_by_class", "attention"]


@pytest.mark.parametrize("name", NAMES)
def test_each_plot_writes_a_png_of_figsize_times_dpi_pixels(tmp_path, name):
    path = tmp_path / f"{name}.png"
    draw(name, path, figsize=(4, 3), dpi=50)
    assert path.stat().st_size > 0
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (3 * 50, 4 * 50)
    assert pixels.var() > 0


def test_training_curves_draw_every_step_and_each_epoch_at_its_last_step(tmp_path):
    loss_axes, metric_axes = plots.training_curves(HISTORY, tmp_path / "c.png").axes[:2]
    lines = {line.get_label(): line for line in loss_axes.get_lines()}
    np.testing.assert_array_equal(lines["each step"].get_xdata(), [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(lines["each step"].get_ydata(), HISTORY["step_loss"])
    np.testing.assert_array_equal(lines["val loss (epoch mean)"].get_xdata(), [3, 6])
    np.testing.assert_array_equal(lines["val loss (epoch mean)"].get_ydata(), [1.2, 0.9])
    (accuracy,) = [line for line in metric_axes.get_lines() if line.get_label() == "accuracy"]
    # the metrics too at the step where their epoch ended: one x-axis for both panels
    np.testing.assert_array_equal(accuracy.get_xdata(), [3, 6])
    np.testing.assert_array_equal(accuracy.get_ydata(), [0.5, 0.7])


def test_training_curves_read_at_a_glance(tmp_path):
    """Steps on both x-axes, units and titles on both panels, a running mean over the steps,
    epochs as labelled vertical lines, no markers past 20 epochs."""
    fig = plots.training_curves(HISTORY, tmp_path / "c.png")
    loss_axes, metric_axes = fig.axes[:2]
    assert [(ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) for ax in (loss_axes, metric_axes)] \
        == [("step", "cross-entropy (nats)", "training loss"),
            ("step", "accuracy", "measured after each epoch")]
    for ax in (loss_axes, metric_axes):  # a light vertical line at the end of each epoch
        assert [line.get_xdata()[0] for line in ax.get_lines()
                if line.get_label().startswith("_")] == [3, 6]
    # numbered as the history (and fit's progress bars, and a Ctrl-C's line) number them
    assert [t.get_text() for t in loss_axes.texts] == ["epoch 0", "epoch 1"]
    # 100 epochs of 10 steps: a running mean of 40 steps (numpy's convolution the reference),
    # lines without markers, and at most 10 epoch lines (every tenth)
    rng = np.random.default_rng(0)
    step_loss = np.exp(-np.arange(1000) / 150) + 1e-3 * rng.random(1000)
    history = {"epochs": [{"epoch": e, "steps": 10 * (e + 1), "train_loss": step_loss[10 * e],
                           "val_accuracy": 0.5, "train_accuracy": 0.6} for e in range(100)],
               "step_loss": step_loss.tolist()}
    loss_axes, metric_axes = plots.training_curves(history, tmp_path / "d.png").axes[:2]
    lines = {line.get_label(): line for line in loss_axes.get_lines()}
    np.testing.assert_allclose(lines["mean of 40 steps"].get_ydata(),
                               np.convolve(step_loss, np.ones(40) / 40, mode="valid"),
                               rtol=1e-9)  # a difference of running sums: ~1e-12 off
    np.testing.assert_array_equal(lines["mean of 40 steps"].get_xdata(), np.arange(40, 1001))
    assert lines["train loss (epoch mean)"].get_marker() == "None"
    assert [t.get_text() for t in loss_axes.texts] == [f"epoch {k}" for k in range(9, 100, 10)]
    # spanning three decades, the loss is drawn on a log scale without being asked
    assert loss_axes.get_yscale() == "log" and metric_axes.get_ylabel() == "accuracy"
    assert metric_axes.get_yscale() == "linear"


def test_training_curves_in_bits_per_character(tmp_path):
    """generate reports bits per character: its curves show bits, loss / ln 2."""
    loss_axes = plots.training_curves(HISTORY, tmp_path / "c.png", bits=True,
                                      per="character").axes[0]
    assert loss_axes.get_ylabel() == "cross-entropy (bits per character)"
    lines = {line.get_label(): line for line in loss_axes.get_lines()}
    np.testing.assert_allclose(lines["each step"].get_ydata(),
                               np.array(HISTORY["step_loss"]) / 0.6931471805599453, rtol=1e-12)
    np.testing.assert_allclose(lines["train loss (epoch mean)"].get_ydata(),
                               np.array([1.0, 0.6]) / 0.6931471805599453, rtol=1e-12)


def test_training_curves_on_a_log_scale_keep_the_data_and_count_whole_epochs(tmp_path):
    fig = plots.training_curves(HISTORY, tmp_path / "c.png", log_loss=True)
    loss_axes, metric_axes = fig.axes[:2]
    assert loss_axes.get_yscale() == "log" and metric_axes.get_yscale() == "linear"
    step = next(line for line in loss_axes.get_lines() if line.get_label() == "each step")
    np.testing.assert_array_equal(step.get_ydata(), HISTORY["step_loss"])
    assert all(tick == int(tick) for tick in metric_axes.get_xticks())
    # within a decade (1.3 to 0.5), linear unless asked
    assert plots.training_curves(HISTORY, tmp_path / "d.png").axes[0].get_yscale() == "linear"


def test_confusion_counts_by_hand_and_written_in_the_cells(tmp_path):
    true, predicted = [0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 0, 2]
    expected = np.array([[1, 1, 0],
                         [0, 1, 0],
                         [1, 0, 2]])
    np.testing.assert_array_equal(plots.confusion_counts(true, predicted, 3), expected)
    fig = plots.confusion_matrix(np.array(true), np.array(predicted), tmp_path / "m.png",
                                 class_names=["neg", "neutral", "pos"])
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in fig.axes[0].texts}
    # each cell: its count and its share of the true class (the row), by hand
    shares = [["50%", "50%", "0%"], ["0%", "100%", "0%"], ["33%", "0%", "67%"]]
    assert cells == {(i, j): f"{expected[i, j]}\n{shares[i][j]}" for i in range(3)
                     for j in range(3)}
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["neg", "neutral", "pos"]
    assert fig.axes[0].get_title() == ("confusion matrix, 6 samples\neach cell: count and % of "
                                       "its true class")
    assert fig.axes[1].get_ylabel() == "% of the true class"  # the colour bar
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(),
                               [[50, 50, 0], [0, 100, 0], [100 / 3, 0, 200 / 3]], rtol=1e-12)


def test_probabilities_by_class_draws_the_mean_probability_per_true_class(tmp_path):
    rng = np.random.default_rng(2)
    probabilities, labels = rng.dirichlet(np.ones(4), 30), rng.integers(0, 4, 30)
    labels[labels == 3] = 0  # no sample of class 3: its panel is empty, with zero bars
    fig = plots.probabilities_by_class(probabilities, labels, tmp_path / "p.png")
    for k, ax in enumerate(fig.axes):
        rows = [p for p, label in zip(probabilities, labels) if label == k]
        expected = [sum(p[c] for p in rows) / len(rows) if rows else 0.0 for c in range(4)]
        np.testing.assert_allclose([bar.get_height() for bar in ax.patches], expected, rtol=1e-12)
        assert ax.get_title() == f"true {k} (n={len(rows)})"
    assert fig.axes[0].get_ylabel() == "mean predicted probability"
    assert fig.get_suptitle() == "what the model predicts for the samples of each true class"


def test_bad_inputs_are_named(tmp_path):
    path = tmp_path / "x.png"
    with pytest.raises(ValueError, match=r"confusion_matrix: predicted_labels must be integer "
                                         r"labels 0\.\.2 \(N,\), got int64 \(2,\)"):
        plots.confusion_matrix(np.array([0, 1]), np.array([0, 3]), path, class_names="abc")
    with pytest.raises(ValueError, match=r"true_labels \(2,\) and predicted_labels \(3,\) differ"):
        plots.confusion_counts([0, 1], [0, 1, 1], 2)
    with pytest.raises(ValueError, match=r"plots: 2 class names for 3 classes"):
        plots.probabilities_by_class(np.full((2, 3), 1 / 3), np.array([0, 1]), path,
                                     class_names=["a", "b"])
    with pytest.raises(ValueError, match=r"probabilities \(N, C\) and true_labels \(N,\) expected, "
                                         r"got \(2, 3\) and \(3,\)"):
        plots.probabilities_by_class(np.full((2, 3), 1 / 3), np.array([0, 1, 2]), path)
    with pytest.raises(ValueError, match=r"attention: weights \(2, 3\) for 2 query and 2 key "
                                         r"tokens"):
        plots.attention(np.zeros((2, 3)), path, ["a", "b"])
    with pytest.raises(ValueError, match=r"transformer_cross_attention: layer -3 of a "
                                         r"transformer with 2 decoder blocks"):
        plots.transformer_cross_attention(tiny_transformer(), np.ones((1, 3), dtype=int),
                                          np.ones((1, 2), dtype=int), layer=-3)


def torch_cross_attention(torch, p, src, tgt, src_pad, layer):
    """torch's weights (B, H, T, S): the inputs that nn.Transformer's decoder layer `layer`
    gives its multihead_attn, caught by a hook, passed to that module again with
    need_weights=True."""
    from models import torch_bridge
    module = torch_bridge.torch_module_for(p).eval()
    attention = module.transformer.decoder.layers[layer].multihead_attn
    seen = {}
    attention.register_forward_pre_hook(lambda m, args, kwargs: seen.update(args=args,
                                                                            kwargs=kwargs),
                                        with_kwargs=True)
    with torch.no_grad():
        module(torch.from_numpy(src), torch.from_numpy(tgt), src_pad)
        query, key, value = seen["args"]
        _, weights = attention(query, key, value,
                               key_padding_mask=seen["kwargs"]["key_padding_mask"],
                               need_weights=True, average_attn_weights=False)
    return weights.numpy()


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("layer", [0, -1])
def test_transformer_cross_attention_equals_torchs_weights_with_padding(torch, norm, layer):
    p = tiny_transformer(src_vocab=9, tgt_vocab=7, norm=norm)
    src = np.array([[3, 4, 5, 6, 7], [8, 3, 0, 0, 0]])
    tgt = np.array([[1, 3, 4, 5], [1, 6, 2, 2]])
    weights = plots.transformer_cross_attention(p, src, tgt, src_pad=0, layer=layer)
    assert weights.shape == (2, 2, 4, 5)  # (B, H, T, S)
    want = torch_cross_attention(torch, p, src, tgt, 0, layer)
    np.testing.assert_allclose(weights, want, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(weights[1, :, :, 2:], 0.0)  # padding gets no attention


def test_transformer_cross_attention_layers_differ_and_count_from_either_end():
    p = tiny_transformer(norm="pre")
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 3, 4]])
    first, last = (plots.transformer_cross_attention(p, src, tgt, layer=k) for k in (0, 1))
    np.testing.assert_array_equal(last, plots.transformer_cross_attention(p, src, tgt))
    np.testing.assert_array_equal(first, plots.transformer_cross_attention(p, src, tgt, layer=-2))
    assert not np.allclose(first, last)


def test_attention_heatmap_labels_its_axes_and_draws_the_weights(tmp_path):
    weights = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
    fig = plots.attention(weights, tmp_path / "a.png", ["one", "<eos>"], ["1", "0", "7"],
                          xlabel="digit read", ylabel="word written", title="107")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("digit read", "word written",
                                                                  "107")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "0", "7"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["one", "<eos>"]
    np.testing.assert_array_equal(ax.images[0].get_array(), weights)
    assert fig.axes[1].get_ylabel() == "attention weight (each row sums to 1)"  # the colour bar


HEALTH = {"health": [{"step": s, "grad_norm": g, "clipped": g > 1.0, "nonfinite_fraction": 0.0,
                      "group_grad_norm": {"embed": g / 2, "head": g / 3},
                      "update_ratio": {"embed": 1e-2 / s, "head": 2e-3}}
                     for s, g in ((1, 3.0), (11, 0.8), (21, 1.5), (31, 0.5))]}


def test_training_health_draws_each_group_the_global_norm_and_the_clipped_steps(tmp_path):
    fig = plots.training_health(HEALTH, tmp_path / "h.png", figsize=(8, 3), dpi=50)
    assert matplotlib.image.imread(tmp_path / "h.png").shape[:2] == (150, 400)
    norms, ratios = fig.axes[:2]
    assert len(fig.axes) == 2  # no third panel: every entry was finite
    assert norms.get_yscale() == ratios.get_yscale() == "log"
    lines = {line.get_label(): line for line in norms.get_lines()}
    np.testing.assert_array_equal(lines["global"].get_xdata(), [1, 11, 21, 31])
    np.testing.assert_array_equal(lines["global"].get_ydata(), [3.0, 0.8, 1.5, 0.5])
    np.testing.assert_array_equal(lines["head"].get_ydata(), [1.0, 0.8 / 3, 0.5, 0.5 / 3])
    np.testing.assert_array_equal(lines["clipped (2 of 4)"].get_xdata(), [1, 21])
    embed = next(line for line in ratios.get_lines() if line.get_label() == "embed")
    np.testing.assert_allclose(embed.get_ydata(), [1e-2, 1e-2 / 11, 1e-2 / 21, 1e-2 / 31])


def test_training_health_adds_the_non_finite_fraction_and_refuses_a_history_without_it(
        tmp_path):
    records = [dict(r, nonfinite_fraction=f) for r, f in zip(HEALTH["health"], (0, 0, 0, 0.25))]
    fig = plots.training_health({"health": records}, tmp_path / "h.png")
    assert len(fig.axes) == 3 and fig.axes[2].get_lines()[0].get_ydata()[-1] == 0.25
    with pytest.raises(ValueError, match=r"^training_health: the history has no health "
                                         r"records; train with fit\(..., health_every=N\)$"):
        plots.training_health({"epochs": [], "step_loss": []}, tmp_path / "x.png")


def test_training_health_draws_the_per_example_norms_quantiles(tmp_path):
    quantiles = [dict(q05=0.1 * s, q25=0.2 * s, q50=0.3 * s, q75=0.4 * s, q95=0.5 * s)
                 for s in (1, 2, 3, 4)]
    records = [dict(r, example_grad_norm=q) for r, q in zip(HEALTH["health"], quantiles)]
    fig = plots.training_health({"health": records}, tmp_path / "h.png")
    assert len(fig.axes) == 3
    examples = fig.axes[2]
    median = next(line for line in examples.get_lines() if line.get_label() == "examples' median")
    np.testing.assert_allclose(median.get_ydata(), [0.3, 0.6, 0.9, 1.2])
    bands = [c for c in examples.collections if c.get_label() == "examples 5-95%"]
    low, high = bands[0].get_paths()[0].vertices[:, 1].min(), \
        bands[0].get_paths()[0].vertices[:, 1].max()
    assert (low, high) == pytest.approx((0.1, 2.0))


@pytest.mark.parametrize("draw", ["confusion_matrix", "probabilities_by_class", "attention"])
def test_labels_no_installed_font_has_are_escaped_and_no_glyph_is_missing(draw, tmp_path):
    """Class names and tokens are the user's text: a character the fonts lack would be drawn
    as an empty box (matplotlib warns "Glyph ... missing from font(s)", an error here); it is
    written as its escape instead, and one another installed font has is drawn in that font."""
    names = ["👍 good", "⭐⭐⭐", "中文", "naïve"]
    shown, families = plots.drawable(names)
    assert families[0] == "DejaVu Sans"
    for name, label in zip(names, shown):
        for character in name:
            if character not in label:  # escaped: no installed font draws it
                assert ascii(character)[1:-1] in label
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if draw == "confusion_matrix":
            fig = plots.confusion_matrix([0, 1, 2, 3], [0, 1, 3, 3], tmp_path / "m.png",
                                         class_names=names)
            labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        elif draw == "probabilities_by_class":
            fig = plots.probabilities_by_class(np.full((4, 4), 0.25), np.arange(4),
                                               tmp_path / "p.png", class_names=names)
            labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        else:
            fig = plots.attention(np.full((4, 4), 0.25), tmp_path / "a.png", names)
            labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == shown


def test_without_other_fonts_only_the_default_fonts_characters_are_kept(monkeypatch):
    """With matplotlib's default font alone: a character is kept exactly when that font's own
    character map (read with FreeType) has it."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [])
    plots._characters_of.cache_clear()
    characters = "a😀👍⭐中é✓"
    charmap = FT2Font(font_manager.findfont(font_manager.FontProperties())).get_charmap()
    shown, families = plots.drawable(list(characters))
    assert families == ["DejaVu Sans"]
    assert shown == [c if ord(c) in charmap else ascii(c)[1:-1] for c in characters]
    plots._characters_of.cache_clear()


def test_training_curves_say_how_the_validation_loss_is_measured_and_star_the_reported_one(
        tmp_path):
    """A curve and the run's reported figure measured differently (the LM's validation
    windows, its whole held-out text): the legend says how each is measured and the reported
    figure is a star at the last step, in the panel's unit (bits, not scaled again)."""
    fig = plots.training_curves(HISTORY, tmp_path / "c.png", bits=True, per="character",
                                val_label="val loss: random windows", final=(0.25, "reported"))
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    np.testing.assert_allclose(lines["val loss: random windows"].get_ydata(),
                               [r["val_loss"] / np.log(2) for r in HISTORY["epochs"]])
    star = lines["reported"]
    assert (list(star.get_xdata()), list(star.get_ydata()), star.get_marker()) == \
        ([len(HISTORY["step_loss"])], [0.25], "*")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-2:] == \
        ["val loss: random windows", "reported"]


def test_training_curves_call_the_validation_batches_by_the_name_given(tmp_path):
    """classify validates on its test set: its curves say "test", in the loss panel and the
    metrics panel alike; the default stays "val"."""
    history = dict(HISTORY, epochs=[dict(r, val_accuracy=0.5) for r in HISTORY["epochs"]])
    fig = plots.training_curves(history, tmp_path / "c.png", val_name="test")
    labels = [line.get_label() for ax in fig.axes[:2] for line in ax.get_lines()
              if not line.get_label().startswith("_")]
    assert {"test loss (epoch mean)", "test accuracy"} <= set(labels), labels
    assert not [label for label in labels if "val" in label], labels
    default = plots.training_curves(HISTORY, tmp_path / "d.png")
    assert "val loss (epoch mean)" in [line.get_label() for line in default.axes[0].get_lines()]
