"""``asv compare`` as a review view (a second ASV plugin, named in ``asv.conf.json``'s ``plugins``): between two
ledger releases it prints only the values the release review judges, with ASV's own marks.

Left out, and counted in one line above the table: values measured on neither release on that machine (n/a on both
sides: 8-client cells never run, another branch's pair) and values the review cannot test (no interval estimable:
release-compare's *not tested*, *not estimable*, *not measured*, *not comparable*), whose ``+`` / ``-`` would be
ASV's bare factor. The row naming a failed release's reason (``EngineFailure.track_first_error``) stays. An empty
``--only-changed`` says so in one line. Outside the ledger, ASV's table is unchanged.
Why: docs/release-review.md#the-rule-and-why-every-view-agrees.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.history.asv.ledger import ensure_ledger, ledger_tags
from specharness.history.asv.notes import FAILURE_BENCHMARK
from specharness.history.asv.series import superseded_note
from specharness.history.review.releases import ReleaseChange, release_review

__all__ = ["UNTESTED", "asv_label", "install", "judged_labels"]

UNTESTED = ("not tested", "not estimable", "not measured", "not comparable", "benchmark error")


def asv_label(name: str) -> str:
    """``asv compare``'s unrolled name without the quotes of its parameters: ``bench(copy, 1)`` (as release-compare
    labels a value)."""
    if "(" not in name:
        return name
    bench, params = name.split("(", 1)
    return f"{bench}({', '.join(p.strip().strip(chr(39)) for p in params[:-1].split(','))})"


def _change_label(c: ReleaseChange) -> str:
    return f"{c.benchmark}({c.params})"


def judged_labels(changes: list[ReleaseChange]) -> dict[str, bool]:
    """The values a release review judges (label -> whether it flags it): every value but those it cannot test."""
    return {_change_label(c): c.changed for c in changes if c.verdict not in UNTESTED}


def _rows(results_dir: str, machine: str, commit: str, env_names: Any) -> Iterator[tuple[Any, ...]]:
    """ASV's result rows of one commit, one parameter combination each (so that a row can be left out)."""
    from asv.commands.compare import unroll_result
    from asv.results import iter_results_for_machine_and_hash

    for result in iter_results_for_machine_and_hash(results_dir, machine, commit):
        if env_names is not None and result.env_name not in env_names:
            continue
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            rows = unroll_result(
                key,
                params,
                result.get_result_value(key, params),
                result.get_result_stats(key, params),
                result.get_result_samples(key, params),
            )
            combos = [list(c) for c in itertools.product(*params)] if params else [[]]
            for (name, value, stats, samples), combo in zip(rows, combos, strict=True):
                yield (
                    name,
                    key,
                    [[p] for p in combo],
                    [value] if combo else value,
                    [stats] if combo else stats,
                    [samples] if combo else samples,
                    result.benchmark_version.get(key),
                    result.params["machine"],
                    result.env_name,
                )


def install() -> None:
    """Wrap ``Compare.print_table`` once (idempotent)."""
    from asv.commands.compare import Compare

    original = Compare.__dict__["print_table"].__func__
    if getattr(original, "_specharness", False):
        return

    def print_table(
        cls: Any, conf: Any, hash_1: str, hash_2: str, factor: Any, split: Any, *args: Any, **kw: Any
    ) -> Any:
        machine = kw.get("machine")
        if args or kw.get("resultset_1") is not None or kw.get("resultset_2") is not None or not machine:
            return original(cls, conf, hash_1, hash_2, factor, split, *args, **kw)
        if note := superseded_note(machine):
            print(f"specharness: {note}")
        tags = ledger_tags(ensure_ledger(Path(conf.repo)))
        if hash_1 not in tags or hash_2 not in tags:
            return original(cls, conf, hash_1, hash_2, factor, split, *args, **kw)
        review = release_review(Path(conf.results_dir), tags[hash_1], tags[hash_2], machine, factor or RELEASE_FACTOR)
        judged = judged_labels(review.changes)
        sets = [list(_rows(conf.results_dir, machine, h, kw.get("env_names"))) for h in (hash_1, hash_2)]
        names = {row[0] for rows in sets for row in rows}
        keep = {n for n in names if asv_label(n) in judged or n.startswith(FAILURE_BENCHMARK + "(")}
        kw["resultset_1"], kw["resultset_2"] = ([row[1:] for row in rows if row[0] in keep] for rows in sets)
        print(
            f"specharness: {len(keep)} values of {tags[hash_1]} and {tags[hash_2]} on {machine} that the release "
            f"review judges; {len(names) - len(keep)} left out (measured on neither release here, or no interval "
            "to test them by: release-compare lists them as not tested). Marks: + B worse, - B better (the "
            "intervals apart and the ratio beyond --factor), ! B failed, ~ beyond the factor but the intervals "
            "overlap (not a change)."
        )
        if not keep:
            print(
                f"specharness: the release review judges no value of {tags[hash_1]} against {tags[hash_2]} on "
                f"{machine} (no pair run of the two, no separate-run value with an interval); "
                f"see specharness release-compare {tags[hash_1]} {tags[hash_2]} --machine {machine}."
            )
            return None
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = original(cls, conf, hash_1, hash_2, factor, split, *args, **kw)
        print(out.getvalue(), end="")
        if kw.get("only_changed") and not out.getvalue().strip():
            flagged = sum(judged.values())
            print(
                f"specharness: no value changed between {tags[hash_1]} and {tags[hash_2]} on {machine}: none of the "
                f"{len(keep)} values judged is marked"
                + (f" (release-compare flags {flagged}: see it)" if flagged else "")
                + "."
            )
        return result

    print_table._specharness = True  # type: ignore[attr-defined]
    print_table.__wrapped__ = original  # type: ignore[attr-defined]
    Compare.print_table = classmethod(print_table)  # type: ignore[method-assign,assignment]


install()
