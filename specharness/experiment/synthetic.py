"""SYNTHETIC run folders for load-testing the report path (``specharness report``) — never measurements.

``write_synthetic_run(dir, records)`` writes a manifest and a journal of made-up requests with the shape of a
standard run, so the time to summarise a large journal can be measured without an engine.
"""

from __future__ import annotations

import random
from pathlib import Path

from specharness.experiment.config import RunConfig
from specharness.experiment.design import Profile, get_profile, override
from specharness.experiment.journal import Journal
from specharness.experiment.rundir import write_manifest
from specharness.records import CellRecord, RequestRecord, cell_key

__all__ = ["write_synthetic_run"]


def write_synthetic_run(out_dir: Path, records: int, seed: int = 7, profile_name: str = "standard") -> Path:
    rng = random.Random(seed)
    base: Profile = get_profile(profile_name)
    per_cell = max(1, records // (base.blocks * len(base.workloads) * len(base.clients) * len(base.arms)))
    profile = override(base, requests_per_cell=per_cell, warmups_per_cell=0)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = RunConfig(profile=profile, out_dir=out_dir)
    write_manifest(out_dir, {"config": config.to_dict(), "status": "complete", "synthetic": True,
                             "model": {"name": "synthetic"}, "hardware": {}})  # fmt: skip
    with Journal(out_dir / "journal.jsonl", fsync=False) as journal:
        for block in range(profile.blocks):
            for workload in profile.workloads:
                for clients in profile.clients:
                    for arm in profile.arms:
                        cell = cell_key(block, workload, clients, arm) + "#s0"
                        speed = 2.0 if arm == "ngram" else 1.0
                        tokens_total = 0
                        for seq in range(per_cell):
                            n = rng.randint(20, 120)
                            chunks = [rng.randint(1, 4) if arm == "ngram" else 1 for _ in range(n)]
                            while sum(chunks) > n:
                                chunks.pop()
                            gap = 0.03 / speed
                            arrivals = [0.05 + gap * i for i in range(len(chunks))]
                            tokens = sum(chunks)
                            tokens_total += tokens
                            journal.write(RequestRecord(
                                arm=arm, block=block, workload=workload, group="g", case_id=f"c{seq % 16}",
                                clients=clients, warmup=False, cell=cell, seq=seq, started_unix_s=0.0, send_s=0.0,
                                chunk_arrival_s=arrivals, chunk_tokens=chunks, ttft_s=arrivals[0],
                                e2e_s=arrivals[-1] + 0.001, completion_tokens=tokens, finish_reason="stop",
                                text="synthetic " * (tokens // 4), saw_done=True, verdict="complete",
                                correct=rng.random() < 0.9, check_detail="synthetic",
                            ))  # fmt: skip
                        journal.write(CellRecord(
                            arm=arm, block=block, workload=workload, clients=clients, cell=cell,
                            wall_s=per_cell * 2.0 / speed / clients, requests=per_cell,
                            counters={"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0,
                                      "generation_tokens": float(tokens_total),
                                      "journal_completion_tokens": float(tokens_total)},
                        ))  # fmt: skip
    return out_dir
