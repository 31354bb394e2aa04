"""Cross-check the harness's timing against vLLM's own serving benchmark on one server, same prompts, one client.

Starts one engine (prefix caching off, so the second pass over the same prompts is not served from the cache
the first one filled), sends the same chat prompts (temperature 0, the same max_tokens) first through
``vllm bench serve`` (``python -m vllm.entrypoints.cli.main bench serve``), then through specharness's client, and
writes ``crosscheck.json`` / ``crosscheck.md`` with both TTFT and TPOT medians and their relative difference.
Each pass also reads the engine's own latency histograms before and after, so both clients' means can be set
against what the server measured for the same requests (a third opinion on which client adds time).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import EngineError
from specharness.engines.counters import scrape, server_latency_means
from specharness.engines.model import resolve_model, served_model_name
from specharness.engines.server import EngineServer, EngineSettings
from specharness.experiment.design import build_arms, get_profile
from specharness.records import RequestRecord
from specharness.traffic.client import RequestMeta, Sampling, build_body, send_request
from specharness.traffic.workloads import Case, interleave_by_group, load_workload

__all__ = ["run_crosscheck"]


async def _ours(server: EngineServer, cases: list[Case], model: str) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        for seq, case in enumerate(cases):
            meta = RequestMeta(
                arm=server.arm.name, block=0, workload="crosscheck", clients=1, warmup=False, cell="crosscheck", seq=seq
            )
            await send_request(
                client,
                server.base_url,
                case,
                build_body(case, model, Sampling()),
                meta,
                records.append,
                timeout_s=300.0,
            )
    return records


def run_crosscheck(
    out_dir: Path,
    *,
    model_spec: str = "default",
    arm_name: str = "baseline",
    num_prompts: int = 16,
    max_tokens: int = 64,
    workload: str = "copy",
    gpu_memory_utilization: float | None = None,
    extra_engine_args: tuple[str, ...] = ("--no-enable-prefix-caching",),
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    model = resolve_model(model_spec)
    served = served_model_name(model)
    cases_all = interleave_by_group(load_workload(workload).cases)
    cases = [
        Case(id=c.id, max_tokens=max_tokens, group=c.group, messages=c.messages, check=c.check)
        for c in (cases_all[i % len(cases_all)] for i in range(num_prompts))
    ]
    dataset = out_dir / "crosscheck_prompts.jsonl"
    with open(dataset, "w") as handle:
        for c in cases:
            assert c.messages is not None
            handle.write(json.dumps({"prompt": c.messages[-1]["content"], "output_tokens": max_tokens}) + "\n")
    arm = next(a for a in build_arms(get_profile("standard")) if a.name == arm_name)
    settings = EngineSettings(
        model_path=str(model.serve_path),
        served_model_name=served,
        gpu_memory_utilization=gpu_memory_utilization,
        extra_args=extra_engine_args,
    )
    server = EngineServer(settings, arm, out_dir / f"crosscheck-{arm_name}.log")
    server.start()
    try:
        asyncio.run(_ours(server, cases[:2], served))  # warm both paths' caches alike
        passes: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        for index, tool in enumerate(("vllm", "specharness", "specharness", "vllm")):  # ABBA: order cancels drift
            before = scrape(server.base_url)
            if tool == "vllm":
                bench_json = out_dir / f"vllm_bench_serve_{index}.json"
                cmd = [
                    sys.executable,
                    "-m",
                    "vllm.entrypoints.cli.main",
                    "bench",
                    "serve",
                    "--backend",
                    "openai-chat",
                    "--endpoint",
                    "/v1/chat/completions",
                    "--base-url",
                    server.base_url,
                    "--model",
                    served,
                    "--tokenizer",
                    str(model.serve_path),
                    "--dataset-name",
                    "custom",
                    "--dataset-path",
                    str(dataset),
                    "--custom-output-len",
                    str(max_tokens),
                    "--skip-chat-template",
                    "--num-prompts",
                    str(num_prompts),
                    "--max-concurrency",
                    "1",
                    "--temperature",
                    "0",
                    "--num-warmups",
                    "0",
                    "--save-result",
                    "--result-dir",
                    str(out_dir),
                    "--result-filename",
                    bench_json.name,
                    "--disable-shuffle",
                ]
                bench = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                (out_dir / f"vllm_bench_serve_{index}.log").write_text(bench.stdout + bench.stderr)
                if bench.returncode != 0 or not bench_json.is_file():
                    raise EngineError(f"vllm bench serve failed (exit {bench.returncode}); see {out_dir}")
                theirs = json.loads(bench_json.read_text())
                passes.append(
                    {
                        "pass": index,
                        "tool": "vllm bench serve",
                        "median_ttft_ms": theirs.get("median_ttft_ms"),
                        "median_tpot_ms": theirs.get("median_tpot_ms"),
                        "mean_ttft_ms": theirs.get("mean_ttft_ms"),
                        "mean_tpot_ms": theirs.get("mean_tpot_ms"),
                        "completed": theirs.get("completed"),
                        "output_tokens": theirs.get("total_output_tokens"),
                        "command": cmd,
                    }
                )
            else:
                ours = [r for r in asyncio.run(_ours(server, cases, served)) if r.error_kind is None]
                tpots = [r.tpot_s for r in ours if r.tpot_s == r.tpot_s]
                passes.append(
                    {
                        "pass": index,
                        "tool": "specharness",
                        "median_ttft_ms": statistics.median(r.ttft_s for r in ours) * 1000,
                        "median_tpot_ms": statistics.median(tpots) * 1000 if tpots else float("nan"),
                        "mean_ttft_ms": statistics.fmean(r.ttft_s for r in ours) * 1000,
                        "mean_tpot_ms": statistics.fmean(tpots) * 1000 if tpots else float("nan"),
                        "completed": len(ours),
                        "output_tokens": sum(r.output_tokens for r in ours),
                    }
                )
            passes[-1].update(server_latency_means(scrape(server.base_url).minus(before).totals))
        bench_s = time.perf_counter() - t0
    finally:
        server.stop()

    def mean_of(tool: str, key: str) -> float:
        return statistics.fmean(p[key] for p in passes if p["tool"] == tool)

    result: dict[str, Any] = {
        "vllm_version": server.version,
        "arm": arm_name,
        "num_prompts": num_prompts,
        "max_tokens": max_tokens,
        "wall_s": bench_s,
        "passes": passes,
        "engine_args": list(extra_engine_args),
    }
    for key in ("median_ttft_ms", "median_tpot_ms"):
        a, b = mean_of("vllm bench serve", key), mean_of("specharness", key)
        result[key] = {"vllm bench serve": a, "specharness": b, "diff_pct": (b - a) / a * 100 if a else float("nan")}
    (out_dir / "crosscheck.json").write_text(json.dumps(result, indent=2))
    md = [
        f"# Cross-check vs vllm bench serve (vLLM {server.version}, arm {arm_name}, {num_prompts} prompts, 1 client)",
        "",
        "Passes in ABBA order on one server; each row is one pass.",
        "",
        "| pass | tool | TTFT median (ms) | TPOT median (ms) | completed | output tokens |",
        "|---|---|---|---|---|---|",
    ]
    for p in passes:
        md.append(
            f"| {p['pass']} | {p['tool']} | {p['median_ttft_ms']:.2f} | {p['median_tpot_ms']:.2f} | "
            f"{p['completed']} | {p['output_tokens']} |"
        )
    md += [
        "",
        "Means over the same requests, client-side and as the engine's own histograms saw them:",
        "",
        "| pass | tool | TTFT mean client / server (ms) | TPOT mean client / server (ms) |",
        "|---|---|---|---|",
    ]
    for p in passes:
        md.append(
            f"| {p['pass']} | {p['tool']} | {p.get('mean_ttft_ms', float('nan')):.2f} / "
            f"{p['server_mean_ttft_ms']:.2f} | {p.get('mean_tpot_ms', float('nan')):.2f} / {p['server_mean_tpot_ms']:.2f} |"
        )
    md += ["", "| metric | vllm bench serve (mean of passes) | specharness | difference |", "|---|---|---|---|"]
    for key, label in (("median_ttft_ms", "TTFT median (ms)"), ("median_tpot_ms", "TPOT median (ms)")):
        r = result[key]
        md.append(f"| {label} | {r['vllm bench serve']:.2f} | {r['specharness']:.2f} | {r['diff_pct']:+.1f}% |")
    (out_dir / "crosscheck.md").write_text("\n".join(md) + "\n")
    return result
