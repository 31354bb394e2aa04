"""ASV plugin (named in ``asv.conf.json``'s ``plugins``): as ASV saves a result file, fill its statistics columns.

:func:`install` (run as ASV imports this module) wraps ``asv.results.Results.save``, turning the notes of
:mod:`specharness.history.asv.notes` into ASV's stats columns and a companion ``.notes.jsonl``, and
``Results.load``, giving failed benchmarks their release's failure reason as ``stderr``; ``asv publish`` warns
when its results hold several machines; values print to 4 significant digits. What it writes: docs/asv-site.md#the-asv-plugin.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from specharness.history.asv.ledger import DEFAULT_PATH, ensure_ledger
from specharness.history.asv.notes import (
    apply_notes,
    consume_notes,
    failure_stderr,
    notes_dir,
    read_notes,
    update_companion,
)
from specharness.history.asv.pairs import file_pairs
from specharness.history.asv.spreadfile import load_spread
from specharness.reporting.convention import ratio

__all__ = ["install"]


def _started_at(path: Path) -> dict[str, Any]:
    """Each benchmark's ``started_at`` in a saved result file (empty when there is none yet)."""
    from asv.results import Results
    from asv.util import UserError

    if not path.is_file():
        return {}
    try:
        return dict(Results.load(str(path)).started_at)
    except UserError:
        return {}


def install() -> None:
    """Wrap ``Results.save`` and ``Results.load`` once each (idempotent), and tell benchmark processes where notes
    go: ASV passes its ``ASV_*`` variables to a virtualenv's processes but not to an existing environment's, whose
    benchmarks run in a temporary folder; they inherit this process's environment."""
    import os

    from asv import results as asv_results

    os.environ.setdefault("SPECHARNESS_ASV_NOTES", str(notes_dir(Path.cwd().resolve())))
    # ASV opens its repo after importing plugins; without the generated ledger it would try to clone ".asv/ledger"
    # as a URL into a folder named after the project (this package's own folder) and fail on a fresh clone; a ledger
    # of an older recipe (other commit dates, other hashes) would orphan the committed results. One git call checks.
    if (Path.cwd() / "asv.conf.json").is_file():
        ensure_ledger(Path.cwd() / DEFAULT_PATH)
    _wrap_load(asv_results.Results)
    _warn_joined_publish()
    _four_digits()
    original = asv_results.Results.save
    if getattr(original, "_specharness", False):
        return

    def save(self: Any, result_dir: str) -> None:
        machine = str(self.params.get("machine", ""))
        used = apply_notes(self, read_notes(self.env_name, self.commit_hash), load_spread(Path(result_dir), machine))
        path = Path(result_dir) / self._filename
        before = _started_at(path)
        others = file_pairs(self, Path(result_dir) / machine)
        original(self, result_dir)
        update_companion(path, used, {name for name, at in self._started_at.items() if before.get(name) != at})
        consume_notes(self.env_name)
        for other in others:  # the earlier release's half of a new pair run, in that release's own result file
            original(other, result_dir)

    save._specharness = True  # type: ignore[attr-defined]
    asv_results.Results.save = save  # type: ignore[method-assign]


def _wrap_load(results_cls: Any) -> None:
    """Wrap ``Results.load`` once (idempotent): a loaded result's failed benchmarks get the release's failure reason
    as their in-memory ``stderr`` (ASV saves none), which ``asv show`` prints under *failed*. ``__wrapped__`` is
    ASV's own ``load``."""
    original_load = results_cls.__dict__["load"].__func__
    if getattr(original_load, "_specharness", False):
        return

    def load(cls: Any, path: str, machine_name: str | None = None) -> Any:
        obj = original_load(cls, path, machine_name)
        reasons = failure_stderr(Path(path), obj)
        if reasons:
            obj._stderr = reasons  # in memory only: Results.save writes no stderr
        return obj

    load._specharness = True  # type: ignore[attr-defined]
    load.__wrapped__ = original_load  # type: ignore[attr-defined]
    results_cls.load = classmethod(load)


def _four_digits() -> None:
    """Wrap ASV's ``human_value`` once (idempotent; ``asv compare`` imports it by name): a value in a unit ASV does
    not format itself (every unit here but seconds and bytes) prints to 4 significant digits, ``0.9847±0.0019`` where
    ASV printed ``0.9846958786997236±0.0019`` (the convention of report.md and release-compare)."""
    from asv import util
    from asv.commands import compare

    original = util.human_value
    if getattr(original, "_specharness", False):
        return

    def human_value(value: Any, unit: Any, err: Any = None) -> str:
        if isinstance(value, float) and math.isfinite(value) and unit not in ("seconds", "bytes"):
            return ratio(value) + (f"±{err:.2g}" if err is not None else "")
        return str(original(value, unit, err=err))

    human_value._specharness = True  # type: ignore[attr-defined]
    human_value.__wrapped__ = original  # type: ignore[attr-defined]
    util.human_value = human_value
    compare.human_value = human_value  # type: ignore[attr-defined]


def _warn_joined_publish() -> None:
    """Wrap ``asv publish`` once (idempotent) to warn when its results folder holds more than one machine: ASV's
    summary grid then joins them in one line per benchmark; ``bash scripts/publish.sh`` publishes one site each."""
    from asv.commands.publish import Publish

    original_run = Publish.__dict__["run"].__func__
    if getattr(original_run, "_specharness", False):
        return

    def run(cls: Any, conf: Any, range_spec: Any = None, pull: bool = True) -> Any:
        from asv.console import log

        machines = sorted({p.parent.name for p in Path(conf.results_dir).glob("*/machine.json")})
        if len(machines) > 1:
            log.warning(
                f"specharness: results hold {len(machines)} machines ({', '.join(machines)}); ASV's summary grid "
                "joins them in one line per benchmark. Publish with 'bash scripts/publish.sh' (one site per machine)."
            )
        return original_run(cls, conf, range_spec=range_spec, pull=pull)

    run._specharness = True  # type: ignore[attr-defined]
    Publish.run = classmethod(run)  # type: ignore[method-assign,assignment]


install()
