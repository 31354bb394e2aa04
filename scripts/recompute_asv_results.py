"""Recompute committed ASV result files from the journals of the runs that made them (see specharness.history.recompute).

    .venv/bin/python scripts/recompute_asv_results.py RESULT_JSON REPORT_DIR [RESULT_JSON REPORT_DIR ...]

REPORT_DIR holds the run's manifest.json and journal.jsonl.xz (as under reports/); the result file is rewritten.
"""

from __future__ import annotations

import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

from specharness.history.recompute import recompute_load, recompute_paired
from specharness.reporting.report import write_report


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for result_path, report_dir in zip(argv[::2], argv[1::2], strict=True):
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / Path(report_dir).name
            run.mkdir()
            shutil.copy(Path(report_dir) / "manifest.json", run)
            (run / "journal.jsonl").write_bytes(lzma.decompress((Path(report_dir) / "journal.jsonl.xz").read_bytes()))
            report = write_report(run, plots=False)
        result = json.loads(Path(result_path).read_text())
        changed = recompute_paired(result, report) + recompute_load(result, report)
        Path(result_path).write_text(json.dumps(result, indent=None, separators=(", ", ": ")))
        print(f"{result_path}: {len(changed)} benchmarks recomputed from {report_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
