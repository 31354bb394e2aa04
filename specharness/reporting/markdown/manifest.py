"""report.md's manifest: model, hardware, harness, design and arm orders, then per engine its version, start,
command, start phases, CPU linear-layer note, how its server was started, and its engine-pool provenance."""

from __future__ import annotations

from typing import Any

from specharness.analysis.analyse import Analysis
from specharness.engines.preload import ENV as PRELOAD_ENV
from specharness.engines.preload import forked
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import when as _when
from specharness.reporting.start_table import phases_text

__all__ = ["engine_lines", "manifest_lines", "pool_lines"]


def _loads(a: Analysis) -> str:
    out = {w: ", ".join(load_text(x.label) for x in loads) for w, loads in a.loads.items()}
    texts = set(out.values())
    return f"[{texts.pop()}]" if len(texts) == 1 else "; ".join(f"{w}: [{t}]" for w, t in out.items())


def manifest_lines(a: Analysis, engines: list[dict[str, Any]]) -> list[str]:
    """The Manifest: model, hardware, harness, design, arm orders, then each engine's lines."""
    m = a.manifest
    cfg, prof = m["config"], m["config"]["profile"]
    model, hw = m.get("model", {}), m.get("hardware", {})
    lines = [
        "",
        "## Manifest",
        "",
        f"- Model: {model.get('name')} ({model.get('origin')}), sha256 `{model.get('sha256')}`, "
        f"served from `{model.get('path')}`",
        f"- Hardware: {hw.get('cpu')} × {hw.get('cpu_count')} cores, {hw.get('memory_gib')} GiB; "
        f"GPUs: {', '.join(hw.get('gpus') or []) or 'none'}",
        f"- Harness: specharness {m.get('harness_version', '—')}, commit `{m.get('harness_commit')}`; started "
        f"{_when(m.get('started_unix_s'))}, ended {_when(m.get('ended_unix_s'))}",
        f"- Design: profile `{prof['name']}`, {prof['blocks']} blocks"
        f"{' (up to ' + str(prof.get('max_blocks')) + ' until decided)' if prof.get('until_decided') else ''} × "
        f"workloads {prof['workloads']} × loads {_loads(a)} × {prof['requests_per_cell']} requests × "
        f"arms {prof['arms']}, {prof['warmups_per_cell']} warmup rounds per cell and arm; sampling "
        f"{cfg['sampling']}; arm order seed {prof.get('order_seed', '—')}",
    ]
    if m.get("block_orders"):
        lines.append(
            "- Arm order by block: " + "; ".join(f"b{k}: {' → '.join(v)}" for k, v in m["block_orders"].items())
        )
    for e in engines:
        lines += engine_lines(e)
    lines += [
        "",
        "Plots: `plots/speedup.png` (same-work speedup with CI and the band), `plots/tpot_cdf.png`, "
        "`plots/acceptance_by_position.png`, `plots/groups.png` (speedup with CI and acceptance per group, when a workload "
        "has groups).",
    ]
    return lines


def engine_lines(e: dict[str, Any]) -> list[str]:
    """The manifest's lines on one engine: version, start, command, start phases, what the engine log says about
    this CPU's linear layers, how its server was started, and its pool provenance."""
    lines = [
        f"- Engine `{e['arm']}`: vLLM {e['vllm_version']}, started in {_f(e['start_s'], 1)} s, "
        f"async scheduling {e['async_scheduling']}, prefix caching "
        f"{e['effective_settings'].get('enable_prefix_caching', '—')}, log `{e['log']}`",
        f"  - command: `{' '.join(e['command'])}`",
    ]
    if phases := phases_text(e.get("start_phases_s") or {}, e.get("first_request_s")):
        lines.append(f"  - {phases}")
    if fallback := (e.get("effective_settings") or {}).get("cpu_linear_fallback"):
        lines.append(
            f'  - on this CPU the engine runs its linear layers through torch, not oneDNN ("{fallback}"): '
            "its speed, and what speculation saves, do not carry to CPUs whose oneDNN has bf16 matmul "
            "(AVX512-BF16 or AMX); `--dtype float32` keeps them in oneDNN on this CPU"
        )
    if forked(e.get("engine_env") or {}):
        lines.append(
            "  - server forked from a preloaded interpreter (torch and vLLM imported once per run or engine "
            f"pool; same module, arguments and engine; {PRELOAD_ENV}=0 spawns it afresh)"
        )
    lines += pool_lines(e.get("reused") or {})
    return lines


def pool_lines(r: dict[str, Any]) -> list[str]:
    """The manifest's lines on a pooled engine's provenance (its ``reused`` record): who started a reused engine, the
    time this run waited for room on the GPU, and a start retried after a memory failure."""
    lines = []
    if r.get("reused"):
        lines.append(
            f"  - reused from the engine pool: started by `{r.get('started_by')}` at "
            f"{_when(r.get('started_unix_s'))}, {r.get('requests_served_before')} requests served before this "
            f"run, pids {r.get('pids')} (runs sharing an engine share its engine-instance offset)"
        )
    if r.get("waited_for_room_s"):
        lines.append(
            f"  - waited {_f(r['waited_for_room_s'], 1)} s for room on the GPU before this run took its engines "
            "(other runs held the pooled engines)"
        )
    if r.get("retried_after"):
        lines.append(f"  - started again after a memory failure: {r['retried_after']}")
    return lines
