"""The report in a real browser: Debian's headless Chromium driven by selenium.

Skips when Chromium, its driver or selenium is missing, except under CI (`CI` set),
where that is a failure: scripts/setup.sh installs them.
"""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import need

pytestmark = pytest.mark.browser

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)


def _which(names: tuple[str, ...]) -> str | None:
    return next((p for n in names if (p := shutil.which(n))), None)


@pytest.fixture(scope="module")
def browser():
    binary, driver = _which(CHROMIUM), _which(DRIVER)
    need(
        binary is not None and driver is not None,
        "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
    )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need(False, "selenium is not installed (pip install -e '.[dev]')")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit driver path: selenium's manager would otherwise try to download one.
    drv = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


def _requests(drv) -> list[str]:
    urls = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def test_report_renders_offline_and_hostile_scripts_stay_inert(browser, report_file):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get_log("browser")
    browser.get_log("performance")
    url = report_file.resolve().as_uri()
    browser.get(url)
    assert browser.execute_script("return document.readyState") == "complete"

    # no script but the page's own ran
    assert browser.execute_script("return typeof window.pwned") == "undefined"

    # the DAGs and the plot are real, laid-out SVG
    dags = browser.find_elements(By.CSS_SELECTOR, ".dag svg")
    assert len(dags) >= 14
    browser.execute_script("arguments[0].closest('details.task').open = true", dags[0])
    box = browser.execute_script("return arguments[0].getBoundingClientRect()", dags[0])
    assert box["width"] > 20 and box["height"] > 20
    plot = browser.find_element(By.CSS_SELECTOR, ".plot svg")
    assert plot.size["width"] > 100
    risk = browser.find_element(By.CSS_SELECTOR, ".risk-plot svg")
    assert risk.size["width"] > 100 and risk.size["height"] > 60
    assert browser.find_elements(By.CSS_SELECTOR, "table.summary tbody tr")

    # only file:/data: URLs were ever loaded
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert all(u.startswith(("file:", "data:", "blob:")) for u in resources), resources
    requests = _requests(browser)
    assert requests and all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests

    # the filters hide the rows they should
    rows = browser.find_elements(By.CSS_SELECTOR, "#task-list tbody tr")
    wrong = [r for r in rows if r.get_attribute("data-correct") == "0"]
    Select(browser.find_element(By.ID, "f-correct")).select_by_value("0")
    visible = [r for r in rows if r.is_displayed()]
    assert 0 < len(visible) == len(wrong) < len(rows)
    Select(browser.find_element(By.ID, "f-method")).select_by_value("react")
    assert all(r.get_attribute("data-method") == "react" for r in rows if r.is_displayed())

    # a link into a closed task opens it
    target = browser.find_element(By.CSS_SELECTOR, "details.task:last-of-type")
    anchor = target.get_attribute("id")
    browser.get(f"{url}#{anchor}")
    assert browser.execute_script(f"return document.getElementById('{anchor}').open") is True

    assert browser.execute_script("return typeof window.pwned") == "undefined"
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []


def test_a_run_page_renders_and_is_photographed(browser, oracle_dirs, tmp_path):
    """The README's picture of a run page comes from here: VERIMAP_SCREENSHOT=PATH keeps it
    (docs/img/run-page.png), VERIMAP_SCREENSHOT_TRACE=TRACE photographs that trace instead of
    the scripted one (the README's is a real local-model run)."""
    import os
    import struct
    from pathlib import Path

    from selenium.webdriver.common.by import By

    from verimap.view import write_report

    from .conftest import need_dot

    need_dot()
    scripted = sorted((oracle_dirs[0] / "traces").rglob("*.jsonl"))[0]
    trace = Path(os.environ.get("VERIMAP_SCREENSHOT_TRACE", "").strip() or scripted)
    page = write_report([trace], tmp_path / "run.html")
    browser.set_window_size(1280, 1500)
    browser.get(page.resolve().as_uri())
    for el in browser.find_elements(By.CSS_SELECTOR, "details.node, details.attempt"):
        browser.execute_script("arguments[0].open = true", el)
    dag = browser.find_element(By.CSS_SELECTOR, ".dag svg")
    assert dag.size["width"] > 20 and browser.find_elements(By.CSS_SELECTOR, "tr.verdict")
    assert trace != scripted or browser.find_elements(By.CSS_SELECTOR, "tr.model-call")
    png = browser.get_screenshot_as_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 800 and height >= 600
    if keep := os.environ.get("VERIMAP_SCREENSHOT", "").strip():
        with open(keep, "wb") as f:
            f.write(png)
