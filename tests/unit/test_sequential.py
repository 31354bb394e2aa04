"""--until-decided on a SYNTHETIC run folder (no engine): extra blocks, an extra block cut short, the stopping rule."""

from __future__ import annotations

from pathlib import Path

import orjson

from specharness.analysis.analyse import analyse, rules_for, sequential_looks
from specharness.analysis.sequential import undecided_cells
from specharness.experiment.design import Profile
from specharness.experiment.journal import Journal, read_journal
from specharness.experiment.rundir import read_manifest
from specharness.experiment.synthetic import write_synthetic_run
from specharness.records import cell_key


def _until_decided(run: Path, max_blocks: int) -> None:
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["config"]["profile"].update(until_decided=True, max_blocks=max_blocks)
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))


def _copy_block(run: Path, source: int, target: int, arms: tuple[str, ...]) -> None:
    """Journal block ``source``'s records again as block ``target`` for the given arms (an extra block)."""
    contents = read_journal(run / "journal.jsonl")
    with Journal(run / "journal.jsonl", fsync=False) as journal:
        for record in [*contents.requests, *contents.cells]:
            if record.block == source and record.arm in arms:
                d = record.to_dict()
                d.pop("kind"), d.pop("schema")
                d["block"] = target
                d["cell"] = cell_key(target, record.workload, record.load, record.arm) + "#s0"
                journal.write(type(record)(**d))


def test_looks_share_alpha_and_an_extra_block_cut_short_waits_for_resume(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=320, profile_name="quick")
    _until_decided(run, max_blocks=8)
    profile = Profile.from_dict(read_manifest(run)["config"]["profile"])
    assert sequential_looks(profile) == 3
    assert abs(rules_for(profile, greedy=True).confidence - (1 - 0.05 / 3)) < 1e-12
    before = {(c.workload, c.clients): c for c in analyse(run, read_manifest(run)).comparisons}
    # block 4 measured for the baseline only: the ngram cell was never run (an interrupt between the two arms)
    _copy_block(run, source=0, target=4, arms=("baseline",))
    after = {(c.workload, c.clients): c for c in analyse(run, read_manifest(run)).comparisons}
    for key, c in after.items():
        assert c.speed.verdict != "invalid" and c.speedup.blocks == 4, key
        assert c.speed.verdict == before[key].speed.verdict
    # once both arms have it, the extra block counts
    _copy_block(run, source=0, target=4, arms=("ngram",))
    complete = analyse(run, read_manifest(run))
    assert all(c.speedup.blocks == 5 for c in complete.comparisons)
    assert not complete.missing_cells


def test_undecided_cells_are_the_inconclusive_ones(tmp_path: Path) -> None:
    decided = write_synthetic_run(tmp_path / "fast", records=320, profile_name="quick", ngram_speed=2.0)
    assert undecided_cells(decided) == set()
    close = write_synthetic_run(tmp_path / "close", records=320, profile_name="quick", ngram_speed=1.10, seed=3)
    verdicts = {(c.workload, c.load): c.speed.verdict for c in analyse(close, read_manifest(close)).comparisons}
    assert undecided_cells(close) == {k for k, v in verdicts.items() if v == "inconclusive"}
    assert undecided_cells(close)  # a 10% speedup against a 10% band cannot be decided in 4 blocks
