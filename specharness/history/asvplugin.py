"""ASV plugin (named in ``asv.conf.json``'s ``plugins``): as ASV saves a result file, fill its statistics columns.

ASV imports this module when it starts; it wraps ``asv.results.Results.save`` so that, before writing, the notes
our lookups left for that environment and commit (:mod:`specharness.history.asvnotes`) become ASV stats (the
experiment's CI, the block count), absolute values get the machine's measured spread, and a companion
``.notes.jsonl`` keeps failure reasons. Nothing else in ASV changes; with the plugin absent, results are plain.
Tested against the ASV version pinned in ``pyproject.toml`` (its ``Results`` keeps ``_results``, ``_stats`` and
``_benchmark_params``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specharness.history.asvnotes import apply_notes, consume_notes, read_companion, read_notes, write_companion
from specharness.history.spread import load_spread

__all__ = ["install"]


def _started_at(path: Path) -> dict[str, Any]:
    """Each benchmark's ``started_at`` in a saved result file (empty when there is none yet)."""
    try:
        data = json.loads(path.read_text())
        at = data["result_columns"].index("started_at")
        return {name: row[at] for name, row in data["results"].items()}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return {}


def install() -> None:
    """Wrap ``Results.save`` once (idempotent), and tell benchmark processes where notes go: ASV passes its
    ``ASV_*`` variables to a virtualenv's processes but not to an existing environment's, whose benchmarks run in
    a temporary folder; they inherit this process's environment."""
    import os

    from asv import results as asv_results

    os.environ.setdefault("SPECHARNESS_ASV_NOTES", str(Path.cwd().resolve() / ".asv" / "specharness-notes"))
    # ASV opens its repo after importing plugins; without the generated ledger it would try to clone ".asv/ledger"
    # as a URL into a folder named after the project (this package's own folder) and fail on a fresh clone.
    if (Path.cwd() / "asv.conf.json").is_file() and not (Path.cwd() / ".asv" / "ledger").exists():
        from specharness.history.ledger import ensure_ledger

        ensure_ledger(Path.cwd() / ".asv" / "ledger")
    original = asv_results.Results.save
    if getattr(original, "_specharness", False):
        return

    def save(self: Any, result_dir: str) -> None:
        machine = str(self.params.get("machine", ""))
        used = apply_notes(self, read_notes(self.env_name, self.commit_hash), load_spread(Path(result_dir), machine))
        path = Path(result_dir) / self._filename
        before = _started_at(path)
        original(self, result_dir)
        # an older note stays only for a benchmark this save did not measure again (same started_at)
        remeasured = {name for name, at in self._started_at.items() if before.get(name) != at}
        kept = [n for n in read_companion(path) if n.benchmark not in remeasured]
        write_companion(path, kept + used)
        consume_notes(self.env_name)

    save._specharness = True  # type: ignore[attr-defined]
    asv_results.Results.save = save  # type: ignore[method-assign]


install()
