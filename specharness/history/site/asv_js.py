"""Two fixes to ASV's regressions view in a published site (its copy of ``regressions.js``), for the release ledger:
a row names the release where ASV printed the ledger commit's fixed date (every release of a branch would read
2026-01-01), and a factor from 0 (``engine_failed`` 0 → 1: a failed arm) reads "0 → 1 (failed)", not "Infinityx".
Each pattern must be found once or more in the ASV version pinned in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

from specharness._errors import ConfigError

__all__ = ["PATCHES", "patch_regressions_js"]

HELPER = (
    "function specharness_release(date) {  /* the ledger tag of a revision's date (specharness) */\n"
    "    var m = $.asv.main_json, t = date.getTime();\n"
    "    for (var r in m.revision_to_date) { if (m.revision_to_date[r] == t) {\n"
    "        for (var tag in m.tags) { if (m.tags[tag] == r) { return tag; } } } }\n"
    "    return $.asv.format_date_yyyymmdd_hhmm(date);\n"
    "}\n"
)
PATCHES = (
    ("$.asv.format_date_yyyymmdd_hhmm(date_fmt)", "specharness_release(date_fmt)"),
    ("factor.toFixed(2) + 'x'", "(isFinite(factor) ? factor.toFixed(2) + 'x' : '0 \\u2192 1 (failed)')"),
)


def patch_regressions_js(site: Path) -> int:
    """Apply :data:`PATCHES` to ``site/regressions.js`` (idempotent); returns how many places changed."""
    path = site / "regressions.js"
    if not path.is_file():
        return 0
    text = path.read_text()
    if HELPER in text:
        return 0
    count = 0
    for old, new in PATCHES:
        if old not in text:
            raise ConfigError(
                f"{path}: ASV's regressions view has no {old!r}; the ASV version differs from the one pinned in "
                "pyproject.toml (update specharness/history/site/asv_js.py)"
            )
        count += text.count(old)
        text = text.replace(old, new)
    path.write_text(text.replace("'use strict';\n", "'use strict';\n" + HELPER, 1))
    return count
