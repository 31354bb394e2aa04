"""ASV's own printing (asv show, asv compare) with the plugin installed: 4 significant digits, as report.md and
release-compare print them; seconds and bytes as ASV formats them."""

from __future__ import annotations

from asv import util
from asv.commands import compare

from specharness.history.asv import plugin


def test_values_print_to_four_significant_digits() -> None:
    plugin.install()
    assert util.human_value(0.9846958786997236, "share of the pair (higher is worse)", err=0.0019) == "0.9847±0.0019"
    assert compare.human_value(30.298508021431708, "ms (higher is worse)") == "30.3"
    assert util.human_value(0.0667, "seconds") == util.human_value.__wrapped__(0.0667, "seconds")  # type: ignore[attr-defined]
    assert util.human_value(None, "ratio") == "failed" and util.human_value(float("nan"), "ratio") == "n/a"
