"""A kind of machine's A/A record as data: its band and engine-instance offset allowance, and its A/A identity records.

One JSON file a kind of machine (:func:`specharness.experiment.bands.machine_kind`): the package's own in
``experiment/aa_records/``, and a user's in the folder ``SPECHARNESS_MACHINE_RECORDS`` names, whose record of a kind
replaces the package's. ``specharness aa-record RUN...`` writes one from A/A runs made on the machine; nothing else
changes for a run to use it (:func:`~specharness.experiment.bands.band_for`,
:func:`~specharness.experiment.aa_identity.aa_identity_for`). Format and rules: docs/method.md#machine-records.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError

__all__ = [
    "BAND_FLOOR",
    "PACKAGED_RECORDS",
    "RECORDS_ENV",
    "RECORD_MODEL",
    "AAIdentity",
    "Band",
    "MachineRecord",
    "band_from_offset",
    "load_record",
    "machine_records",
    "record_file_name",
    "record_json",
    "records_folder",
    "write_record",
]

RECORD_MODEL = "SmolLM2-135M-Instruct"  # the packaged default model: every record before "model" was of its runs

PACKAGED_RECORDS = Path(__file__).with_name("aa_records")
RECORDS_ENV = "SPECHARNESS_MACHINE_RECORDS"
FORMAT = 1
BAND_FLOOR = 0.10  # the practical no-difference margin a band never goes under


@dataclass(frozen=True, slots=True)
class Band:
    """The no-difference band of a kind of machine and the engine-instance offset allowance its speed intervals add."""

    margin: float
    source: str
    offset_sd_upper: float = 0.0  # engine-instance offset sd (log scale), 95% upper limit from the A/A record
    aa_runs: int = 0
    memory_sd_upper: float = math.nan  # the same for the servers' peak RSS (NaN: not recorded)
    # the speed offset a run's mean over all its cells carries (sigma_run² + sigma_cell² / cells, 95% upper limit;
    # NaN: not recorded, and the over-all-cells interval adds the per-cell allowance, which is larger)
    over_cells_sd_upper: float = math.nan
    offset_sd: float = math.nan  # the per-cell offset's point estimate beside its upper limit (NaN: not recorded)

    @property
    def offset_estimate_var(self) -> float:
        """The offset variance at its point estimate: what a run's estimate truly varies by, for power (the
        interval adds the upper limit); the upper limit where no estimate is recorded."""
        return self.offset_sd**2 if math.isfinite(self.offset_sd) else self.offset_var

    @property
    def over_cells_var(self) -> float:
        """The offset variance the over-all-cells interval adds: the record's own, else the per-cell one."""
        return self.over_cells_sd_upper**2 if math.isfinite(self.over_cells_sd_upper) else self.offset_var

    @property
    def offset_var(self) -> float:
        """The offset variance a speed interval adds."""
        return self.offset_sd_upper**2

    @property
    def memory_var(self) -> float:
        """The offset variance a peak-memory interval adds (NaN: the record holds none)."""
        return self.memory_sd_upper**2


@dataclass(frozen=True, slots=True)
class AAIdentity:
    """Identical greedy outputs of an A/A pair (an engine against its identical twin) at one client count on one kind
    of machine."""

    kind: str  # the machine kind (bands.machine_kind)
    clients: int
    identical_pairs: int
    pairs: int
    case_counts: tuple[tuple[int, int, int], ...]  # (identical pairs, pairs, prompts with those counts)
    runs: tuple[str, ...]  # the A/A run folders it came from
    source: str  # machine, engine, workloads and cap, where the runs are
    max_output_tokens: int = 0  # the longest baseline output in the record's pairs

    @property
    def cases(self) -> int:
        return sum(n for _, _, n in self.case_counts)

    def case_shares(self) -> list[float]:
        """Each prompt's share of identical pairs (one value per prompt: the unit of the test)."""
        return [same / total for same, total, n in self.case_counts for _ in range(n) if total]

    @property
    def identical_share(self) -> float:
        """Mean per-prompt share of identical pairs."""
        shares = self.case_shares()
        return sum(shares) / len(shares) if shares else float("nan")


