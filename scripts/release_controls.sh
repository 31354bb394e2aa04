#!/usr/bin/env bash
# The release review's controls on this machine: RUNS runs (default 5) of the release profile with the arms of
# scripts/arms/release-controls.toml (the release against itself, and slowed by 1.05 and 1.10), one after another on an
# otherwise idle machine, then the scorecard (false verdicts, detections, the smallest change called at 80% power).
# ARMS names another arms file (scripts/arms/power-controls.toml: slowed by 1.03 and 1.05, the power study's).
#   bash scripts/release_controls.sh OUT_DIR [run options]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?give a folder for the runs}"
mkdir -p "$OUT"
for k in $(seq 1 "${RUNS:-5}"); do
  start=$(date +%s)
  .venv/bin/specharness run --profile release --arms-file "${ARMS:-scripts/arms/release-controls.toml}" \
    --out "$OUT/run$k" --no-progress "${@:2}"
  echo "run$k: $(( $(date +%s) - start )) s" | tee -a "$OUT/walls.txt"
done
.venv/bin/specharness aa-summary "$OUT"/run* > "$OUT/scorecard.md"
cat "$OUT/scorecard.md"
