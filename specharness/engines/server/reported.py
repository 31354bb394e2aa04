"""What an engine reports about itself: the settings that matter for a fair comparison, read from vLLM's
``/server_info`` config and from its log, and the meaningful tail of its log for one-line error messages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["log_tail", "settings_from_log", "settings_from_server_info"]

# vLLM log records start "LEVEL MM-DD HH:MM:SS"; records below ERROR are never the cause, even when they say "error"
_LOG_QUIET_RECORD = re.compile(r"\b(?:DEBUG|INFO|WARNING)\s+\d\d-\d\d\s")
_LOG_ERROR_MARK = re.compile(r"\b(?:ERROR|CRITICAL)\b|^Traceback|\b[A-Z]\w*(?:Error|Exception)\b:")


def settings_from_server_info(config: dict[str, Any]) -> dict[str, Any]:
    """The settings that matter for a fair comparison, from vLLM's /server_info JSON config."""
    sched = config.get("scheduler_config") or {}
    cache = config.get("cache_config") or {}
    model = config.get("model_config") or {}
    spec = config.get("speculative_config") or None
    comp = config.get("compilation_config") or {}
    out: dict[str, Any] = {
        "source": "/server_info",
        "async_scheduling": sched.get("async_scheduling"),
        "max_num_seqs": sched.get("max_num_seqs"),
        "max_num_batched_tokens": sched.get("max_num_batched_tokens"),
        "enable_prefix_caching": cache.get("enable_prefix_caching"),
        "block_size": cache.get("block_size"),
        "max_model_len": model.get("max_model_len"),
        "dtype": model.get("dtype"),
        "seed": model.get("seed"),
        "enforce_eager": model.get("enforce_eager"),
        "compilation_mode": comp.get("mode"),
    }
    if isinstance(spec, dict):
        out["speculative_config"] = {
            k: spec.get(k)
            for k in ("method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max")
            if k in spec
        }
    else:
        out["speculative_config"] = None
    return out


def settings_from_log(text: str, found: dict[str, Any]) -> dict[str, Any]:
    """``found`` (the settings from ``/server_info``, or empty) completed from the engine's log ``text``: a note on
    async scheduling, the CPU build's torch-linear fallback, and the speculative config when ``/server_info`` gave
    nothing. Fills ``found`` in and returns it."""
    note = re.search(r"(Async scheduling (?:not supported|will be disabled|is disabled|is not compatible)[^\n]*)", text)
    if note:
        found["async_scheduling_note"] = note.group(1).strip()
        found.setdefault("async_scheduling", False)
    # the CPU build on a CPU without bf16 matmul in oneDNN (e.g. AVX2-only) runs its linear layers through torch
    fallback = re.search(r"(Failed to create oneDNN linear, fallback to torch linear[^\n]{0,160})", text)
    if fallback:
        found["cpu_linear_fallback"] = fallback.group(1).strip()
    if "source" not in found:
        found["source"] = "engine log"
        hit = re.search(r"speculative_config=(SpeculativeConfig\([^)]*\)|None)", text)
        if hit:
            found["speculative_config"] = hit.group(1)
    return found


def log_tail(path: Path, lines: int = 1) -> str:
    """The last meaningful line(s) of the server log at ``path``, for one-line error messages: error records and
    exception lines first (a WARNING that merely mentions an error is not one), else the last lines."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    errors = [ln.strip() for ln in text if _LOG_ERROR_MARK.search(ln) and not _LOG_QUIET_RECORD.search(ln)]
    useful = errors or [ln.strip() for ln in text if ln.strip()]
    return " | ".join(useful[-lines:]) if useful else "(empty log)"
