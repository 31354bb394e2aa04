"""The distribution check under sampling (``specharness sampled``): does speculation change what the model says?

:func:`run_sampled` starts a baseline and an ngram engine and sends every case many times per repetition to each of
the four :data:`STREAMS` (ngram, baseline, an A/A stream, a positive control at another temperature), as its
:class:`SampledDesign` declares; :mod:`specharness.analysis.sampled_stats` compares the streams.
Design: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import ConfigError
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import resolve_model
from specharness.experiment.config import RunConfig
from specharness.experiment.design import build_arms
from specharness.experiment.engineset import EngineSet, plan_engines, running_engines
from specharness.experiment.journal import Journal
from specharness.experiment.rundir import (
    hardware_info,
    harness_provenance,
    harness_version,
    open_run_folder,
    run_segment,
)
from specharness.records import Manifest, RequestRecord, cell_id
from specharness.traffic.client import RequestMeta, Sampling, build_body, send_request
from specharness.traffic.workloads import Case, interleave_by_group, load_workloads

__all__ = ["STREAMS", "SampledDesign", "run_sampled"]

STREAMS = ("baseline", "ngram", "baseline-aa", "baseline-t")
ENGINE_OF = {"baseline": "baseline", "ngram": "ngram", "baseline-aa": "baseline", "baseline-t": "baseline"}


@dataclass(frozen=True, slots=True)
class SampledDesign:
    """The declared design of a distribution check (saved in the manifest before anything is sent)."""

    workloads: tuple[str, ...] = ("copy", "free")
    cases_per_workload: int = 4
    samples: int = 16  # per case, stream and repetition
    repetitions: int = 5
    temperature: float = 0.8
    top_p: float = 0.95
    control_temperature: float = 1.2
    max_tokens: int = 48
    clients: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        rules = [
            ("--cases", self.cases_per_workload >= 1, "at least 1"),
            ("--samples", self.samples >= 2, "at least 2"),
            ("--repetitions", self.repetitions >= 1, "at least 1"),
            ("--temperature", self.temperature > 0, "above 0 (the check is about sampling)"),
            ("--top-p", 0 < self.top_p <= 1, "in (0, 1]"),
            (
                "--control-temperature",
                self.control_temperature > 0 and self.control_temperature != self.temperature,
                "above 0 and not the run's temperature (it is the positive control)",
            ),
            ("--max-tokens", self.max_tokens >= 1, "at least 1"),
            ("--clients", self.clients >= 1, "at least 1"),
        ]
        for flag, ok, need in rules:
            if not ok:
                raise ConfigError(f"{flag}: must be {need}")

    def requests(self) -> int:
        return self.repetitions * len(self.workloads) * self.cases_per_workload * len(STREAMS) * self.samples


def request_seed(base: int, repetition: int, stream: str, case_id: str, sample: int) -> int:
    """A distinct, reproducible seed per request (31 bits: vLLM takes any int)."""
    text = json.dumps(["specharness-sampled-v1", base, repetition, stream, case_id, sample])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1


def run_sampled(config: RunConfig, design: SampledDesign, say: Any = print) -> Path:
    """Run the distribution check into ``config.out_dir`` (journal + manifest); returns the folder."""
    out = config.out_dir
    open_run_folder(out, resume=False)
    workloads = load_workloads(list(design.workloads))
    cases = {w.name: list(interleave_by_group(w.cases))[: design.cases_per_workload] for w in workloads}
    model = resolve_model(config.model)
    manifest = Manifest(
        kind="sampled",
        design=asdict(design),
        streams={s: ENGINE_OF[s] for s in STREAMS},
        config=config.to_dict(),
        harness_commit=harness_provenance(),
        harness_version=harness_version(),
        hardware=hardware_info(MemoryProbe()),
        model={"name": model.name, "sha256": model.revision_sha256, "origin": model.origin},
        workloads={name: {"cases": [c.id for c in cs]} for name, cs in cases.items()},
    )
    config = replace(config, profile=replace(config.profile, arms=("baseline", "ngram"), workloads=design.workloads))
    with run_segment(out, manifest, segment=0, resume=False, done=set(), fsync=config.fsync) as folder:
        say(f"starting 2 engines; {design.requests()} sampled requests to send")
        plan = plan_engines(config, build_arms(config.profile), model, say)
        with running_engines(plan, folder) as engines:
            for repetition in range(design.repetitions):
                t0 = time.perf_counter()
                asyncio.run(_repetition(config, engines, design, cases, repetition, folder.journal))
                say(f"repetition {repetition + 1}/{design.repetitions}: {time.perf_counter() - t0:.0f} s")
    return out


async def _repetition(
    config: RunConfig,
    engines: EngineSet,
    design: SampledDesign,
    cases: dict[str, list[Case]],
    repetition: int,
    journal: Journal,
) -> None:
    jobs = [
        (workload, case, stream, i)
        for workload, cs in cases.items()
        for case in cs
        for stream in STREAMS
        for i in range(design.samples)
    ]
    random.Random(f"{design.seed}/{repetition}").shuffle(jobs)
    slots = asyncio.Semaphore(design.clients)
    timeout = httpx.Timeout(config.request_timeout_s, connect=10.0)
    limits = httpx.Limits(max_connections=design.clients + 4, max_keepalive_connections=design.clients + 4)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:

        async def one(workload: str, case: Case, stream: str, sample: int) -> None:
            async with slots:
                server = engines.servers[ENGINE_OF[stream]]
                temperature = design.control_temperature if stream == "baseline-t" else design.temperature
                seed = request_seed(design.seed, repetition, stream, case.id, sample)
                sampling = Sampling(
                    temperature=temperature, top_p=design.top_p, seed=seed, max_tokens_cap=design.max_tokens
                )
                cell = cell_id(f"rep{repetition}/{workload}/{stream}", 0)
                meta = RequestMeta(
                    arm=stream,
                    block=repetition,
                    workload=workload,
                    clients=design.clients,
                    warmup=False,
                    cell=cell,
                    seq=sample,
                )
                body = build_body(case, engines.model_name, sampling)
                await send_request(
                    client,
                    server.base_url,
                    case,
                    body,
                    meta,
                    journal.write,
                    timeout_s=config.request_timeout_s,
                    headers=engines.headers(),
                )

        await asyncio.gather(*(one(*job) for job in jobs))


def read_samples(records: list[RequestRecord]) -> dict[tuple[int, str, str], list[RequestRecord]]:
    """(repetition, workload, stream) -> its request records."""
    out: dict[tuple[int, str, str], list[RequestRecord]] = {}
    for r in records:
        out.setdefault((r.block, r.workload, r.arm), []).append(r)
    return out
