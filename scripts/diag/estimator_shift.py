"""Every committed run re-read with the whole-answer estimate and with the common-prefix one: the greedy cells whose
speed verdict or estimate moved, as a markdown table (docs/results.md).
    .venv/bin/python scripts/diag/estimator_shift.py [reports]"""

from __future__ import annotations

import functools
import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

import specharness.analysis.analyse as analyse_module
from specharness.analysis.comparison import ComparisonRules


def read(run: Path, estimate: str) -> dict[tuple[str, str, str, str], tuple[str, float, float, float]]:
    analyse_module.ComparisonRules = functools.partial(ComparisonRules, estimate=estimate)  # type: ignore[misc]
    a = analyse_module.analyse(run, json.loads((run / "manifest.json").read_text()))
    return {
        (c.workload, c.load, c.arm_b, c.arm_a): (c.speed.verdict, c.speedup.estimate, c.speedup.low, c.speedup.high)
        for c in a.comparisons
        if c.work is not None and a.rules.greedy
    }


def main(root: Path) -> None:
    print("| run | cell | prefix: speedup [CI], verdict | whole answer: speedup [CI], verdict |")
    print("|---|---|---|---|")
    cells = moved = 0
    for packed in sorted(root.rglob("journal.jsonl.xz")):
        src = packed.parent
        if not (src / "manifest.json").exists() or '"sampled"' in (src / "manifest.json").read_text():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / src.name
            run.mkdir()
            shutil.copy(src / "manifest.json", run)
            (run / "journal.jsonl").write_bytes(lzma.decompress(packed.read_bytes()))
            try:
                old, new = read(run, "prefix"), read(run, "whole")
            except Exception as e:
                print(f"| {src} | (not read: {type(e).__name__}: {e}) | | |")
                continue
        for key, (v0, e0, l0, h0) in old.items():
            v1, e1, l1, h1 = new[key]
            cells += 1
            if v0 != v1 or abs(e1 / e0 - 1) > 0.01:
                moved += 1
                print(
                    f"| {src} | {key[0]} {key[1]} {key[2]} vs {key[3]} | {e0:.3f} [{l0:.3f}, {h0:.3f}] {v0} | "
                    f"{e1:.3f} [{l1:.3f}, {h1:.3f}] {v1} |"
                )
    print(f"\n{moved} of {cells} greedy cells moved (verdict changed or estimate by more than 1%)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "reports"))
