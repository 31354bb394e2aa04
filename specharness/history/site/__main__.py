"""``python -m specharness.history.site``: publish the release history, one ASV site per machine and ledger branch
(:func:`specharness.history.site.publish.publish_sites`), plus an index linking them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specharness._errors import SpecharnessError
from specharness.history.site.publish import publish_sites


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specharness.history.site", description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--html", type=Path, default=Path("html"))
    parser.add_argument("--config", type=Path, default=Path("asv.conf.json"))
    parser.add_argument("--ledger", type=Path, default=None, help="the release ledger (default .asv/ledger)")
    parser.add_argument("--no-vendor", action="store_true", help="keep ASV's CDN links (the site then needs internet)")
    args = parser.parse_args(argv)
    try:
        series = publish_sites(args.results, args.html, args.config, args.ledger, vendor=not args.no_vendor)
    except SpecharnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for s in series:
        print(f"site: {args.html / s.folder}/index.html ({s.machine}, {s.branch}: {', '.join(s.releases)})")
    print(f"site: {args.html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
