"""The A/A identity record: how often two identical engines write identical greedy outputs, per kind of machine and
client count; a run without an A/A arm judges its greedy identity against it.

The records are data (:mod:`specharness.experiment.machine_record`: :class:`AAIdentity`, per prompt, identical pairs
over pairs), keyed by :func:`~specharness.experiment.bands.machine_kind`; :func:`aa_identity_for` gives a run's. A kind
of machine or a client count without a record of its own has none. Rules: docs/method.md#the-aa-identity-record.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from specharness.experiment.bands import machine_kind
from specharness.experiment.machine_record import AAIdentity, machine_records

__all__ = ["AAIdentity", "aa_identity_for", "identity_records", "traffic_mismatch"]


def identity_records(kind: str) -> tuple[AAIdentity, ...]:
    """Every A/A identity record of one kind of machine (any client count and length)."""
    record = machine_records().get(kind)
    return record.identity if record is not None else ()


def traffic_mismatch(hardware: dict[str, Any], model: str | None, workloads: Sequence[str]) -> str:
    """Why the machine's A/A identity record cannot judge a run of ``model`` on ``workloads`` ("" where it can):
    how often two identical engines diverge belongs to the machine, the model and the traffic, so a record speaks
    only for the model and workloads its A/A runs served."""
    record = machine_records().get(machine_kind(hardware))
    if record is None or not record.identity:
        return ""
    if not record.applies_to(model):
        return f"the machine's A/A record served {record.model}, not {model}"
    other = [w for w in workloads if w not in record.workloads]
    if other:
        recorded = ", ".join(record.workloads) or "workloads it does not name"
        return f"the machine's A/A record is of {recorded}, not {', '.join(other)}"
    return ""


def aa_identity_for(
    hardware: dict[str, Any],
    tokens: int | None = None,
    model: str | None = None,
    workloads: Sequence[str] = (),
) -> dict[int, AAIdentity]:
    """Client count -> the A/A identity record for a run's hardware record (its
    :func:`~specharness.experiment.bands.machine_kind`, as the band is picked) whose answers run to ``tokens`` (the
    run's cap): per client count the shortest record whose outputs reach that length, else the longest (None: the
    longest). None for a run of another model or other workloads than the record's (:func:`traffic_mismatch`;
    ``model`` None: not checked)."""
    if model is not None and traffic_mismatch(hardware, model, workloads):
        return {}
    by_clients: dict[int, list[AAIdentity]] = {}
    for record in identity_records(machine_kind(hardware)):
        by_clients.setdefault(record.clients, []).append(record)
    length = attrgetter("max_output_tokens")
    out = {}
    for clients, found in sorted(by_clients.items()):
        reaching = [r for r in found if tokens is not None and r.max_output_tokens >= tokens]
        out[clients] = min(reaching, key=length) if reaching else max(found, key=length)
    return out
