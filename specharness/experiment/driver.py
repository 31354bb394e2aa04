"""Run a paired experiment: start every arm's engine once, walk the cell plan, journal everything.

Every request is journaled the moment it ends (failures and cancellations too). A cell whose engine died is
journaled as invalid and the run stops; ``resume`` later finishes only the cells that have no valid record.
SIGINT and SIGTERM stop the run, cancel in-flight requests (journaled as ``cancelled``), stop every engine and
write a partial report.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import ConfigError, EngineDied, RunDirError
from specharness.engines.attached import AttachedEngine, check_speculation
from specharness.engines.counters import CounterSnapshot, acceptance_figures, reconcile_tokens, scrape
from specharness.engines.memory import MemoryProbe, PeakSampler
from specharness.engines.model import cache_dir, resolve_model
from specharness.engines.server import EngineServer, EngineSettings, stop_all
from specharness.experiment.bands import band_for
from specharness.experiment.config import RunConfig
from specharness.experiment.design import (
    BLOCKS_PER_LOOK,
    CellPlan,
    Load,
    block_orders,
    build_arms,
    plan_cells,
    sweep_rates,
    validate_profile,
    warm_round,
)
from specharness.experiment.journal import Journal
from specharness.experiment.rundir import (
    JOURNAL,
    completed_cells,
    hardware_info,
    harness_commit,
    harness_version,
    read_manifest,
    write_manifest,
)
from specharness.experiment.telemetry import TextPolicy, run_salt
from specharness.records import SCHEMA_VERSION, CellRecord, EngineRecord, RequestRecord, cell_id
from specharness.traffic.arrivals import ArrivalSpec, block_seed, schedule
from specharness.traffic.client import RequestMeta, build_body, send_request
from specharness.traffic.openloop import run_open_loop
from specharness.traffic.replay import replay_conversation, skipped_record
from specharness.traffic.workloads import (
    Case,
    Workload,
    case_to_dict,
    interleave_by_group,
    load_workloads,
    warmup_cases,
)

__all__ = ["run_experiment"]


ProgressFn = Callable[[int], None]
UndecidedFn = Callable[[Path], set[tuple[str, str]]]  # run folder -> (workload, load label) cells still undecided
WARMUP_SEED_OFFSET = 1_000_003  # warmup schedules draw from other seeds than the measured ones


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt for the run, so teardown and the partial report happen."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def slowed(record: RequestRecord, factor: float) -> RequestRecord:
    """The record as if the request had taken ``factor`` times as long: TTFT, chunk arrivals and end-to-end time
    scaled alike, so TPOT and the same-work ratio move by exactly ``factor`` at any concurrency (the engine's load
    is untouched: only what the control arm reports changes). Failed requests keep their NaN times."""
    return replace(record, ttft_s=record.ttft_s * factor, e2e_s=record.e2e_s * factor,
                   chunk_arrival_s=[t * factor for t in record.chunk_arrival_s])  # fmt: skip


class _Experiment:
    """State of one run segment (a first run or a resume)."""

    def __init__(self, config: RunConfig, workloads: list[Workload], segment: int, done: set[str],
                 journal: Journal, progress: ProgressFn | None, manifest: dict[str, Any]) -> None:  # fmt: skip
        self.config = config
        self.manifest = manifest  # the run's manifest, rewritten when the sweep's rates are resolved
        # plan by workload name: the profile may list a user workload by its file path
        self.profile = replace(config.profile, workloads=tuple(w.name for w in workloads))
        self.workloads = {w.name: w for w in workloads}
        self.sequences = {w.name: interleave_by_group(w.cases) for w in workloads}
        self.segment = segment
        self.done = done
        self.journal = journal
        self.progress = progress
        self.probe = MemoryProbe()
        self.servers: dict[str, EngineServer | AttachedEngine] = {}
        self.model_name = "model"
        self._last_cpu_s = float("nan")
        self._last_delivery: dict[str, float | bool] = {}

    def attach_engines(self) -> str:
        """Engines started elsewhere (``--attach``): wait for each URL's /health, read its version and served model;
        nothing is started, and :meth:`stop` leaves them running. Returns the served model's name."""
        c = self.config
        engines = []
        for arm in build_arms(self.profile):
            engine = AttachedEngine(arm, c.attach[arm.name], c.out_dir / "logs" / f"{arm.name}.s{self.segment}.log",
                                    api_key=c.api_key, start_timeout_s=c.start_timeout_s)  # fmt: skip
            engine.spawn()
            self.servers[arm.name] = engine
            engines.append(engine)
        models = set()
        for engine in engines:
            engine.wait_ready()
            models.add(engine.served_model())
            warning = check_speculation(engine, engine.arm.speculative_config is not None)
            if warning:  # a swapped or mis-set URL would invert every verdict: refuse before measuring anything
                self.journal.write({"kind": "attach_warning", "schema": SCHEMA_VERSION, "arm": engine.arm.name,
                                    "message": warning})  # fmt: skip
                raise ConfigError(f"--attach {engine.arm.name}={engine.base_url}: {warning}; check the URLs")
            self.journal.write(EngineRecord(
                arm=engine.arm.name, command=[], log_path=str(engine.log_path.relative_to(c.out_dir)),
                port=engine.port, vllm_version=engine.version, start_s=engine.start_s, pid=-1,
                async_scheduling=None, speculative_config=engine.arm.speculative_config,
                effective_settings=engine.effective_settings(), memory={},
            ))  # fmt: skip
        if len(models) != 1:
            raise ConfigError(f"--attach: the engines serve different models ({', '.join(sorted(models))}); a paired "
                              "comparison needs the same model behind every URL")  # fmt: skip
        self.model_name = models.pop()
        return self.model_name

    def start_engines(self, model_path: str, model_name: str) -> None:
        self.model_name = model_name
        c = self.config
        settings = EngineSettings(
            model_path=model_path, served_model_name=model_name, host=c.host, port=c.port,
            max_model_len=c.max_model_len, seed=c.sampling.seed or 0, kv_cache_gib=c.kv_cache_gib,
            gpu_memory_utilization=c.gpu_memory_utilization, api_key=c.api_key,
            extra_args=c.extra_engine_args, start_timeout_s=c.start_timeout_s,
        )  # fmt: skip
        if c.python:
            settings = replace(settings, python=c.python)
        before = self.probe.as_fields("before_start", [])
        arms = build_arms(self.profile)
        started: dict[str, EngineServer] = {}
        for arm in arms:  # spawn every engine first, so their starts overlap
            if c.port:
                settings = replace(settings, port=c.port + len(self.servers))
            server = EngineServer(settings, arm, c.out_dir / "logs" / f"{arm.name}.s{self.segment}.log")
            self.servers[arm.name] = started[arm.name] = server
            server.on_spawn = lambda pid, name=arm.name: self.journal.write(
                {"kind": "engine_spawned", "schema": SCHEMA_VERSION, "arm": name, "pid": pid, "segment": self.segment}
            )
            server.spawn()
            if not c.start_together:
                server.wait_ready()
        for arm in arms:
            server = started[arm.name]
            server.wait_ready()  # returns at once for a server that is already up
            effective = server.effective_settings()
            memory = {**before, **self.probe.as_fields("engine_ready", server.pids())}
            self.journal.write(EngineRecord(
                arm=arm.name, command=server.command, log_path=str(server.log_path.relative_to(c.out_dir)),
                port=server.port, vllm_version=server.version, start_s=server.start_s, pid=server.process.pid
                if server.process else -1, async_scheduling=effective.get("async_scheduling"),
                speculative_config=arm.speculative_config, effective_settings=effective, memory=memory,
            ))  # fmt: skip

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}

    def cell_cases(self, plan: CellPlan) -> tuple[list[Case], list[Case]]:
        """The measured cases (the same in every block) and the warmup cases: one round per warmup, one request per
        client, drawn from cases the run never measures (or neutral prompts when every case is measured)."""
        cases = self.sequences[plan.workload]
        p = self.profile
        measured = [cases[i % len(cases)] for i in range(p.requests_per_cell)]
        spare = list(cases[p.requests_per_cell:]) or list(warmup_cases())
        warm = [spare[i % len(spare)] for i in range(p.warmups_per_cell * warm_round(plan.load))]
        return measured, warm

    async def _run_requests(self, server: EngineServer | AttachedEngine, plan: CellPlan, arm: str, cases: list[Case], warmup: bool,
                            client: httpx.AsyncClient) -> list[RequestRecord]:  # fmt: skip
        """Send the cases at the cell's load: a closed loop of ``clients`` workers, or an open loop on the block's
        arrival schedule (the same for every arm of the block). Open loop: the delivery figures go to
        ``self._last_delivery``. A replayed conversation (a case with ``turns``) occupies its worker, or its open-loop
        slot, from its first turn to its last (:func:`~specharness.traffic.replay.replay_conversation`); the
        schedule and the delivery figures are per case, i.e. per conversation start."""
        records: list[RequestRecord] = []
        this_cell = cell_id(plan.key(arm), self.segment)
        slowdown = server.arm.client_slowdown
        load = plan.load

        def sink(record: RequestRecord) -> None:
            if self.segment:
                record = replace(record, resumed=True)
            if slowdown > 1:  # the known-effect control: every recorded time taken `slowdown` times as long
                record = slowed(record, slowdown)
            self.journal.write(record)
            records.append(record)

        async def send(seq: int, case: Case, scheduled_s: float = float("nan"), lateness_s: float = float("nan")) -> None:
            """One case: one request, or a replayed conversation turn by turn (all its turns share ``seq``; only
            turn 1 has a scheduled send, the later ones go out when the previous answer ends)."""

            def meta(turn: int) -> RequestMeta:
                first = turn == 1
                return RequestMeta(arm=arm, block=plan.block, workload=plan.workload, clients=plan.clients,
                                   warmup=warmup, cell=this_cell, seq=seq, rate=load.rate,
                                   scheduled_s=scheduled_s if first else float("nan"),
                                   send_lateness_s=lateness_s if first else float("nan"))  # fmt: skip

            async def send_turn(request: Case, turn: int) -> RequestRecord:
                body = build_body(request, self.model_name, self.config.sampling)
                return await send_request(client, server.base_url, request, body, meta(turn), sink,
                                          timeout_s=self.config.request_timeout_s, headers=self.headers())  # fmt: skip

            def skip_turn(request: Case, turn: int) -> None:
                sink(skipped_record(request, meta(turn)))

            await replay_conversation(case, send_turn, skip_turn)
            if self.progress and not warmup:  # progress counts cases (a conversation once), as the profile does
                self.progress(1)

        if load.open_loop:
            stats = await run_open_loop(cases, self.arrivals(plan, len(cases), warmup), send,
                                        max_concurrency=self.profile.max_concurrency,
                                        late_tolerance_s=self.profile.late_tolerance_s,
                                        min_on_time_fraction=self.profile.min_on_time_fraction)  # fmt: skip
            if not warmup:
                self._last_delivery = stats.figures()
            return records

        queue: asyncio.Queue[tuple[int, Case]] = asyncio.Queue()
        for seq, case in enumerate(cases):
            queue.put_nowait((seq, case))

        async def worker() -> None:
            while True:
                try:
                    seq, case = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await send(seq, case)

        await asyncio.gather(*(worker() for _ in range(min(plan.clients, len(cases)))))
        return records

    def arrivals(self, plan: CellPlan, n: int, warmup: bool) -> tuple[float, ...]:
        """The send offsets of an open-loop cell: drawn from the block's seed, so every arm of the block gets the
        identical schedule (and every block, workload and rate its own)."""
        p = self.profile
        rate = float(plan.load.rate)
        seed = block_seed(p.arrival_seed, plan.block + (WARMUP_SEED_OFFSET if warmup else 0), plan.workload, rate)
        return schedule(ArrivalSpec(rate, burstiness=p.burstiness, seed=seed, max_concurrency=p.max_concurrency), n)

    def run_cell(self, plan: CellPlan, arm: str) -> CellRecord:
        server = self.servers[arm]
        measured_cases, warm_cases = self.cell_cases(plan)
        if plan.load.open_loop:  # an open loop never waits for a connection: no pool limit unless a cap is set
            cap = self.profile.max_concurrency
            limits = httpx.Limits(max_connections=cap + 4 if cap else None, max_keepalive_connections=cap + 4 if cap else None)
        else:
            limits = httpx.Limits(max_connections=plan.clients + 4, max_keepalive_connections=plan.clients + 4)
        self._last_delivery = {}
        timeout = httpx.Timeout(self.config.request_timeout_s, connect=10.0)
        reset = self.profile.prefix_caching == "reset"

        async def go() -> tuple[list[RequestRecord], float, CounterSnapshot, CounterSnapshot, dict[str, float]]:
            task = asyncio.current_task()
            if task is not None:
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
            async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
                if reset:
                    reply = await client.post(server.base_url + "/reset_prefix_cache", headers=self.headers())
                    if reply.status_code != 200:
                        raise ConfigError(f"--prefix-caching reset: the {arm} engine answered /reset_prefix_cache with "
                                          f"HTTP {reply.status_code}; it needs vLLM's dev endpoints (a loopback --host)")  # fmt: skip
                if warm_cases:
                    await self._run_requests(server, plan, arm, warm_cases, True, client)
                mem_warm = self.probe.as_fields("after_warmup", server.pids())
                before = await asyncio.to_thread(scrape, server.base_url, self.headers())
                t0, cpu0 = time.perf_counter(), time.process_time()
                records = await self._run_requests(server, plan, arm, measured_cases, False, client)
                wall = time.perf_counter() - t0
                self._last_cpu_s = time.process_time() - cpu0
                after = await asyncio.to_thread(scrape, server.base_url, self.headers()) if server.alive() else before
                return records, wall, before, after, mem_warm

        sampler = PeakSampler(self.probe, server.pids())
        sampler.start()
        term_handler = signal.getsignal(signal.SIGTERM)
        try:
            records, wall, before, after, mem_warm = asyncio.run(go())
        except asyncio.CancelledError:
            raise KeyboardInterrupt("SIGTERM") from None
        except httpx.HTTPError as exc:
            return self._dead_cell(plan, arm, f"{arm} engine stopped answering ({server.exit_status()}): {exc}")
        finally:
            peak = sampler.stop()
            signal.signal(signal.SIGTERM, term_handler)  # the event loop resets it on close
        if not server.alive():
            return self._dead_cell(plan, arm, f"{arm} engine died during the cell ({server.exit_status()}); last log line: {server.log_tail()}")
        delta = after.minus(before)
        figures = acceptance_figures(delta.totals)
        journal_tokens = sum(r.completion_tokens or 0 for r in records)
        counters = {
            "drafts": figures["drafts"], "draft_tokens": figures["draft_tokens"],
            "accepted_tokens": figures["accepted_tokens"], "generation_tokens": figures["generation_tokens"],
            "journal_completion_tokens": float(journal_tokens),
            "prefix_cache_queries": figures["prefix_cache_queries"], "prefix_cache_hits": figures["prefix_cache_hits"],
        }  # fmt: skip
        per_request = [r.spec_draft_tokens for r in records if r.spec_draft_tokens is not None]
        if per_request:
            counters["journal_spec_draft_tokens"] = float(sum(per_request))
            counters["journal_spec_accepted_tokens"] = float(sum(r.spec_accepted_tokens or 0 for r in records))
        mismatch = reconcile_tokens(figures["generation_tokens"], journal_tokens)
        if mismatch:
            self.journal.write({"kind": "mismatch", "schema": SCHEMA_VERSION, "cell": plan.key(arm), "message": mismatch})
        cell = CellRecord(
            arm=arm, block=plan.block, workload=plan.workload, clients=plan.clients,
            cell=cell_id(plan.key(arm), self.segment), wall_s=wall, requests=len(records),
            harness_cpu_s=self._last_cpu_s, counters=counters,
            accepted_per_position=delta.accepted_per_position, memory={**mem_warm, **peak},
            resumed=self.segment > 0, order_index=plan.arm_order.index(arm), rate=plan.load.rate,
            delivery=self._last_delivery,
        )  # fmt: skip
        self.journal.write(cell)
        return cell

    def _dead_cell(self, plan: CellPlan, arm: str, reason: str) -> CellRecord:
        cell = CellRecord(arm=arm, block=plan.block, workload=plan.workload, clients=plan.clients,
                          cell=cell_id(plan.key(arm), self.segment), wall_s=float("nan"), requests=0, valid=False,
                          invalid_reason=reason, resumed=self.segment > 0, rate=plan.load.rate)  # fmt: skip
        self.journal.write(cell)
        return cell

    def _run_plans(self, plans: list[CellPlan]) -> None:
        for plan in plans:
            for arm in plan.arm_order:
                if plan.key(arm) in self.done:
                    continue
                cell = self.run_cell(plan, arm)
                if not cell.valid:
                    raise EngineDied(f"{cell.invalid_reason}; the run stopped; finish it with "
                                     f"'specharness run --resume {self.config.out_dir}'")  # fmt: skip
                self.done.add(plan.key(arm))

    def run_plan(self, undecided: UndecidedFn | None) -> None:
        """The declared blocks; then, with --until-decided, two more blocks (a mirrored pair) at a time for the
        cells ``undecided`` names, up to --max-blocks. Every look is journaled."""
        if self.profile.sweep_levels:
            self.resolve_sweep()
        p = self.profile
        self._run_plans(plan_cells(p))
        if not p.until_decided or undecided is None or p.max_blocks is None:
            return
        blocks = p.blocks
        while blocks < p.max_blocks:
            open_cells = undecided(self.config.out_dir)
            self.journal.write({"kind": "look", "schema": SCHEMA_VERSION, "blocks": blocks,
                                "undecided": sorted(f"{w}/{load}" for w, load in open_cells)})  # fmt: skip
            if not open_cells:
                return
            more = [plan for plan in plan_cells(p, range(blocks, blocks + BLOCKS_PER_LOOK))
                    if (plan.workload, plan.load.label) in open_cells]  # fmt: skip
            self._run_plans(more)
            blocks += BLOCKS_PER_LOOK
        self.journal.write({"kind": "look", "schema": SCHEMA_VERSION, "blocks": blocks,
                            "undecided": sorted(f"{w}/{load}" for w, load in undecided(self.config.out_dir))})  # fmt: skip

    def resolve_sweep(self) -> None:
        """A sweep's open-loop rates, per workload: each arm's peak request rate is probed (all of a cell's
        requests at once, after a warmup round; journaled as warmup, so never analysed), then the levels are taken
        of the reference arm's peak (:func:`~specharness.experiment.design.sweep_rates`). The rates are journaled
        and saved in the manifest, so a resumed run keeps them."""
        p = self.profile
        resolved = dict(p.workload_rates)
        if "baseline" not in p.arms:
            raise ConfigError("specharness sweep: the levels are multiples of the baseline's peak; include baseline in --arms")
        reference = "baseline"
        for workload in p.workloads:
            if workload in resolved:
                continue
            peaks: dict[str, float] = {}
            probe = CellPlan(-1, workload, Load(0, "inf"), p.arms)
            measured, warm = self.cell_cases(probe)
            for arm in p.arms:
                peaks[arm] = self.probe_peak(probe, arm, measured, warm)
            rates = sweep_rates(p.sweep_levels, peaks[reference])
            resolved[workload] = rates
            self.journal.write({"kind": "sweep_plan", "schema": SCHEMA_VERSION, "workload": workload,
                                "reference_arm": reference, "peak_rps": peaks, "levels": list(p.sweep_levels),
                                "rates": list(rates)})  # fmt: skip
        self.profile = replace(p, workload_rates=resolved)
        self.manifest["config"]["profile"]["workload_rates"] = {w: list(r) for w, r in resolved.items()}
        write_manifest(self.config.out_dir, self.manifest)

    def probe_peak(self, probe: CellPlan, arm: str, measured: list[Case], warm: list[Case]) -> float:
        """One arm's peak request rate: a warmup round, then every measured case at once; completed requests per
        second of the burst. Journaled as warmup requests and a ``peak_probe`` event."""
        server = self.servers[arm]

        async def go() -> tuple[list[RequestRecord], float]:
            timeout = httpx.Timeout(self.config.request_timeout_s, connect=10.0)
            async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None)) as client:
                await self._run_requests(server, probe, arm, warm, True, client)
                t0 = time.perf_counter()
                records = await self._run_requests(server, probe, arm, measured, True, client)
                return records, time.perf_counter() - t0

        records, wall = asyncio.run(go())
        # conversations (a replayed case journals one record per turn) that completed, per second
        ok = len({r.seq for r in records}) - len({r.seq for r in records if r.error_kind is not None})
        peak = ok / wall if wall > 0 else float("nan")
        self.journal.write({"kind": "peak_probe", "schema": SCHEMA_VERSION, "workload": probe.workload, "arm": arm,
                            "requests": len(records), "ok": ok, "wall_s": wall, "peak_rps": peak})  # fmt: skip
        return peak

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


