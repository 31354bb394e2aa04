#!/usr/bin/env bash
# Rebuild every committed report under reports/ from its committed journal (journal.jsonl.xz + manifest.json) with
# this checkout's statistics: report.md and plots/ are rewritten in place; nothing is measured.
#   scripts/rebuild_reports.sh [reports]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${1:-reports}"
find "$ROOT" -name journal.jsonl.xz | sort | while read -r packed; do
  dir="$(dirname "$packed")"
  [ -f "$dir/manifest.json" ] || { echo "skip $dir (no manifest.json)"; continue; }
  tmp=/tmp/specharness-rebuild  # a fixed place: a partial report names its run folder in the resume hint
  rm -rf "$tmp" && mkdir -p "$tmp"
  work="$tmp/$(basename "$dir")"  # the report is titled by its folder's name
  mkdir "$work"
  cp "$dir/manifest.json" "$work/"
  xz -dc "$packed" > "$work/journal.jsonl"
  if grep -q '"kind": *"sampled"' "$dir/manifest.json"; then  # a distribution check: its own report, sampled.md
    .venv/bin/python -c 'import sys; from pathlib import Path; from specharness.reporting.sampled_report import write_sampled_report; write_sampled_report(Path(sys.argv[1]))' "$work"
    cp "$work/sampled.md" "$dir/sampled.md"
    rm -rf "$tmp"
    echo "rebuilt $dir/sampled.md"
    continue
  fi
  .venv/bin/python -m specharness report "$work" >/dev/null
  cp "$work/report.md" "$dir/report.md"
  if [ -d "$dir/plots" ]; then cp "$work"/plots/*.png "$dir/plots/"; fi
  rm -rf "$tmp"
  echo "rebuilt $dir/report.md"
done
