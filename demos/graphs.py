"""python -m demos.graphs: pictures of the models' computation graphs, drawn by ag.viz.

    python -m demos.graphs                    # the paper's sizes
    python -m demos.graphs --quick            # tiny models (CI)
    python -m demos.graphs --readme-picture docs/encoder_block.svg    # the README's picture
    python -m demos.graphs --readme-screenshot docs/explorer.png      # and its screenshot
    python -m demos.graphs --gpt2 [DIR]       # GPT-2 alone: DIR's weights, or random ones

Each picture is one recorded call of a model's loss (or, for the attention block, of the
block), drawn forward and backward (what the pullbacks keep, and the gradient edges), as
SVG and PNG in --out (default runs/graphs-<timestamp>/):

    logistic_regression   the loss of demos.logistic_regression, every op
    encoder_block         one attention block: self-attention and the feed-forward network,
                          residuals and layer norms (the paper's base sizes), every op and
                          at depth 2 (each dense, split_heads, ... one box)
    classifier            the review classifier's loss (the Julia posts' model), at depth 3
                          and every op
    transformer           the encoder-decoder's loss (the paper's base model, 6 + 6 blocks),
                          at depth 3 (each block one box) and depth 4 (inside each block)

--gpt2 draws GPT-2 instead (124M's sizes, or those of DIR's config.json; GPT-2's random
init where no DIR is given, the weights of DIR's model.safetensors where one is): its loss
on 8 tokens at depth 1, the first block open (its sublayers, norms and residual sums) and
the others folded, one box each, and at depth 2 (inside the sublayers); one block alone at
depth 2 and every op; its explorer opens any block.

The files are named <model>-<depth>[-backward].<svg|png>, the depth "all" for every op. A
PNG is left out where it would pass MAX_PNG_SIDE pixels a side (the base Transformer at
depth 4), and the demo says so: its SVG holds the picture whole.
Each model also gets an explorer, <model>-explorer.html (ag.viz.explore: a page to walk
through its calls, search, and read each value's statistics, gradient norms and what the
backward pass keeps); the demo prints their paths. Drawing needs Graphviz's `dot`; without
it the demo writes each picture's DOT text (<name>.dot), says how to install Graphviz,
writes no explorer, and still ends normally (--readme-picture and --readme-screenshot, which
need it, are refused before anything is drawn, as is a path whose suffix is not what is
written). A file that cannot be written (a full disk) ends the demo with one line naming it.
"""
if __name__ == "__main__":  # a program's choice, made before numpy loads BLAS; never on import
    from .support import program
    program.start("graphs")

import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
from typing import Any, NamedTuple  # noqa: E402

import numpy as np  # noqa: E402

import autograd_lite as ag  # noqa: E402
from models import blocks, classifier, gpt2, lm, transformer  # noqa: E402
from models.attention import causal_mask, multihead_attention  # noqa: E402
from models.layers import activation_of, feed_forward  # noqa: E402

from .support import browser, common, program  # noqa: E402
from . import logistic_regression as logistic  # noqa: E402
from .support import number_words as nw  # noqa: E402

# The paper's base model (Table 3), the review classifier of the posts, and tiny ones.
FULL = dict(d_model=512, heads=8, d_ff=2048, layers=6, vocab=7455, review_len=50)
QUICK = dict(d_model=16, heads=2, d_ff=32, layers=2, vocab=50, review_len=8)
README_DEPTH = 2  # the README's picture: one encoder block at this depth
# A PNG taller or wider than this is a strip no viewer shows readably (the base Transformer
# at depth 4 would be 1,758 x 9,155 px): it is left out, and its SVG zooms in a browser.
MAX_PNG_SIDE = 4000


class Picture(NamedTuple):
    """A call to record and the depths to draw it at (None: every op)."""
    name: str
    function: Any
    args: tuple
    depths: tuple


def classifier_loss(p, ids, labels):
    """Cross-entropy of the review classifier's logits.  ids (B, T), labels (B,)"""
    return ag.cross_entropy(classifier.apply(p, ids), labels)


def translation_loss(p, src, tgt):
    """Cross-entropy of each next word under teacher forcing.  src (B, S), tgt (B, T)"""
    logits = transformer.apply(p, src, tgt[:, :-1], src_pad=nw.PAD)  # (B, T - 1, V)
    return ag.cross_entropy(logits, tgt[:, 1:], ignore_index=nw.PAD)


def encoder_block_picture(rng, sizes):
    """One post-LN encoder block on a batch of two 10-token sequences."""
    p = blocks.encoder_block_init(rng, sizes["d_model"], sizes["heads"], sizes["d_ff"])
    x = rng.standard_normal((2, 10, sizes["d_model"])).astype(np.float32)  # (B, T, D)
    mask = np.ones((2, 1, 1, 10), dtype=bool)  # (B, 1, 1, T): every key may be attended
    return Picture("encoder_block", blocks.encoder_block, (p, x, mask, "post"),
                   (None, README_DEPTH))


