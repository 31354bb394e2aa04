#!/usr/bin/env bash
# Out-of-sample A/A control: N fresh `--profile aa` runs (baseline vs an identical baseline-b) over four workloads,
# then the scorecard over all their cells (false-verdict rate; target at most 1 in 20).
#   scripts/aa_campaign.sh [N=3] [OUT=runs/aa-campaign-<time>]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-3}"
OUT="${2:-runs/aa-campaign-$(date +%Y%m%d-%H%M%S)}"
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  .venv/bin/python -m specharness run --profile aa --workloads copy,transform,free,abstain --no-progress --out "$OUT/run$i"
  echo "aa run $i: $(( $(date +%s) - start )) s"
done
.venv/bin/python -m specharness aa-summary "$OUT"/run* | tee "$OUT/aa-summary.md"
