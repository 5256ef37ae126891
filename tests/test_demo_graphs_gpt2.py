"""demos.graphs --gpt2: GPT-2's picture at depth 1 shows the first block open (its two
sublayers and norms, the residual sums) and every other block as one box; the pictures of a
model read from GPT-2's files (a tiny one, written by transformers) and of GPT-2's random
init without files; and the explorer, written beside them, has a view for every block."""
import contextlib
import io
import re
import xml.etree.ElementTree as ElementTree

import numpy as np

import autograd_lite as ag
from conftest import missing
from demos import graphs
from helpers.gpt2_files import write_bpe_files, write_tiny_gpt2
from models import gpt2

SVG = "{http://www.w3.org/2000/svg}"


def texts(path):
    return [t.text for t in ElementTree.parse(path).iter(f"{SVG}text") if t.text]


def test_the_first_block_is_open_and_the_others_folded_with_the_files_weights(
        tmp_path, dot):
    try:
        import torch
        import transformers
    except ImportError:
        missing("TRANSFORMERS", "transformers (and torch) are not installed")
    transformers.logging.set_verbosity_error()
    files = tmp_path / "files"
    files.mkdir()
    write_tiny_gpt2(files, transformers, torch, write_bpe_files(files, "a tiny text " * 9, 5))
    out = tmp_path / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        graphs.main(["--gpt2", str(files), "--out", str(out)])
    lines = printed.getvalue().splitlines()
    assert re.fullmatch(r"wrote \d+ pictures \(svg, png\) and 2 explorers of 2 models in .+",
                        lines[-1]), lines
    folded = texts(out / "gpt2-depth1.svg")
    assert folded.count("decoder_only_block") == 1  # 2 layers: the second folded, one box
    assert {"multihead_attention", "feed_forward", "layer_norm #1", "layer_norm #2"} <= set(folded)
    assert "split_heads" not in folded  # inside the open block's attention, a box at depth 1
    assert {"split_heads #3", "gelu"} <= set(texts(out / "gpt2-depth2.svg"))
    assert "gelu" in texts(out / "gpt2_block-all.svg")
    page = (out / "gpt2-explorer.html").read_text()
    assert "decoder_only_block" in page and "multihead_attention" in page


def test_without_files_the_pictures_are_of_gpt2_smalls_random_init(monkeypatch):
    """gpt2_pictures(None) draws GPT-2 small: its init called with the default Config (a
    smaller one here, the call checked)."""
    configs, real_init = [], gpt2.init

    def tiny_init(rng, config=gpt2.Config()):
        configs.append(config)
        return real_init(rng, config._replace(n_layer=3, n_embd=16, n_head=2,
                                              n_positions=16, vocab_size=40))
    monkeypatch.setattr(graphs.gpt2, "init", tiny_init)
    whole, block = graphs.gpt2_pictures("", np.random.default_rng(0))
    assert configs == [gpt2.Config()] and configs[0].n_layer == 12
    boxes = [scope.name for scope in ag.viz.trace(whole.function, *whole.args).view(1).boxes]
    assert boxes.count("decoder_only_block") == 2 and "multihead_attention" in boxes
