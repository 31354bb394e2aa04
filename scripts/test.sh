#!/usr/bin/env bash
# The project's checks: lint, types, unit tests, then the engine-backed tests on the real vLLM CPU server.
#   scripts/test.sh            everything (what CI runs): unit tests in parallel (pytest-xdist, one worker more
#                              than cores: some tests wait on subprocesses and timeouts, and one worker per core left
#                              the cores 19% idle; SPECHARNESS_TEST_WORKERS to change), then the site and engine tests
#                              one at a time (engine tests share a session's engine pool and must not run in parallel;
#                              their conftest overlaps a few runs' engine starts itself, at most 4 engines at once)
#   scripts/test.sh -m "not engine"    pytest arguments pass through (then one serial pytest run, as given)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "test: no .venv; run scripts/setup.sh first" >&2; exit 2; }
"$PY" -m ruff check .
"$PY" -m ruff format --check specharness tests benchmarks scripts
"$PY" -m mypy
if [ "$#" -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi
if "$PY" -c 'import xdist' 2>/dev/null; then
  "$PY" -m pytest tests/unit -n "${SPECHARNESS_TEST_WORKERS:-$(( $(nproc) + 1 ))}"
else
  echo "test: pytest-xdist is missing (scripts/setup.sh installs it): unit tests run serially" >&2
  "$PY" -m pytest tests/unit
fi
"$PY" -m pytest tests --ignore=tests/unit
