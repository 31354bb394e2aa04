"""SYNTHETIC run folders for testing the report path (``specharness report``) — never measurements.

``write_synthetic_run(dir, records)`` writes a manifest and a journal of made-up requests with the shape of a run of
the given profile: every block sends the same cases, arm orders follow the profile's mirrored plan, and each case's
output is the same in every arm (same token ids), so the same-work comparison applies. Arm ``ngram`` streams
``ngram_speed`` times faster; every other arm runs at speed 1 (a slowed twin such as ``baseline-slow`` at 1 / its
known slowdown).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from specharness.experiment.config import RunConfig
from specharness.experiment.design import Profile, build_arms, get_profile, override
from specharness.experiment.journal import Journal
from specharness.experiment.machine_record import RECORD_MODEL
from specharness.experiment.plan import block_orders
from specharness.experiment.rundir import JOURNAL, write_manifest
from specharness.records import CellRecord, Manifest, RequestRecord, cell_id, cell_key, load_label

__all__ = ["write_synthetic_run"]


# The machine a synthetic run says it ran on: the 2-core Xeon of the CPU A/A record, so that its band and identity
# record are a recorded machine's (experiment.bands, experiment.aa_identity).
SYNTHETIC_HARDWARE = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_count": 2, "gpus": []}


def write_synthetic_run(
    out_dir: Path,
    records: int,
    seed: int = 7,
    profile_name: str = "standard",
    ngram_speed: float = 2.0,
    profile: Profile | None = None,
    instance_sd: float = 0.0,
) -> Path:
    """``profile`` (default: the named one) may declare arms; a twin with a ``client_slowdown`` runs that much slower.
    ``instance_sd``: each engine instance of each arm runs exp(N(0, instance_sd)) times its arm's speed (an
    engine-instance offset), its cells journaled with their instance (the profile's ``instances``)."""
    rng = random.Random(seed)
    base: Profile = profile or get_profile(profile_name)
    per_cell = max(1, records // (base.blocks * len(base.workloads) * len(base.clients) * len(base.arms)))
    profile = override(
        base, requests_per_cell=per_cell, warmups_per_cell=0, equivalence_margin=0.10, band_source="synthetic"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    config = RunConfig(profile=profile, out_dir=out_dir)
    orders = block_orders(profile.arms, profile.blocks, profile.order_seed)
    by_block = {str(b): list(o) for b, o in enumerate(orders)}
    manifest = Manifest(
        config=config.to_dict(),
        status="complete",
        synthetic=True,
        model={"name": RECORD_MODEL, "origin": "synthetic"},  # the model the Xeon's record is of
        block_orders=by_block,
        hardware=dict(SYNTHETIC_HARDWARE),
    )
    write_manifest(out_dir, manifest)
    case_tokens = [rng.randint(20, 120) for _ in range(per_cell)]
    speeds = {"ngram": ngram_speed, **{a.name: 1.0 / a.client_slowdown for a in build_arms(profile) if a.twin_of}}
    offsets = {
        (arm, i): math.exp(rng.gauss(0.0, instance_sd)) for arm in profile.arms for i in range(profile.instances)
    }
    clock = 0.0
    with Journal(out_dir / JOURNAL, fsync=False) as journal:
        for block in range(profile.blocks):
            for workload in profile.workloads:
                for clients in profile.clients:
                    for order_index, arm in enumerate(orders[block]):
                        cell = cell_id(cell_key(block, workload, load_label(clients), arm), 0)
                        instance = profile.instance_of_block(block)
                        speed = speeds.get(arm, 1.0) * offsets[(arm, instance)] * rng.uniform(0.97, 1.03)
                        tokens_total, start = 0, clock
                        for seq in range(per_cell):
                            tokens = case_tokens[seq]
                            gap = 0.03 / speed * rng.uniform(0.9, 1.1)
                            arrivals = [0.05 + gap * i for i in range(tokens)]
                            tokens_total += tokens
                            journal.write(
                                RequestRecord(
                                    arm=arm,
                                    block=block,
                                    workload=workload,
                                    group="g",
                                    case_id=f"c{seq}",
                                    clients=clients,
                                    warmup=False,
                                    cell=cell,
                                    seq=seq,
                                    started_unix_s=0.0,
                                    send_s=clock,
                                    chunk_arrival_s=arrivals,
                                    chunk_tokens=[1] * tokens,
                                    ttft_s=arrivals[0],
                                    e2e_s=arrivals[-1] + 0.001,
                                    completion_tokens=tokens,
                                    finish_reason="stop",
                                    text=f"synthetic output of case {seq}",
                                    saw_done=True,
                                    verdict="complete",
                                    correct=(seq % 10) != 0,
                                    check_detail="synthetic",
                                    output_digest=f"case-{seq}",
                                )
                            )
                            clock += (arrivals[-1] + 0.001) / clients
                        journal.write(
                            CellRecord(
                                arm=arm,
                                block=block,
                                workload=workload,
                                clients=clients,
                                cell=cell,
                                wall_s=clock - start,
                                requests=per_cell,
                                order_index=order_index,
                                instance=instance,
                                counters={
                                    "drafts": 0.0,
                                    "draft_tokens": 0.0,
                                    "accepted_tokens": 0.0,
                                    "generation_tokens": float(tokens_total),
                                    "journal_completion_tokens": float(tokens_total),
                                },
                            )
                        )
    return out_dir
