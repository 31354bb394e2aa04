"""The A/A identity record measured from A/A run folders (:mod:`specharness.experiment.aa_identity` keeps it).

Each run folder is analysed as a report would be (:func:`specharness.analysis.analyse.analyse`: valid cells, the
declared blocks); its A/A comparisons at closed-loop loads (baseline-b vs baseline, or a declared twin without a
client-side slowdown vs the arm it copies, :func:`~specharness.experiment.design.control_pairs`) give, per prompt, the identical pairs
and pairs by the comparison's own rule (:func:`specharness.analysis.quality_tests.case_quality`). A prompt is
(workload, case): the same prompt in several runs or blocks is one case, its pairs summed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from specharness.analysis.analyse import Analysis, analyse
from specharness.analysis.quality_tests import TWIN
from specharness.experiment.aa_identity import AAIdentity
from specharness.experiment.design import Profile, control_pairs
from specharness.experiment.rundir import read_manifest

__all__ = ["format_records", "measure_aa_identity"]


def measure_aa_identity(
    run_dirs: Sequence[Path], kind: str, source: str, analysed: Callable[[Path], Analysis] | None = None
) -> list[AAIdentity]:
    """One :class:`AAIdentity` per client count and cap (the runs' ``max_tokens_cap``) found in the A/A comparisons of
    ``run_dirs`` (closed loop only), each naming the runs it came from; ``analysed`` gives a run's analysis where the
    caller has it."""
    groups: dict[tuple[int, int], dict[tuple[str, str], list[int]]] = {}
    longest: dict[tuple[int, int], int] = {}
    runs: dict[tuple[int, int], list[str]] = {}
    for run_dir in run_dirs:
        manifest = read_manifest(run_dir)
        profile = manifest["config"]["profile"]
        twins = control_pairs(Profile.from_dict(profile))[0] if profile.get("arm_specs") else {("baseline", TWIN)}
        cap = int(profile.get("max_tokens_cap") or 0)
        a = analysed(run_dir) if analysed else analyse(run_dir, manifest)
        for c in a.comparisons:
            if (c.arm_a, c.arm_b) not in twins or c.rate or c.speed.verdict == "invalid":
                continue
            key = (c.clients, cap)
            cases = groups.setdefault(key, {})
            longest[key] = max(longest.get(key, 0), c.identity.max_output_tokens)
            if str(run_dir) not in runs.setdefault(key, []):
                runs[key].append(str(run_dir))
            for case, (same, total) in c.identity.by_case.items():
                row = cases.setdefault((c.workload, case), [0, 0])
                row[0] += same
                row[1] += total
    out = []
    for key in sorted(groups):
        cases = groups[key]
        histogram = Counter((same, total) for same, total in cases.values())
        out.append(
            AAIdentity(
                kind=kind,
                clients=key[0],
                identical_pairs=sum(same for same, _ in cases.values()),
                pairs=sum(total for _, total in cases.values()),
                case_counts=tuple((same, total, n) for (same, total), n in sorted(histogram.items())),
                runs=tuple(runs[key]),
                source=source,
                max_output_tokens=longest[key],
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
