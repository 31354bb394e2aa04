#!/usr/bin/env bash
# The project's checks: lint, types, unit tests, then the engine-backed tests on the real vLLM CPU server.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh -m "not engine"    pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "test: no .venv; run scripts/setup.sh first" >&2; exit 2; }
"$PY" -m ruff check .
"$PY" -m ruff format --check specharness tests benchmarks scripts
"$PY" -m mypy
"$PY" -m pytest "$@"
