"""The published site as a person sees it: ASV's pages plus the release page, served on loopback and loaded in
headless Chromium (Debian's chromium + chromium-driver). Screenshots go to $SPECHARNESS_ARTIFACTS (default the
test's temp folder)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    html_dir = tmp_path_factory.mktemp("html")
    asv = [sys.executable, "-m", "asv"]
    result = subprocess.run([*asv, "publish", "--no-pull", "--html-dir", str(html_dir)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    result = subprocess.run([sys.executable, "-m", "specharness", "site", "--results", str(ROOT / "results"),
                             "--html", str(html_dir)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        pytest.fail("Debian's chromium and chromium-driver are required (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def artifacts(tmp_path: Path) -> Path:
    out = Path(os.environ.get("SPECHARNESS_ARTIFACTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def wait(predicate, limit_s: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    return predicate()


def graph_points(browser, site: str, benchmark: str) -> int:  # type: ignore[no-untyped-def]
    """Data points (non-null) ASV's graph page draws for one benchmark, once its plot exists."""
    browser.get(f"{site}/#{benchmark}")
    return int(wait(lambda: browser.execute_script(
        "var p = $('#main-graph').data('plot'); if (!p) return 0;"
        "return p.getData().reduce(function (n, s) { return n + s.data.filter(function (d) {"
        " return d[1] !== null; }).length; }, 0);")) or 0)  # fmt: skip


def test_graph_page_plots_points(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    points = graph_points(browser, site, "bench_paired.PairedNgram.track_slowdown")
    browser.save_screenshot(str(artifacts(tmp_path) / "asv_graph.png"))
    assert points and points > 0, "the slowdown graph has no data points"


def test_regressions_page_loads(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/#/regressions")
    # the rows' text is read in one script call: ASV redraws the table as it loads, so held elements go stale
    def listed() -> list[str]:
        rows: list[str] = browser.execute_script(
            "return Array.from(document.querySelectorAll('#regressions-display table tbody tr'))"
            ".map(function (r) { return r.innerText; });")  # fmt: skip
        return rows if any("PairedNgram" in r for r in rows) else []

    rows = wait(listed, limit_s=120)
    browser.save_screenshot(str(artifacts(tmp_path) / "asv_regressions.png"))
    # the committed history holds a rise between two harness commits, which ASV must list
    assert rows, "ASV's regressions page lists no PairedNgram regression"


def test_release_page_shows_each_release(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/releases.html")
    points = browser.find_elements("css selector", "svg.metric circle.point")
    releases = {p.get_attribute("data-release") for p in points}
    browser.save_screenshot(str(artifacts(tmp_path) / "releases.png"))
    assert points, "the release page drew no points"
    assert len(releases) >= 3, f"expected the three CPU releases, saw {sorted(releases)}"


@pytest.mark.parametrize("metric", ["track_crossover_gap_s", "track_peak_rate_loss", "track_capacity_loss_latency"])
def test_load_sweep_graphs_plot_points(site: str, browser, tmp_path: Path, metric: str) -> None:  # type: ignore[no-untyped-def]
    """The load sweep's tracked values (issue 11) are published with points, one series per vLLM release."""
    browser.get(f"{site}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    points = graph_points(browser, site, f"bench_load.LoadSweep.{metric}")
    browser.save_screenshot(str(artifacts(tmp_path) / f"asv_load_{metric}.png"))
    assert points and points > 0, f"the {metric} graph has no data points"
