"""How the machine's speed drifts during a run, from the journals of closed-loop runs at 1 client.

Each measured request's time is turned into a residual (its log end-to-end time minus the mean for its arm and
case over the run). Printed per workload, over the runs given:
- the residuals' sd;
- the correlation of the residuals of consecutive measured requests of one arm's cell (sent one after another);
- the sd over blocks of each comparison's per-block log ratio of summed times (arm B over the reference, the same
  cases), the noise a block carries into the speed interval.
A positive correlation is drift the arms share in time; arms measured far apart carry it into the block ratio.

    .venv/bin/python scripts/diag/drift.py reports/cpu-release-controls/20261207-zen4/run*
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from specharness.experiment.rundir import read_run_journal


def main(runs: list[str]) -> None:
    residuals: dict[str, list[float]] = defaultdict(list)
    consecutive: dict[str, list[tuple[float, float]]] = defaultdict(list)
    block_sd: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        requests = [
            r
            for r in read_run_journal(Path(run)).requests
            if not r.warmup and r.clients == 1 and r.error_kind is None and r.chunk_arrival_s
        ]
        logs = {id(r): math.log(r.chunk_arrival_s[-1]) for r in requests}
        by_arm_case: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in requests:
            by_arm_case[(r.arm, r.case_id)].append(logs[id(r)])
        mean = {k: statistics.fmean(v) for k, v in by_arm_case.items()}
        cells: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in requests:
            res = logs[id(r)] - mean[(r.arm, r.case_id)]
            residuals[r.workload].append(res)
            cells[r.cell].append((r.send_s, res))
        for cell, points in cells.items():
            points.sort()
            workload = cell.split("/")[1]
            consecutive[workload] += [(a[1], b[1]) for a, b in itertools.pairwise(points)]
        summed: dict[tuple[str, int, str], float] = defaultdict(float)
        for r in requests:
            summed[(r.workload, r.block, r.arm)] += r.chunk_arrival_s[-1]
        arms = sorted({r.arm for r in requests})
        reference = "ref" if "ref" in arms else arms[0]
        for workload in sorted({r.workload for r in requests}):
            blocks = sorted({r.block for r in requests if r.workload == workload})
            for arm in arms:
                if arm == reference:
                    continue
                ratios = [
                    math.log(summed[(workload, b, arm)] / summed[(workload, b, reference)])
                    for b in blocks
                    if summed[(workload, b, arm)] and summed[(workload, b, reference)]
                ]
                if len(ratios) > 1:
                    block_sd[(workload, arm)].append(statistics.stdev(ratios))
    print(f"{len(runs)} runs, 1 client, measured requests")
    for workload in sorted(residuals):
        pairs = consecutive[workload]
        corr = statistics.correlation([a for a, _ in pairs], [b for _, b in pairs]) if len(pairs) > 2 else math.nan
        print(
            f"{workload}: residual sd {statistics.pstdev(residuals[workload]):.3f}; consecutive requests of a cell "
            f"correlated {corr:.2f} ({len(pairs)} pairs)"
        )
    for (workload, arm), sds in sorted(block_sd.items()):
        rms = math.sqrt(statistics.fmean(s * s for s in sds))
        print(
            f"{workload}, {arm} against the reference: per-block log ratio sd {rms:.3f} (root mean square over {len(sds)} runs)"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("give one or more run folders")
    main(sys.argv[1:])
