"""models.summary: per-layer rows and the total line, checked by hand arithmetic."""
import numpy as np
import pytest

import autograd_lite as ag
import models
from models import classifier, lm
from helpers.tiny_models import tiny_classifier, tiny_lm, tiny_transformer


def test_one_row_per_layer_with_shapes_and_counts_and_the_total():
    lines = models.summary(classifier.init(np.random.default_rng(0), 7455, 5)).splitlines()
    assert lines[0] == "Classifier"
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert list(rows) == ["embed", "encoder[0].self_attn.wq", "encoder[0].self_attn.wk",
                          "encoder[0].self_attn.wv", "encoder[0].self_attn.wo", "encoder[0].norm1",
                          "encoder[0].ff.linear1", "encoder[0].ff.linear2", "encoder[0].norm2",
                          "agg", "head"]
    assert "table (7455, 32)" in rows["embed"] and rows["embed"].endswith(" 238,560")
    assert "w (32, 32), b (32,)" in rows["encoder[0].self_attn.wq"]
    assert rows["encoder[0].self_attn.wq"].endswith(" 1,056")  # 32·32 + 32
    assert rows["encoder[0].ff.linear1"].endswith(" 4,224")  # 32·128 + 128
    assert rows["encoder[0].norm2"].endswith(" 64")
    assert "w (50, 5), b (5,)" in rows["head"] and rows["head"].endswith(" 255")
    counts = [int(line.split()[-1].replace(",", "")) for line in lines[1:-1]]
    assert sum(counts) == 251_552  # the seed's size (test_classifier.py counts it by layer)
    assert lines[-1] == "Total: 21 arrays, 251,552 parameters, 0.960 MiB"  # float32: 4 B each


def test_hyperparameters_are_left_out_and_float64_counts_8_bytes():
    p = lm.init(np.random.default_rng(0), vocab_size=10, d_model=4, n_heads=2, d_ff=8,
                n_layers=2, max_len=6, dtype=np.float64)
    text = models.summary(p)
    # rows: embed; per block q, k, v, o, norm1, linear1, linear2, norm2; final norm; head
    layers = 1 + 2 * 8 + 1 + 1
    arrays = 1 + 2 * (4 * 2 + 2 * 2 + 2 * 2) + 2 + 2  # each dense and norm holds 2 arrays
    n = 10 * 4 + 2 * (4 * (16 + 4) + 2 * 8 + (4 * 8 + 8) + (8 * 4 + 4)) + 8 + (4 * 10 + 10)
    assert len(text.splitlines()) == 1 + layers + 1
    assert "max_len" not in text and "n_heads" not in text and "dropout" not in text
    mib = n * 8 / 2 ** 20
    assert text.splitlines()[-1] == f"Total: {arrays} arrays, {n:,} parameters, {mib:.3f} MiB"


def test_models_summary_is_the_function_whichever_import_came_first():
    import models.summary  # the submodule import must not shadow the function
    assert callable(models.summary)
    assert models.summary({"w": np.zeros((2, 3))}).splitlines() == [
        "dict", "  (root)  ['w'] (2, 3)  6", "Total: 1 arrays, 6 parameters, 0.000 MiB"]


def test_the_package_lists_no_missing_submodule():
    """`summary` is a function; a name with no module behind it is an AttributeError
    (hasattr is False), not a ModuleNotFoundError from the lazy loader."""
    assert callable(models.summary)
    assert not hasattr(models, "summary_table")
    for name in ("transformer", "decoding", "classifier", "lm", "layers", "attention", "blocks"):
        assert getattr(models, name).__name__ == f"models.{name}"


def total_parameters(text):
    """The <n> of the summary's last line, 'Total: <arrays> arrays, <n> parameters, ...'."""
    return int(text.splitlines()[-1].split()[3].replace(",", ""))


THREE_MODELS = {"transformer": tiny_transformer, "classifier": tiny_classifier, "lm": tiny_lm}


@pytest.mark.parametrize("name", THREE_MODELS)
def test_the_summary_counts_exactly_what_adam_keeps_moments_for(name):
    """The count is the optimizer's own: the elements of Adam's first-moment state."""
    p = THREE_MODELS[name](dropout=0.1)
    state = ag.optim.adam().init(p)
    moments = sum(np.size(m) for m in ag.tree_leaves(state.m) if m is not None)
    arrays = sum(m is not None for m in ag.tree_leaves(state.m))
    text = models.summary(p)
    assert total_parameters(text) == moments > 0
    assert text.splitlines()[-1].startswith(f"Total: {arrays} arrays, ")


def test_float_scalars_count_and_settings_do_not():
    """An exact float and a numpy float scalar are parameters (the optimizer moves them);
    an ag.Hyper, an int and an integer array are not."""
    tree = {"w": np.zeros((2, 3), np.float32), "gain": 1.5, "bias": np.float32(0.0),
            "rate": ag.Hyper(0.1), "n_heads": 4, "ids": np.arange(5)}
    assert models.summary(tree).splitlines() == [
        "dict", "  (root)  ['w'] (2, 3), ['gain'] (), ['bias'] ()  8",
        f"Total: 3 arrays, 8 parameters, {(6 * 4 + 8 + 4) / 2**20:.3f} MiB"]
    opt = ag.optim.sgd(lr=0.5)
    ones = {k: np.ones_like(x) for k, x in tree.items()}  # a gradient offered for every leaf
    moved, _ = opt.update(tree, ones, opt.init(tree))
    assert [k for k in tree if not np.array_equal(moved[k], tree[k])] == ["w", "gain", "bias"]


def test_the_base_model_sharing_all_three_matrices_has_table_3s_size():
    """§3.4's sharing at a shared 37,000-token vocabulary: 63,121,544 parameters (the paper:
    65M). By hand: the table 37,000·512, out.b 37,000, six encoder blocks of 4·(512² + 512)
    + (512·2048 + 2048) + (2048·512 + 512) + 2·1,024, six decoder blocks with a second
    attention and a third norm, and the two final norms."""
    from models import transformer
    p = transformer.init(np.random.default_rng(0), 37000, 37000, **transformer.BASE,
                         share_embeddings="all")
    attention, ff, norm = 4 * (512 * 512 + 512), 512 * 2048 + 2048 + 2048 * 512 + 512, 1024
    by_hand = (37000 * 512 + 37000 + 6 * (attention + ff + 2 * norm)
               + 6 * (2 * attention + ff + 3 * norm) + 2 * norm)
    assert total_parameters(models.summary(p)) == by_hand == 63_121_544
    rows = [line.split()[0] for line in models.summary(p).splitlines()[1:-1]]
    assert "src_embed" not in rows and rows.count("tgt_embed") == 1
