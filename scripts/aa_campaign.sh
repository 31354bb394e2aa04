#!/usr/bin/env bash
# The controls, out of sample: N fresh `--profile control` runs (baseline vs an identical baseline-b, and vs
# baseline-slow, every request held to 1.25x its time) over four workloads, then the scorecard over all their cells:
# A/A equivalent / inconclusive / false verdicts with CI widths, the band they support, known-effect detection.
#   scripts/aa_campaign.sh [N=5] [OUT=runs/control-<time>] [extra `specharness run` options...]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-5}"
OUT="${2:-runs/control-$(date +%Y%m%d-%H%M%S)}"
shift $(( $# < 2 ? $# : 2 ))
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  .venv/bin/python -m specharness run --profile control --workloads copy,transform,free,abstain --no-progress \
    --out "$OUT/run$i" "$@"
  echo "control run $i: $(( $(date +%s) - start )) s"
done
.venv/bin/python -m specharness aa-summary "$OUT"/run* | tee "$OUT/aa-summary.md"
