"""report.html as a person sees it: a synthetic run's page opened from disk (``file://``) in headless Chromium
(Debian's chromium + chromium-driver). Screenshots go to $SPECHARNESS_ARTIFACTS (default the test's temp folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser


def artifacts(tmp_path: Path) -> Path:
    out = Path(os.environ.get("SPECHARNESS_ARTIFACTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_report_html_opens_from_disk_with_the_answer_first(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Fails if the answer is not the first h2, a table is missing, or any plot fails to load from the page alone."""
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.reporting.report import write_report

    run = write_synthetic_run(tmp_path / "run", records=480)
    write_report(run)
    browser.get((run / "report.html").as_uri())
    browser.save_screenshot(str(artifacts(tmp_path) / "report_html.png"))
    assert browser.find_element("css selector", "h1").text.startswith("specharness decision report")
    headings = [h.text for h in browser.find_elements("css selector", "h2")]
    assert headings[:2] == ["Answer", "Decision"], headings
    assert browser.find_elements("css selector", "table")
    assert browser.find_elements("css selector", "div.table-wrap > table")
    images = browser.find_elements("css selector", "img")
    assert len(images) == len(list((run / "plots").glob("*.png"))) >= 4
    widths = browser.execute_script(
        "return Array.from(document.images).map(function (i) { return i.complete ? i.naturalWidth : 0; });"
    )
    assert all(w > 0 for w in widths), widths
    verdicts = {b.text for b in browser.find_elements("css selector", "td strong")}
    assert {"helps", "holds"} <= verdicts, verdicts