def run_experiment(config: RunConfig, *, resume: bool = False, progress: ProgressFn | None = None,
                   on_status: Callable[[str], None] | None = None,
                   on_finish: Callable[[Path], object] | None = None,
                   undecided: UndecidedFn | None = None) -> Path:  # fmt: skip
    """Run (or resume) an experiment; ``on_finish(run_dir)`` runs at the end even after a failure (the report);
    ``undecided(run_dir)`` names the cells --until-decided keeps adding blocks to. Returns the run folder."""
    say = on_status or (lambda _msg: None)
    validate_profile(config.profile)
    workloads = load_workloads(list(config.profile.workloads))
    out = config.out_dir
    if resume:
        manifest = read_manifest(out)
        done, segment = completed_cells(out)
    else:
        if (out / JOURNAL).exists():
            raise RunDirError(f"{out} already holds a run; pass --resume {out} to finish it or choose another --out")
        out.mkdir(parents=True, exist_ok=True)
        manifest = {}
        done, segment = set(), 0
    probe = MemoryProbe()
    hardware = hardware_info(probe)
    if config.profile.equivalence_margin is None:  # declared before the run: the machine's band from its own A/A
        band = band_for(hardware)
        config = replace(config, profile=replace(config.profile, equivalence_margin=band.margin, band_source=band.source))
    # one salt for the run (and its resumes), kept outside the run folder
    policy = TextPolicy(config.keep_text, run_salt(out, cache_dir())) if config.keep_text != "full" else TextPolicy()
    policy.check_engine_args(config.extra_engine_args)
    manifest.update({
        "harness": "specharness", "schema": SCHEMA_VERSION, "config": config.to_dict(), "harness_commit": harness_commit(),
        "harness_version": harness_version(),
        "block_orders": {str(b): list(o) for b, o in enumerate(block_orders(config.profile.arms, config.profile.max_blocks or config.profile.blocks, config.profile.order_seed))},
        "hardware": hardware,
        "workloads": {w.name: {"source": w.source, "cases": [policy.case(case_to_dict(c)) for c in w.cases]}
                      for w in workloads},
        "status": "running",
    })  # fmt: skip
    if config.attach:  # the engines run elsewhere: the model is whatever they serve (named once they answer)
        manifest["attached"] = dict(config.attach)
        manifest.setdefault("model", {"name": "(read from the attached engines)", "origin": "attached"})
    else:
        model = resolve_model(config.model)
        manifest["model"] = {"name": model.name, "path": str(model.serve_path), "source": str(model.source_path),
                             "sha256": model.revision_sha256, "origin": model.origin}  # fmt: skip
    manifest.setdefault("started_unix_s", time.time())
    manifest.setdefault("segments", []).append({"segment": segment, "started_unix_s": time.time(), "resume": resume})
    write_manifest(out, manifest)
    status = "interrupted"
    error: BaseException | None = None
    with Journal(out / JOURNAL, fsync=config.fsync, policy=policy) as journal, _sigterm_as_interrupt():
        journal.write({"kind": "segment", "schema": SCHEMA_VERSION, "segment": segment, "resume": resume,
                       "started_unix_s": time.time(), "skipped_cells": sorted(done)})  # fmt: skip
        experiment = _Experiment(config, workloads, segment, done, journal, progress, manifest)
        try:
            if config.attach:
                say("attaching to " + ", ".join(f"{a} at {u}" for a, u in config.attach.items()))
                served = experiment.attach_engines()
                manifest["model"] = {"name": served, "origin": "attached", "served_by": dict(config.attach)}
                write_manifest(out, manifest)
                say(f"engines answering, serving {served}; nothing will be started or stopped")
            else:
                say(f"starting {len(config.profile.arms)} engines ({', '.join(config.profile.arms)})")
                experiment.start_engines(str(model.serve_path), "smollm2" if model.origin == "embedded-default" else model.name)
                say("engines ready: " + ", ".join(f"{a} {s.start_s:.0f} s" for a, s in experiment.servers.items()))
            experiment.run_plan(undecided)
            status = "complete"
        except KeyboardInterrupt as exc:
            status, error = "interrupted", exc
        except EngineDied as exc:
            status, error = "engine-died", exc
        except BaseException as exc:
            status, error = "failed", exc
        finally:
            experiment.stop()
            stop_all()
            journal.write({"kind": "segment_end", "schema": SCHEMA_VERSION, "segment": segment, "status": status,
                           "ended_unix_s": time.time(), "error": str(error) if error else ""})  # fmt: skip
    manifest["status"] = status
    manifest["ended_unix_s"] = time.time()
    manifest["segments"][-1].update({"ended_unix_s": time.time(), "status": status})
    write_manifest(out, manifest)
    if on_finish is not None:
        on_finish(out)
    if error is not None:
        raise error
    return out
