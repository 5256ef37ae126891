"""The explorer's scale on the paper's base Transformer (6 + 6 layers, d 512, batch 2, 16
tokens), with backward=True and values=True: the seconds to trace and write the page (wall
clock and this process's CPU), its size, the first view's drawing time after load in headless
Chromium, and the slowest of opening every call. The targets: 10 s, 5 MB, 2 s, 300 ms.

    python3 tests/benchmarks/bench_explorer.py [--rounds 3]

Needs Graphviz's dot and Debian's chromium and chromium-driver (demos/support/browser.py)."""
import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import autograd_lite as ag  # noqa: E402
from demos.support.browser import headless_chromium, open_explorer  # noqa: E402
from models import transformer  # noqa: E402

OPEN_EVERY_CALL = """
    const api = window.autogradExplorer, times = {};
    for (const path of api.scopes()) {
      const start = performance.now();
      api.open(path);
      document.body.getBoundingClientRect();  // the layout done, as a person would see it
      times[path] = performance.now() - start;
    }
    return times;"""


def translation_loss(p, src, tgt):
    return ag.cross_entropy(transformer.apply(p, src, tgt[:, :-1]), tgt[:, 1:])


def write_page(folder):
    """(path, wall seconds, CPU seconds) of tracing the base model and writing its page."""
    rng = np.random.default_rng(0)
    p = transformer.init(rng, 1000, 1000)
    src, tgt = rng.integers(1, 1000, (2, 16)), rng.integers(1, 1000, (2, 17))
    start, cpu = time.perf_counter(), time.process_time()
    page = ag.viz.explore(translation_loss, p, src, tgt, path=os.path.join(folder, "base.html"),
                          backward=True, values=True)
    return page.path, time.perf_counter() - start, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    driver = headless_chromium()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for round_ in range(args.rounds):
                path, wall, cpu = write_page(folder)
                open_explorer(driver, path)
                first_view = float(driver.execute_script("return document.body.dataset.firstView"))
                opened = driver.execute_script(OPEN_EVERY_CALL)
                slowest = max(opened, key=opened.get)
                print(f"round {round_ + 1}: written in {wall:.2f} s ({cpu:.2f} s of CPU), "
                      f"{pathlib.Path(path).stat().st_size / 2 ** 20:.2f} MB, first view "
                      f"{first_view:.0f} ms, {len(opened)} calls opened in at most "
                      f"{opened[slowest]:.1f} ms ({slowest})")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
