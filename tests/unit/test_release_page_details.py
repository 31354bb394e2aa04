"""The committed per-machine release pages (html/<machine>/releases.html, bash scripts/publish.sh) as a reviewer
reads them: release pair values only in the pairs section, no empty heading, ASV's marks explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specharness.history.site.release_pages import MARKS

ROOT = Path(__file__).resolve().parents[2]
SITES = json.loads((ROOT / "html" / "sites.json").read_text())


@pytest.fixture(params=[s["folder"] for s in SITES])
def page(request: pytest.FixtureRequest) -> str:
    return (ROOT / "html" / request.param / "releases.html").read_text()


def test_pair_values_are_not_filed_under_separate_runs(page: str) -> None:
    separate = page.split("id='separate-runs'", 1)[1] if "id='separate-runs'" in page else ""
    separate = separate.split("id='unpublished'", 1)[0]  # the list of benchmarks without results names them
    assert "ReleasePairOverall" not in separate and "ReleasePair." not in separate
    assert separate or "No separate runs on this machine" in page


def test_no_heading_without_a_chart(page: str) -> None:
    if "Same-work speedup of ngram over baseline" in page:
        after = page.split("Same-work speedup of ngram over baseline", 1)[1]
        assert "<div class='cell'>" in after.split("<h3", 1)[0]


def test_asv_marks_are_explained(page: str) -> None:
    marks = page.split("What asv compare's marks mean", 1)[1]
    assert all(f"<code>{m}</code>" in marks for m, _why in MARKS) and {"+", "-", "!", "~"} <= {m for m, _ in MARKS}


@pytest.mark.parametrize("site", SITES, ids=lambda s: s["folder"])
def test_a_site_offers_only_its_own_branchs_release_pairs(site: dict[str, str]) -> None:
    """The CPU site's graphs and menus list no GPU pair (and the reverse): the pair parameter of ReleasePair and
    ReleasePairOverall holds only the site's branch's pairs."""
    from specharness.history.asv.pairfile import is_pair_benchmark
    from specharness.history.site.pair_section import branch_of

    index = json.loads((ROOT / "html" / site["folder"] / "index.json").read_text())
    pairs = {p for name, b in index["benchmarks"].items() if is_pair_benchmark(name) for p in b["params"][0]}
    assert pairs and {branch_of(p.strip("'").split("..")[0]) for p in pairs} == {site["branch"]}