def pictures(sizes, rng):
    """The four models' Pictures, at `sizes` (FULL or QUICK)."""
    x, y = logistic.points(rng, 8)
    review = classifier.init(rng, sizes["vocab"], 5, d_model=min(32, sizes["d_model"]),
                             n_heads=min(4, sizes["heads"]), d_ff=min(128, sizes["d_ff"]),
                             max_len=sizes["review_len"], dropout=0.0)
    translator = transformer.init(rng, len(nw.SOURCE_VOCAB), len(nw.TARGET_VOCAB),
                                  d_model=sizes["d_model"], n_heads=sizes["heads"],
                                  d_ff=sizes["d_ff"], n_encoder=sizes["layers"],
                                  n_decoder=sizes["layers"], max_len=nw.MAX_WORDS + 2,
                                  dropout=0.0)
    values = np.array([4721, 12_000_005])
    return [
        Picture("logistic_regression", logistic.loss,
                (logistic.Logistic(np.zeros(2), np.zeros(())), x, y), (None,)),
        encoder_block_picture(rng, sizes),
        Picture("classifier", classifier_loss,
                (review, rng.integers(0, sizes["vocab"], (2, sizes["review_len"])),
                 np.array([1, 4])), (3, None)),
        Picture("transformer", translation_loss,
                (translator, nw.encode_sources(values), nw.encode_targets(values)), (3, 4)),
    ]


GPT2_TOKENS = 8  # the length of the sequence GPT-2's pictures record


@ag.viz.transparent
def block_drawn_open(p, x, causal):
    """blocks.decoder_only_block's two sublayers, called from here (a transparent function)
    so that a picture draws them at its caller's level: the block open, where every other
    block is one box.  x: (B, T, D) -> (B, T, D)"""
    x = blocks.residual(p.norm1, x, lambda h: multihead_attention(p.self_attn, h, h, causal),
                        "pre")  # (B, T, D)
    return blocks.residual(p.norm2, x, lambda h: feed_forward(p.ff, h,
                                                              activation=activation_of(p.ff)),
                           "pre")


def gpt2_loss(p, ids, targets):
    """lm.apply's cross-entropy, the first block drawn open (block_drawn_open).
    ids, targets (B, T)"""
    x = lm.embedded(p, ids)  # (B, T, D)
    mask = causal_mask(ids.shape[1])  # (1, 1, T, T)
    x = block_drawn_open(p.blocks[0], x, mask)
    for block in p.blocks[1:]:
        x = blocks.decoder_only_block(block, x, mask)  # (B, T, D)
    return ag.cross_entropy(lm.logits_of(p, x), targets)


def gpt2_pictures(directory, rng):
    """GPT-2's loss (the first block open, the others folded) and one block alone, from
    DIR's files, or GPT-2 small's sizes and GPT-2's random init (directory None)."""
    p = gpt2.load(directory) if directory else gpt2.init(rng)
    ids = rng.integers(0, lm.vocab_size(p), (1, GPT2_TOKENS + 1))
    x = rng.standard_normal((1, GPT2_TOKENS, p.norm.scale.shape[0])).astype(np.float32)
    return [Picture("gpt2", gpt2_loss, (p, ids[:, :-1], ids[:, 1:]), (1, 2)),
            Picture("gpt2_block", blocks.decoder_only_block,
                    (p.blocks[0], x, causal_mask(GPT2_TOKENS)), (None, 2))]


def file_stem(name, depth, backward):
    """transformer, 3, True -> 'transformer-depth3-backward'; depth None -> '...-all'."""
    return f"{name}-{'all' if depth is None else f'depth{depth}'}{'-backward' * backward}"


def draw(picture, out, formats):
    """Record the picture's call once (with its values) and render it at each depth, forward
    and backward, in each format; a PNG past MAX_PNG_SIDE pixels a side is deleted again
    (its SVG, which a browser zooms, stays). -> (the Graph, the paths written, a line for
    each PNG left out)"""
    graph = ag.viz.trace(picture.function, *picture.args, values=True)
    paths, left_out = [], []
    for depth in picture.depths:
        for backward in (False, True):
            for fmt in formats:
                path = out / f"{file_stem(picture.name, depth, backward)}.{fmt}"
                with writing(path):
                    graph.render(path, depth=depth, backward=backward)
                size = png_size(path) if fmt == "png" else (0, 0)
                if max(size) > MAX_PNG_SIDE:
                    path.unlink()
                    left_out.append(f"  {path.name}: left out, {size[0]:,} x {size[1]:,} px is "
                                    f"past {MAX_PNG_SIDE:,} px a side; its SVG has it whole")
                else:
                    paths.append(path)
    return graph, paths, left_out


@contextlib.contextmanager
def writing(path):
    """Around writing `path`: an OSError that names no file (a write on a full disk) names it."""
    try:
        yield
    except OSError as error:
        if error.filename is not None or error.errno is None:
            raise
        raise type(error)(error.errno, error.strerror, str(path)) from None