@dataclass(frozen=True, slots=True)
class MachineRecord:
    """Everything one kind of machine's A/A runs established: its band (None: not recorded) and identity records."""

    kind: str
    band: Band | None
    identity: tuple[AAIdentity, ...] = ()
    offset_sd: float = math.nan  # the point estimate beside the band's upper limit
    path: str = ""  # the file it was read from
    model: str = RECORD_MODEL  # the model its A/A runs served: the record holds for that model only
    workloads: tuple[str, ...] = ()  # the workloads of its A/A runs: its identity holds for that traffic only

    def applies_to(self, model: str | None) -> bool:
        """Whether the record speaks for runs of ``model`` (None: not checked)."""
        return model is None or model == self.model


def band_from_offset(offset_sd_upper: float, floor: float = BAND_FLOOR) -> float:
    """The band that covers 95% of offsets with this sd: exp(1.96 sd) - 1 rounded up to 1%, never under ``floor``
    (the practical 10%)."""
    return max(floor, math.ceil((math.exp(1.96 * offset_sd_upper) - 1.0) * 100 - 1e-9) / 100)


def record_file_name(kind: str) -> str:
    """A file name for a kind's record: its kind with every run of other characters than letters and digits as one
    hyphen, lower case."""
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") + ".json"


def record_json(record: MachineRecord) -> dict[str, Any]:
    """The record as its file holds it (:func:`load_record` reads it back equal)."""
    out: dict[str, Any] = {
        "format": FORMAT,
        "machine_kind": record.kind,
        "model": record.model,
        "workloads": list(record.workloads),
    }
    if record.band is not None:
        out["band"] = {
            "offset_sd": None if math.isnan(record.offset_sd) else record.offset_sd,
            "offset_sd_upper": record.band.offset_sd_upper,
            "aa_runs": record.band.aa_runs,
            "source": record.band.source,
        }
        if math.isfinite(record.band.memory_sd_upper):
            out["band"]["memory_sd_upper"] = record.band.memory_sd_upper
        if math.isfinite(record.band.over_cells_sd_upper):
            out["band"]["over_cells_sd_upper"] = record.band.over_cells_sd_upper
    out["identity"] = [
        {
            "clients": r.clients,
            "identical_pairs": r.identical_pairs,
            "pairs": r.pairs,
            "case_counts": [list(c) for c in r.case_counts],
            "max_output_tokens": r.max_output_tokens,
            "runs": list(r.runs),
            "source": r.source,
        }
        for r in record.identity
    ]
    return out


