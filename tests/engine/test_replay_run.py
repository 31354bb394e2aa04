"""A replayed 3-turn conversation through a real paired run: imported with ``--turns replay``, sent turn by turn by
both arms with each arm's own answers as history, paired turn by turn in the report."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest

from specharness.experiment.journal import read_journal

from .conftest import ENGINE_ARGS, assert_pooled_and_released, cli

pytestmark = pytest.mark.engine

CONVERSATIONS = [
    {
        "id": "colours",
        "conversations": [
            {"from": "system", "value": "Answer in one short sentence."},
            {"from": "human", "value": "Name a colour of the sky."},
            {"from": "gpt", "value": "Blue."},
            {"from": "human", "value": "Name another colour."},
            {"from": "gpt", "value": "Green."},
            {"from": "human", "value": "Now list both colours you named."},
            {"from": "gpt", "value": "Blue and green."},
        ],
    },
    {
        "id": "counting",
        "conversations": [
            {"from": "human", "value": "Count from one to five in words."},
            {"from": "gpt", "value": "One, two, three, four, five."},
            {"from": "human", "value": "Now count back down."},
            {"from": "gpt", "value": "Five, four, three, two, one."},
            {"from": "human", "value": "Repeat the first count you gave."},
        ],
    },
]
ARMS = ("baseline", "ngram")
TURNS = ("t1", "t2", "t3")


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory: pytest.TempPathFactory, pooled_env: dict[str, str]) -> Path:
    where = tmp_path_factory.mktemp("replay")
    dataset = where / "chats.jsonl"
    dataset.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in CONVERSATIONS))
    workload = where / "chats-replay.jsonl"
    imported = cli("import", str(dataset), "-o", str(workload), "--turns", "replay", timeout_s=120)
    assert imported.returncode == 0, imported.stderr[-3000:]
    cases = [orjson.loads(line) for line in workload.read_bytes().splitlines()]
    assert [(c["id"], len(c["turns"])) for c in cases] == [("colours", 2), ("counting", 2)]
    out = where / "run"
    result = cli(
        "run",
        *ENGINE_ARGS,
        "--workloads",
        str(workload),
        "--clients",
        "1",
        "--blocks",
        "2",
        "--requests",
        "2",
        "--warmups",
        "0",
        "--max-tokens-cap",
        "24",
        "--no-progress",
        "--out",
        str(out),
        env=pooled_env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert_pooled_and_released(out)
    return out


def test_every_turn_of_every_conversation_is_journaled_per_arm_and_block(replay_run: Path) -> None:
    requests = [r for r in read_journal(replay_run / "journal.jsonl").requests if not r.warmup]
    assert len(requests) == len(ARMS) * 2 * 2 * len(TURNS)  # arms x blocks x conversations x turns
    expected = sorted(f"{c['id']}#{t}" for c in CONVERSATIONS for t in TURNS)
    for arm in ARMS:
        for block in (0, 1):
            mine = [r for r in requests if r.arm == arm and r.block == block]
            assert sorted(r.case_id for r in mine) == expected, (arm, block)
            for conversation in ("colours", "counting"):
                turns = sorted((r for r in mine if r.case_id.startswith(conversation + "#")), key=lambda r: r.case_id)
                assert len({r.seq for r in turns}) == 1  # one conversation, one position
                assert all(r.error_kind is None for r in turns), [(r.case_id, r.error) for r in turns]
                for before, after in itertools.pairwise(turns):
                    # sent after the previous answer ended (two clocks: allow 50 ms)
                    assert after.started_unix_s >= before.started_unix_s + before.e2e_s - 0.05
                    # this arm's own answer is in the next turn's prompt, with the next user message on top
                    assert after.prompt_tokens is not None and before.prompt_tokens is not None
                    assert after.prompt_tokens - before.prompt_tokens >= (before.completion_tokens or 0)
    # the same turn at the same position in both arms, so every turn pairs
    for block in (0, 1):
        keys = [{(r.case_id, r.seq) for r in requests if r.arm == arm and r.block == block} for arm in ARMS]
        assert keys[0] == keys[1]


def test_report_counts_every_turn_pair_once(replay_run: Path) -> None:
    report = orjson.loads((replay_run / "report.json").read_bytes())
    (comparison,) = [c for c in report["comparisons"] if c["workload"] == "chats-replay"]
    counts = comparison["pair_counts"]
    assert counts["pairs"] == 2 * 2 * len(TURNS)  # blocks x conversations x turns
    parts = ("same_work", "divergent", "unstable", "failed", "history_diverged")
    assert sum(counts[k] for k in parts) == counts["pairs"], counts
    # a first turn never has a diverged history, so at most the later turns are counted there
    assert counts["history_diverged"] <= 2 * 2 * (len(TURNS) - 1)
