"""The explorer's pages in headless Chromium (the `browser` fixture, conftest.py; laid out by
Graphviz's dot, the `dot` fixture): the base Transformer's page stays within its size limit and
every call in it opens (the times are measured by tests/benchmarks/bench_explorer.py, not asserted
here); clicking a box opens its call and the breadcrumb goes back; search finds every attention's
softmax; the details panel says what the trace recorded; the colour scale, gradient edges and
memory plot are drawn; and no page logs a JavaScript error or asks the network for anything. Each
test saves screenshots of the states it reaches into its temporary folder."""
import json
import time

import numpy as np
import pytest

import autograd_lite as ag
from autograd_lite.viz.labels import shape_text
from demos.support.browser import open_explorer
from models import classifier, lm, transformer

API = "window.autogradExplorer"
MEGABYTES = 5.0  # the most the base Transformer's page may weigh


class Page:
    """An explorer written to disk, with the graph it was made from and the seconds (wall
    clock, and CPU of this process) that tracing and writing it took."""

    def __init__(self, path, graph, seconds, cpu_seconds):
        self.path, self.graph, self.seconds, self.cpu_seconds = path, graph, seconds, cpu_seconds


def write(folder, name, f, *args):
    start, cpu = time.perf_counter(), time.process_time()
    graph = ag.viz.trace(f, *args, values=True)
    path = graph.explore(folder / f"{name}.html", backward=True, values=True).path
    return Page(path, graph, time.perf_counter() - start, time.process_time() - cpu)


def translation_loss(p, src, tgt):
    return ag.cross_entropy(transformer.apply(p, src, tgt[:, :-1]), tgt[:, 1:])


def classifier_loss(p, ids, labels):
    return ag.cross_entropy(classifier.apply(p, ids), labels)


def lm_loss(p, ids):
    return ag.cross_entropy(lm.apply(p, ids[:, :-1]), ids[:, 1:])


@pytest.fixture(scope="module")
def pages(tmp_path_factory, dot):
    folder = tmp_path_factory.mktemp("explorers")
    rng = np.random.default_rng(0)
    base = transformer.init(rng, 1000, 1000)  # the paper's base sizes: 6 + 6 layers, d 512
    review = classifier.init(rng, 50, 5, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_len=8,
                             dropout=0.0)
    small_lm = lm.init(rng, 30, 16, 2, 32, 2, 12)
    return {
        "transformer": write(folder, "transformer", translation_loss, base,
                             rng.integers(1, 1000, (2, 16)), rng.integers(1, 1000, (2, 17))),
        "classifier": write(folder, "classifier", classifier_loss, review,
                            rng.integers(0, 50, (2, 8)), np.array([1, 4])),
        "lm": write(folder, "lm", lm_loss, small_lm, rng.integers(0, 30, (2, 10))),
    }


def load(driver, page):
    driver.get_log("browser"), driver.get_log("performance")  # drop what earlier pages logged
    open_explorer(driver, page.path)


def api(driver, call, *args):
    return driver.execute_script(f"return {API}.{call}", *args)


def assert_quiet(driver, page):
    """No JavaScript error in the console, and no request but the page's own file."""
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    urls = [m["params"]["request"]["url"] for m in
            (json.loads(e["message"])["message"] for e in driver.get_log("performance"))
            if m["method"] == "Network.requestWillBeSent"]
    assert set(urls) <= {page.path.resolve().as_uri()}, urls


def click_node(driver, kind, first_line):
    nodes = [n for n in driver.find_elements("css selector", f"#canvas .node.{kind}")
             if n.text.split("\n")[0] == first_line]
    assert len(nodes) == 1, (kind, first_line)
    nodes[0].click()


def breadcrumb(driver):
    return driver.find_element("css selector", ".crumbs").text.replace("\n", " ")


def open_every_call(driver):
    """{call path: milliseconds} to open each call's view and lay it out, as a person would."""
    return driver.execute_script(f"""
        const times = {{}};
        for (const path of {API}.scopes()) {{
          const start = performance.now();
          {API}.open(path);
          document.body.getBoundingClientRect();  // the layout done, as a person would see it
          times[path] = performance.now() - start;
        }}
        return times;""")


