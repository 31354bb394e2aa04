#!/usr/bin/env bash
# The published release history: one ASV site per machine and ledger branch (html/<machine>/: ASV's graphs, summary
# grid and regressions page from that machine's results only, plus its release page) and html/index.html linking
# them. Plain `asv publish` over all of results/ would join the CPU and H200 values in ASV's summary grid.
#   bash scripts/publish.sh [--results DIR] [--html DIR] [--no-vendor]
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/specharness ledger >/dev/null
exec .venv/bin/specharness site "$@"