def png_size(path):
    """(width, height) in pixels, from a PNG file's header."""
    with open(path, "rb") as fh:
        return struct.unpack(">II", fh.read(24)[16:24])


def describe(picture, graph):
    """'transformer: 509 ops, 260 parameters; depth 3: 24 nodes, depth 4: 110 nodes'"""
    views = ", ".join(f"{'every op' if d is None else f'depth {d}'}: {graph.view(d).count()} "
                      f"nodes" for d in picture.depths)
    return f"{picture.name}: {len(graph.ops)} ops, {len(graph.params)} parameters; {views}"


def write_readme_picture(path):
    """One encoder block of the paper's base model at README_DEPTH, forward."""
    picture = encoder_block_picture(np.random.default_rng(0), FULL)
    ag.viz.trace(picture.function, *picture.args).render(path, depth=README_DEPTH)
    print(f"wrote the README's picture {path}")


def write_readme_screenshot(html_path, png_path):
    """The README's screenshot of the transformer's explorer, in headless Chromium."""
    driver = browser.headless_chromium()
    try:
        browser.readme_screenshot(driver, html_path, png_path)
    finally:
        driver.quit()
    print(f"wrote the README's screenshot {png_path}")


def parse_args(argv=None):
    parser = common.argument_parser("graphs", __doc__)
    parser.add_argument("--readme-picture", metavar="PATH", default=None,
                        help="also draw the README's picture (one encoder block of the base "
                             "model at depth 2) to PATH (.svg or .png)")
    parser.add_argument("--readme-screenshot", metavar="PATH", default=None,
                        help="also photograph the transformer's explorer in headless Chromium "
                             "(Debian's chromium and chromium-driver, with selenium) to PATH (.png)")
    parser.add_argument("--gpt2", nargs="?", const="", default=None, metavar="DIR",
                        help="draw GPT-2 alone: the weights in DIR (model.safetensors, "
                             "config.json), or GPT-2 small's sizes with random weights")
    args = parser.parse_args(argv)
    if args.gpt2 is not None:
        common.refuse_unused(parser, args, ("quick", "readme_picture", "readme_screenshot"),
                             "is for the other models' pictures, not --gpt2's")
    common.check_output_folder(parser, common.output_path(args, "graphs"))
    common.check_picture_path(parser, "--readme-picture", args.readme_picture, (".svg", ".png"))
    common.check_picture_path(parser, "--readme-screenshot", args.readme_screenshot, (".png",))
    for option, path in (("--readme-picture", args.readme_picture),
                         ("--readme-screenshot", args.readme_screenshot)):
        if path is not None and not shutil.which("dot"):
            parser.error(f"{option} needs Graphviz's `dot`, which is not on PATH: "
                         f"{ag.viz.dot.INSTALL}")
    if args.readme_screenshot is not None:
        if browser.chromium_paths() is None or importlib.util.find_spec("selenium") is None:
            parser.error("--readme-screenshot needs chromium and chromedriver on PATH and "
                         "selenium (apt-get install chromium chromium-driver; pip install "
                         "selenium)")
    return args


def main(argv=None):
    args = parse_args(argv)
    common.use_threads(args)
    out = common.output_directory(args, "graphs")
    try:
        draw_all(args, out)
    except OSError as error:  # a full disk, say: the file, not three chained tracebacks
        if error.errno is None:
            raise
        sys.exit(f"graphs: could not write {error.filename or f'a file in {out}'} "
                 f"({error.strerror}); the pictures before it are in {out}")


def draw_all(args, out):
    """Every picture and explorer into `out` (and the README's, when asked), then the line
    that counts them."""
    formats = ("svg", "png") if shutil.which("dot") else ("dot",)
    if formats == ("dot",):
        print(f"Graphviz's `dot` was not found: writing each picture's DOT text instead.\n"
              f"{ag.viz.dot.INSTALL}")
    written, explorers = [], []
    rng = np.random.default_rng(args.seed)
    if args.gpt2 is not None:
        with common.exit_on_bad_input("graphs"):
            drawn = gpt2_pictures(args.gpt2, rng)
    else:
        drawn = pictures(QUICK if args.quick else FULL, rng)
    for picture in drawn:
        graph, paths, left_out = draw(picture, out, formats)
        written += paths
        print(describe(picture, graph), flush=True)
        for line in left_out:
            print(line, flush=True)
        if formats != ("dot",):
            with writing(out / f"{picture.name}-explorer.html"):
                explorers.append(graph.explore(out / f"{picture.name}-explorer.html",
                                               backward=True, values=True).path)
            print(f"  explorer: {explorers[-1]}", flush=True)
    if args.readme_picture:
        with writing(args.readme_picture):
            write_readme_picture(args.readme_picture)
    if args.readme_screenshot and explorers:
        write_readme_screenshot(explorers[-1], args.readme_screenshot)
    common.print_result(f"wrote {len(written)} pictures ({', '.join(formats)}) and "
                        f"{len(explorers)} explorers of {len(drawn)} models in {out}")


if __name__ == "__main__":
    program.run("graphs", main)
