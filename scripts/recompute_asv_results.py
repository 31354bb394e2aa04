"""Recompute committed ASV result files from the journals of the runs that made them (see specharness.history.recompute).

    .venv/bin/python scripts/recompute_asv_results.py RESULT_JSON RUN_DIR [RESULT_JSON RUN_DIR ...]

RUN_DIR holds the run's manifest.json and journal.jsonl or journal.jsonl.xz (a run folder, or a copy under
reports/). The result file's values are rewritten, the slowdown's interval goes into ASV's stats columns, and the
companion notes (blocks, verdicts) are rewritten for the cells the run measured: what the ASV plugin does live.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from asv.results import Results

from specharness.experiment.rundir import copy_run
from specharness.history.asvnotes import apply_notes, update_companion
from specharness.history.recompute import paired_notes, recompute_load, recompute_paired
from specharness.reporting.report import write_report


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for result_path, run_dir in zip(argv[::2], argv[1::2], strict=True):
        source = Path(run_dir)
        with tempfile.TemporaryDirectory() as tmp:
            run = copy_run(source, Path(tmp) / source.name)
            report = write_report(run, plots=False)
        path = Path(result_path)
        result = json.loads(path.read_text())
        changed = recompute_paired(result, report) + recompute_load(result, report)
        path.write_text(json.dumps(result, indent=None, separators=(", ", ": ")))
        loaded = Results.load(str(path))
        notes = paired_notes(report, loaded.commit_hash, f"recomputed from {source}")
        used = apply_notes(loaded, notes)
        loaded.save(str(path.parent.parent))
        update_companion(path, used)
        print(f"{result_path}: {len(changed)} benchmarks recomputed, {len(used)} intervals noted, from {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
