"""demos.graphs with --quick: every picture is a well-formed SVG and PNG that shows what the
models are made of (their blocks, the four projections of attention, a gradient edge to
every float input), the README's picture is the one the demo draws, each model's explorer
opens in a browser (where the README's screenshot is taken the demo's way), and without
Graphviz the demo writes DOT text and says how to install it."""
import contextlib
import pathlib
import re
import struct
import xml.etree.ElementTree as ElementTree

import pytest

from demos.support import browser as chromium
from demos import graphs

ROOT = pathlib.Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
PICTURES = 14  # logistic 1 depth, encoder block 2, classifier 2, transformer 2; each ± backward


def texts(path):
    """The text of every label in an SVG (which must parse as XML)."""
    return [t.text for t in ElementTree.parse(path).iter(f"{SVG}text") if t.text]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, dot):
    out = tmp_path_factory.mktemp("graphs")
    capture = out / "stdout.txt"
    with open(capture, "w") as fh, contextlib.redirect_stdout(fh):
        graphs.main(["--quick", "--out", str(out), "--readme-picture", str(out / "readme.svg")])
    return out, capture.read_text().strip().splitlines()


def test_quick_run_ends_with_the_pictures_it_wrote(quick_run):
    out, lines = quick_run
    found = re.fullmatch(r"wrote (\d+) pictures \(svg, png\) and 4 explorers of 4 models in (.+)",
                         lines[-1])
    assert found and int(found.group(1)) == 2 * PICTURES - 2 and found.group(2) == str(out), lines
    assert len(list(out.glob("*.svg"))) == PICTURES + 1  # and the README's
    assert len(list(out.glob("*.png"))) == PICTURES - 2  # the transformer's depth 4: SVG only
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png.name
        assert max(png_size(png)) <= graphs.MAX_PNG_SIDE, png.name


def test_a_png_past_the_readable_size_is_left_out_and_said_so(quick_run):
    """The tiny transformer's depth-4 pictures would be PNGs over 4,000 px tall: only their
    SVGs stay, and the demo says how large each PNG was."""
    out, lines = quick_run
    left_out = [line for line in lines if "left out" in line]
    assert [line.split(":")[0].strip() for line in left_out] == [
        "transformer-depth4.png", "transformer-depth4-backward.png"], lines
    for line in left_out:
        found = re.fullmatch(r"  (\S+)\.png: left out, ([\d,]+) x ([\d,]+) px is past 4,000 px "
                             r"a side; its SVG has it whole", line)
        assert found and max(int(n.replace(",", "")) for n in found.groups()[1:]) > 4000, line
        assert texts(out / f"{found.group(1)}.svg") and not (out / f"{found.group(1)}.png").exists()


def test_pictures_show_what_the_models_are_made_of(quick_run):
    out, _ = quick_run
    logistic = texts(out / "logistic_regression-all-backward.svg")
    assert {"p.w", "p.b", "x", "y"} <= set(logistic)
    # a gradient edge to each of the four float arrays the loss is differentiated by
    gradients = [g for g in ElementTree.parse(out / "logistic_regression-all-backward.svg")
                 .iter(f"{SVG}g") if "gradient" in (g.get("class") or "").split()]
    assert len(gradients) == 4
    block = texts(out / "encoder_block-depth2.svg")  # W_Q, W_K, W_V, W_O; Q, K, V split
    assert {"dense #4", "split_heads #3", "scaled_dot_product_attention"} <= set(block)
    assert "dense #5" not in block and "split_heads #4" not in block
    layers = graphs.QUICK["layers"]
    model = texts(out / "transformer-depth3.svg")
    for name in ("encoder_block", "decoder_block"):
        assert f"{name} #{layers}" in model and f"{name} #{layers + 1}" not in model
    assert any("saved for backward" in t for t in texts(out / "classifier-depth3-backward.svg"))


def test_the_readmes_picture_is_the_one_the_demo_draws(quick_run):
    out, _ = quick_run
    committed = ROOT / "docs" / "encoder_block.svg"
    assert texts(committed) == texts(out / "readme.svg")
    assert "(2, 10, 512) f32" in texts(committed)  # the paper's base sizes, d_model 512


def png_size(path):
    """(width, height) from a PNG's header."""
    return struct.unpack(">II", pathlib.Path(path).read_bytes()[16:24])


def test_each_models_explorer_opens_and_the_readme_screenshot_is_taken_the_demos_way(
        quick_run, browser, tmp_path):
    out, lines = quick_run
    printed = [pathlib.Path(line.split("explorer: ")[1]) for line in lines if "explorer: " in line]
    assert printed == [out / f"{name}-explorer.html" for name in
                       ("logistic_regression", "encoder_block", "classifier", "transformer")]
    for page in printed:
        browser.get_log("browser")
        chromium.open_explorer(browser, page)
        assert browser.execute_script("return window.autogradExplorer.current()") == \
            browser.execute_script("return window.autogradExplorer.scopes()[0]")
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    shot = chromium.readme_screenshot(browser, printed[-1], tmp_path / "explorer.png")
    assert browser.execute_script("return window.autogradExplorer.current()").endswith(
        "encoder_block #2/multihead_attention/scaled_dot_product_attention")
    details = browser.find_element("css selector", "aside .details").text
    assert "softmax" in details and "models/attention.py" in details
    assert png_size(shot) == png_size(ROOT / "docs" / "explorer.png")


def test_without_graphviz_it_writes_dot_text_and_says_how_to_install(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setattr(graphs.shutil, "which", lambda name: None)
    graphs.main(["--quick", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert "apt-get install graphviz" in "\n".join(lines)
    assert lines[-1] == f"wrote {PICTURES} pictures (dot) and 0 explorers of 4 models in {tmp_path}"
    assert not list(tmp_path.glob("*.html"))
    dots = sorted(tmp_path.glob("*.dot"))
    assert len(dots) == PICTURES and not list(tmp_path.glob("*.svg"))
    assert all(d.read_text().startswith("digraph") for d in dots)