def test_the_base_transformers_page_is_small_and_every_call_opens(browser, pages, tmp_path):
    page = pages["transformer"]
    assert page.path.stat().st_size / 2 ** 20 <= MEGABYTES
    load(browser, page)
    opened = open_every_call(browser)
    assert len(opened) == len(api(browser, "scopes()")) > 200
    assert_quiet(browser, page)


def test_clicking_a_box_opens_its_call_and_the_breadcrumb_goes_back(browser, pages, tmp_path):
    page = pages["transformer"]
    load(browser, page)
    root = api(browser, "current()")
    assert root == "translation_loss" and breadcrumb(browser) == "translation_loss"
    browser.save_screenshot(str(tmp_path / "1-first-view.png"))
    click_node(browser, "call", "apply")
    assert api(browser, "current()") == "translation_loss/apply"
    assert breadcrumb(browser) == "translation_loss › apply"
    click_node(browser, "call", "encode")
    click_node(browser, "call", "encoder_block #1")
    browser.find_element("xpath", "//button[contains(., 'next')]").click()
    assert api(browser, "current()") == "translation_loss/apply/encode/encoder_block #2"
    assert breadcrumb(browser) == "translation_loss › apply › encode › encoder_block #2"
    assert "2 of 6" in browser.find_element("tag name", "header").text
    browser.save_screenshot(str(tmp_path / "2-encoder-block-2.png"))
    browser.find_element("link text", "apply").click()
    assert api(browser, "current()") == "translation_loss/apply"
    browser.find_element("link text", "translation_loss").click()
    assert api(browser, "current()") == root
    assert_quiet(browser, page)


def test_search_finds_the_softmax_of_every_attention_call(browser, pages, tmp_path):
    page = pages["transformer"]
    load(browser, page)
    hits = [h for h in api(browser, "search('softmax')") if h["op"] == "softmax"]
    where = [h["scope"].split("/")[3:] for h in hits]
    assert [w[0] for w in where] == ([f"encoder_block #{k}" for k in range(1, 7)]
                                     + [f"decoder_block #{k}" for k in range(1, 7) for _ in (1, 2)])
    assert [w[1] for w in where] == (["multihead_attention"] * 6
                                     + ["multihead_attention", "cross_attention"] * 6)
    for hit in hits:  # each opens its own attention call with the softmax highlighted
        details = api(browser, "select(arguments[0])", hit["id"])
        assert api(browser, "current()") == hit["scope"] == details["scope"]
        assert hit["scope"].endswith("scaled_dot_product_attention")
        selected = browser.find_elements("css selector", "#canvas .node.selected")
        assert [n.text.split("\n")[0] for n in selected] == ["softmax"]
    box = browser.find_element("css selector", "input[type=search]")
    box.send_keys("softmax")
    listed = browser.find_element("css selector", ".hits h3").text
    everything = api(browser, "search('softmax')")
    assert listed == f"{len(everything)} found"
    browser.find_elements("css selector", ".hits a")[7].click()  # decoder_block #1's cross
    assert api(browser, "current()") == hits[7]["scope"]
    browser.save_screenshot(str(tmp_path / "3-search-softmax.png"))
    assert_quiet(browser, page)


def test_the_details_panel_says_what_the_trace_recorded(browser, pages, tmp_path):
    page = pages["classifier"]
    load(browser, page)
    graph = page.graph
    norm = next(op for op in graph.ops if op.label == "layer_norm")
    details = api(browser, "select(arguments[0])", norm.id)
    file, line, text = norm.source
    assert details["shape"] == list(norm.shape) and details["dtype"] == "f32"
    assert details["source"].endswith(f":{line}  {text}")
    assert file.endswith(details["source"].split(":")[0])
    assert details["saved_bytes"] == norm.kept + norm.residual
    assert details["pullback"] == "layer_norm_pullback" and details["scope"] == repr(norm.scope)
    panel = " ".join(browser.find_element("css selector", "aside .details").text.split())
    assert f"shape {shape_text(norm.shape)} f32" in panel
    assert f"scope {repr(norm.scope)}" in panel
    assert " ".join(f"source {details['source'].split(':')[0]}:{line} {text}".split()) in panel
    assert f"std {norm.stats['std']:.4g}" in panel and "NaN / inf 0" in panel
    # its inputs are links: the first leads to the op (or input) that made it
    browser.find_elements("css selector", "aside .details a")[0].click()
    shown = api(browser, "select(arguments[0])", norm.inputs[0][0])
    assert shown["id"] == norm.inputs[0][0]
    param = next(it for it in graph.params if it.label.endswith("norm1.scale"))
    details = api(browser, "select(arguments[0])", param.id)
    assert details["param_path"] == param.label and details["grad_norm"] == param.grad_norm
    assert "parameter" in browser.find_element("css selector", "aside .details").text
    assert_quiet(browser, page)


