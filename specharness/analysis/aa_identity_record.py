"""The A/A identity record measured from A/A run folders (:mod:`specharness.experiment.aa_identity` keeps it).

Each run folder is analysed as a report would be (:func:`specharness.analysis.analyse.analyse`: valid cells, the
declared blocks); its baseline-b vs baseline comparisons at closed-loop loads give, per prompt, the identical pairs
and pairs by the comparison's own rule (:func:`specharness.analysis.quality_tests.case_quality`). A prompt is
(workload, case): the same prompt in several runs or blocks is one case, its pairs summed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from specharness.analysis.analyse import analyse
from specharness.analysis.quality_tests import TWIN
from specharness.experiment.aa_identity import AAIdentity
from specharness.experiment.rundir import read_manifest

__all__ = ["format_records", "measure_aa_identity"]


def measure_aa_identity(run_dirs: Sequence[Path], kind: str, source: str) -> list[AAIdentity]:
    """One :class:`AAIdentity` per client count found in the A/A comparisons of ``run_dirs`` (closed loop only)."""
    by_clients: dict[int, dict[tuple[str, str], list[int]]] = {}
    longest: dict[int, int] = {}
    for run_dir in run_dirs:
        a = analyse(run_dir, read_manifest(run_dir))
        for c in a.comparisons:
            if c.arm_a != "baseline" or c.arm_b != TWIN or c.rate or c.speed.verdict == "invalid":
                continue
            cases = by_clients.setdefault(c.clients, {})
            longest[c.clients] = max(longest.get(c.clients, 0), c.identity.max_output_tokens)
            for case, (same, total) in c.identity.by_case.items():
                row = cases.setdefault((c.workload, case), [0, 0])
                row[0] += same
                row[1] += total
    out = []
    for clients in sorted(by_clients):
        cases = by_clients[clients]
        histogram = Counter((same, total) for same, total in cases.values())
        out.append(
            AAIdentity(
                kind=kind,
                clients=clients,
                identical_pairs=sum(same for same, _ in cases.values()),
                pairs=sum(total for _, total in cases.values()),
                case_counts=tuple((same, total, n) for (same, total), n in sorted(histogram.items())),
                runs=tuple(str(d) for d in run_dirs),
                source=source,
                max_output_tokens=longest[clients],
            )
        )
    return out


def format_records(records: Sequence[AAIdentity]) -> str:
    """One line per record: what the record holds, readable and pasteable."""
    return "\n".join(
        f"{r.kind} {r.clients} clients: identical {r.identical_pairs}/{r.pairs} pairs, {r.cases} prompts, mean "
        f"per-prompt share {r.identical_share:.3f}, longest output {r.max_output_tokens} tokens; "
        f"case_counts={r.case_counts!r}"
        for r in records
    )