class _Fields:
    """Reads one record file's fields, each error one line naming the file, the field and the fix."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ConfigError:
        return ConfigError(
            f"{self.path}: {where}: {problem}; fix the file or write it again with specharness aa-record"
        )

    def get(self, obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(f"{where}{key}", f"expected {_type_words(kind)}, found {value!r}")
        return value

    def number(self, obj: dict[str, Any], key: str, where: str, low: float = 0.0) -> float:
        value = float(self.get(obj, key, (int, float), where))
        if not math.isfinite(value) or value < low:
            raise self.fail(f"{where}{key}", f"expected a finite number of at least {low:g}, found {value!r}")
        return value

    def count(self, obj: dict[str, Any], key: str, where: str) -> int:
        value: int = self.get(obj, key, int, where)
        if value < 0:
            raise self.fail(f"{where}{key}", f"expected a count of at least 0, found {value}")
        return value


def _type_words(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _memory_limit(f: _Fields, band: dict[str, Any]) -> float:
    """The band's peak-memory limit: NaN where absent or null (not recorded); zero is refused, since it would make
    every peak-memory interval zero-width again."""
    if band.get("memory_sd_upper") is None:
        return math.nan
    value = f.number(band, "memory_sd_upper", "band.")
    if value == 0:
        raise f.fail(
            "band.memory_sd_upper", "expected a number above 0 (leave it out where none was measured), found 0"
        )
    return value


def load_record(path: Path) -> MachineRecord:
    """One record file; a malformed one is a :class:`ConfigError` naming the file and the field."""
    f = _Fields(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise f.fail("file", f"cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise f.fail(f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise f.fail("file", "expected a JSON object")
    if type(obj.get("format")) is not int or obj["format"] != FORMAT:
        raise f.fail("format", f"expected {FORMAT}, found {obj.get('format')!r}")
    kind = f.get(obj, "machine_kind", str, "")
    if not kind.strip():
        raise f.fail("machine_kind", "expected the kind of machine (bands.machine_kind), found ''")
    band = None
    offset_sd = math.nan
    if "band" in obj:
        b = f.get(obj, "band", dict, "")
        upper = f.number(b, "offset_sd_upper", "band.")
        if b.get("offset_sd") is not None:
            offset_sd = f.number(b, "offset_sd", "band.")
        band = Band(
            band_from_offset(upper),
            f.get(b, "source", str, "band."),
            offset_sd_upper=upper,
            aa_runs=f.count(b, "aa_runs", "band."),
            memory_sd_upper=_memory_limit(f, b),
            over_cells_sd_upper=f.number(b, "over_cells_sd_upper", "band.")
            if b.get("over_cells_sd_upper") is not None
            else math.nan,
            offset_sd=offset_sd,
        )
    identity = []
    for k, r in enumerate(f.get(obj, "identity", list, "")):
        where = f"identity[{k}]."
        if not isinstance(r, dict):
            raise f.fail(f"identity[{k}]", f"expected an object, found {r!r}")
        counts = []
        for j, row in enumerate(f.get(r, "case_counts", list, where)):
            if not (isinstance(row, list) and len(row) == 3 and all(type(v) is int and v >= 0 for v in row)):
                raise f.fail(f"{where}case_counts[{j}]", f"expected [identical, pairs, prompts], found {row!r}")
            counts.append((row[0], row[1], row[2]))
        runs = f.get(r, "runs", list, where)
        if not all(isinstance(x, str) for x in runs):
            raise f.fail(f"{where}runs", "expected a list of run folders")
        identity.append(
            AAIdentity(
                kind=kind,
                clients=f.count(r, "clients", where),
                identical_pairs=f.count(r, "identical_pairs", where),
                pairs=f.count(r, "pairs", where),
                case_counts=tuple(counts),
                runs=tuple(runs),
                source=f.get(r, "source", str, where),
                max_output_tokens=f.count(r, "max_output_tokens", where),
            )
        )
    model = f.get(obj, "model", str, "") if "model" in obj else RECORD_MODEL
    workloads = f.get(obj, "workloads", list, "") if "workloads" in obj else []
    if not all(isinstance(w, str) and w for w in workloads):
        raise f.fail("workloads", "expected a list of workload names")
    return MachineRecord(kind, band, tuple(identity), offset_sd, str(path), model, tuple(workloads))


@functools.cache
def _read_folder(folder: str, stamp: tuple[tuple[str, int], ...]) -> dict[str, MachineRecord]:
    """The records of one folder by kind (cached while its files are unchanged); two files of one kind are an error."""
    out: dict[str, MachineRecord] = {}
    for name, _ in stamp:
        record = load_record(Path(folder) / name)
        if record.kind in out:
            raise ConfigError(
                f"{record.path}: machine_kind: {record.kind!r} is also recorded in {out[record.kind].path}; keep one file a kind"
            )
        out[record.kind] = record
    return out


def _folder_records(folder: Path) -> dict[str, MachineRecord]:
    if not folder.is_dir():
        raise ConfigError(f"{RECORDS_ENV}={folder}: no such folder; create it or unset {RECORDS_ENV}")
    stamp = tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*.json")))
    return _read_folder(str(folder), stamp)


def records_folder() -> Path:
    """Where a new record goes: the folder ``SPECHARNESS_MACHINE_RECORDS`` names, else the package's own."""
    user = os.environ.get(RECORDS_ENV, "").strip()
    return Path(user) if user else PACKAGED_RECORDS


def machine_records() -> dict[str, MachineRecord]:
    """Every kind's record: the package's, each replaced by a user's record of its kind (``SPECHARNESS_MACHINE_RECORDS``)."""
    out = dict(_folder_records(PACKAGED_RECORDS))
    folder = records_folder()
    if folder != PACKAGED_RECORDS:
        out.update(_folder_records(folder))
    return out


def write_record(record: MachineRecord, folder: Path, replace: bool = False) -> Path:
    """Write ``record`` as its kind's file in ``folder``; a kind that has a record (in ``folder`` or the package's) is
    kept unless ``replace``: the file in ``folder`` is written over, a packaged record is left as it is and the new
    file takes its place wherever ``folder`` is read."""
    own = _folder_records(folder).get(record.kind) if folder.is_dir() else None
    existing = own or _folder_records(PACKAGED_RECORDS).get(record.kind)
    if existing is not None and not replace:
        raise ConfigError(
            f"{existing.path}: kind {record.kind!r} has a record; pass --replace to write the new one over it"
        )
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(own.path) if own is not None else folder / record_file_name(record.kind)
    path.write_text(json.dumps(record_json(record), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