def test_hover_colour_scale_gradient_edges_and_memory_plot(browser, pages, tmp_path):
    page = pages["classifier"]
    load(browser, page)
    dense = next(p for p in api(browser, "scopes()") if p.endswith("dense #1"))
    assert api(browser, "open(arguments[0])", dense)
    edges = len(browser.find_elements("css selector", "#canvas path.edge"))
    params = browser.find_elements("css selector", "#canvas .node.param")
    assert len(params) == 2 and edges >= 3  # w and b, used by the call's own ops
    browser.find_element("id", "gradients").click()
    assert len(browser.find_elements("css selector", "#canvas path.gradient")) == 2
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select
    params = browser.find_elements("css selector", "#canvas .node.param")  # drawn anew
    ActionChains(browser).move_to_element(params[0]).perform()
    lit = browser.find_elements("css selector", "#canvas .node.neighbour")
    hovered = int(params[0].get_attribute("data-ref"))
    users = [op.label for op in page.graph.ops if repr(op.scope) == dense
             and any(source == hovered for source, _ in op.inputs)]
    assert [n.text.split("\n")[0] for n in lit] == users and users  # its consumers here
    Select(browser.find_element("id", "colour")).select_by_value("std")
    coloured = browser.execute_script(
        "return [...document.querySelectorAll('#canvas .node rect')].filter(r => r.style.fill).length")
    assert coloured == len(browser.find_elements("css selector", "#canvas .node")) - len(
        browser.find_elements("css selector", "#canvas .node.call"))
    # pan and zoom: a wheel step scales by exp(-deltaY / 500) about the pointer; a drag moves
    canvas = browser.find_element("id", "canvas")
    k = float(canvas.get_attribute("data-k"))
    browser.execute_script("arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -500, "
                           "clientX: 100, clientY: 100, bubbles: true, cancelable: true}))", canvas)
    assert float(canvas.get_attribute("data-k")) == pytest.approx(k * np.e, rel=1e-6)
    x = float(canvas.get_attribute("data-x"))
    ActionChains(browser).move_to_element_with_offset(canvas, -400, -200).click_and_hold() \
        .move_by_offset(60, 0).release().perform()
    assert float(canvas.get_attribute("data-x")) == pytest.approx(x + 60, abs=1)
    points = browser.find_element("css selector", "#plot polyline").get_attribute("points")
    assert len(points.split()) == len(page.graph.ops)
    browser.save_screenshot(str(tmp_path / "4-dense-gradients-std.png"))
    assert_quiet(browser, page)


def test_the_language_models_page_finds_its_parameters(browser, pages, tmp_path):
    page = pages["lm"]
    load(browser, page)
    wanted = [it for it in page.graph.params if ".wq" in it.label]
    hits = [h for h in api(browser, "search('.wq')") if h["op"] == "param"]
    assert sorted(h["label"] for h in hits) == sorted(it.label for it in wanted) and wanted
    details = api(browser, "select(arguments[0])", hits[-1]["id"])
    assert details["param_path"] == hits[-1]["label"]
    assert api(browser, "current()") == details["scope"] == hits[-1]["scope"]
    assert browser.find_elements("css selector", "#canvas .node.param.selected")
    browser.save_screenshot(str(tmp_path / "5-lm-parameter.png"))
    assert_quiet(browser, page)


def test_in_a_notebook_the_page_runs_in_its_iframe(browser, pages, tmp_path):
    page = pages["classifier"]
    notebook = tmp_path / "notebook.html"
    explorer = page.graph.explore(values=True)
    notebook.write_text(f"<!DOCTYPE html><html><body>{explorer._repr_html_()}</body></html>")
    browser.get_log("browser")
    browser.get(notebook.resolve().as_uri())
    browser.switch_to.frame(browser.find_element("tag name", "iframe"))
    try:
        for _ in range(100):
            if browser.execute_script(f"return !!window.{API[7:]}"):
                break
            time.sleep(0.05)
        assert api(browser, "current()") == repr(page.graph.root)
    finally:
        browser.switch_to.default_content()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
