"""Headless Chromium from the system's packages (Debian's `chromium` and `chromium-driver`),
driven by Selenium: how the explorer's pages are opened by the tests and photographed for
the README. Nothing here downloads a browser.

    driver = headless_chromium()            # a fresh profile, no network services
    open_explorer(driver, "loss.html")      # waits for window.autogradExplorer
    readme_screenshot(driver, "transformer-explorer.html", "docs/explorer.png")
"""
import pathlib
import shutil
import tempfile
import time

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
SIZE = (1400, 860)
README_CALL = "encoder_block #2/multihead_attention/scaled_dot_product_attention"


def chromium_paths():
    """(browser, driver) executables, or None where either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def headless_chromium(size=SIZE):
    """A Selenium driver of headless Chromium with a fresh profile, logging the console
    and the network (driver.get_log('browser') / get_log('performance'))."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    paths = chromium_paths()
    if paths is None:
        raise RuntimeError("headless_chromium: no chromium and chromedriver on PATH "
                           "(apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={size[0]},{size[1]}")
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-profile-')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(paths[1]), options=options)


def open_explorer(driver, path, timeout=10.0):
    """Load an explorer page from disk and wait until its script has drawn the first view."""
    driver.get(pathlib.Path(path).resolve().as_uri())
    end = time.monotonic() + timeout
    while not driver.execute_script("return !!window.autogradExplorer"):
        if time.monotonic() > end:
            raise TimeoutError(f"open_explorer: {path} did not start its script in {timeout} s")
        time.sleep(0.05)


def readme_screenshot(driver, html_path, png_path):
    """The README's state of a transformer's explorer: one attention call open (reached by
    the `next` button from the first block), `softmax` searched, its softmax selected."""
    open_explorer(driver, html_path)
    api = "window.autogradExplorer"
    first = driver.execute_script(f"return {api}.scopes().find(p => p.endsWith("
                                  f"'encoder_block #1/multihead_attention/"
                                  f"scaled_dot_product_attention'))")
    driver.execute_script(f"{api}.open(arguments[0])", first)
    driver.find_element("xpath", "//button[contains(., 'next')]").click()
    box = driver.find_element("css selector", "input[type=search]")
    box.send_keys("softmax")
    hit = driver.execute_script(f"return {api}.search('softmax').find(h => h.op === 'softmax'"
                                f" && {api}.current() === h.scope)")
    driver.execute_script(f"{api}.select(arguments[0])", hit["id"])
    driver.save_screenshot(str(png_path))
    return png_path
