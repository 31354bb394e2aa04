"""The commands behind the CLI: one ``cmd_<name>(args) -> int`` per subcommand (pyperf's layout); each imports the
modules it drives when it runs, so ``specharness --help`` loads none of them. :mod:`specharness.cli` declares the
subcommands and names these handlers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specharness._errors import ConfigError
from specharness.console import say
from specharness.experiment.options import engine_fields

__all__ = [
    "cmd_aa_summary",
    "cmd_compare",
    "cmd_crosscheck",
    "cmd_import",
    "cmd_ledger",
    "cmd_machine",
    "cmd_matrix",
    "cmd_pair_record",
    "cmd_recompute_asv",
    "cmd_release_compare",
    "cmd_report",
    "cmd_run",
    "cmd_sampled",
    "cmd_simulate",
    "cmd_site",
    "cmd_spread",
    "cmd_starts",
]


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


def cmd_matrix(args: argparse.Namespace) -> int:
    import shlex
    import time

    from specharness.matrix.driver import plan_matrix, run_matrix
    from specharness.matrix.spec import load_matrix

    spec = load_matrix(args.file)
    if args.plan:
        plan = plan_matrix(spec, args.address)
        for job in plan.jobs:
            print(f"{job.key} ({job.kind}): specharness {shlex.join(job.argv)}")
        for slot in plan.slots:
            print(f"slot {slot.key}: {'one GPU' if slot.gpu else f'{slot.cores_per_job} core(s)'}")
        return 0
    out = args.out or Path("runs") / f"matrix-{time.strftime('%Y%m%d-%H%M%S')}"
    result = run_matrix(spec, out, address=args.address, say=say)
    done = sum(c.outcome.status == "done" for c in result.cells)
    print(f"matrix: {out / 'matrix.md'} ({done} of {len(result.cells)} jobs done; {result.interference.text})")
    return 0 if result.complete else 1


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
        f"\n**A/A identity record** (specharness aa-record files it with the band):\n{format_records(measure_aa_identity(args.run_dirs, kind, source))}"
    )
    return 0


def cmd_aa_record(args: argparse.Namespace) -> int:
    import json

    from specharness.experiment.machine_record import record_json, records_folder, write_record
    from specharness.reporting.aa_record import build_record

    if args.replace and not args.write:
        raise ConfigError("aa-record: --replace goes with --write")
    record = build_record(args.run_dirs)
    if args.write:
        path = write_record(record, records_folder(), replace=args.replace)
        print(f"{record.kind}: {record.band.source if record.band else ''}\nwritten to {path}")
    else:
        print(json.dumps(record_json(record), indent=1, ensure_ascii=False))
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
    from specharness.history.asv.series import superseded_note

    name = register_machine(args.name)["machine"]
    if note := superseded_note(name):
        print(note, file=sys.stderr)
    print(name)
    return 0


def cmd_release_compare(args: argparse.Namespace) -> int:
    from specharness.history.asv.series import superseded_note
    from specharness.history.review.releases import release_review

    review = release_review(args.results, args.release_a, args.release_b, args.machine, args.factor)
    if note := superseded_note(review.machine):
        print(note, file=sys.stderr)
    print(review.text())
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
    from specharness.experiment.rundir import sigterm_as_interrupt
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

    from specharness.history.asv.pairfile import read_pairs, record_from_run
    from specharness.history.asv.pairs import refile_pairs

    machine_dir = args.results / args.machine
    before = {r.run_dir.rsplit("/", 1)[-1]: r for r in read_pairs(machine_dir).values()}
    records = []
    for run_dir in args.run_dirs:
        record = record_from_run(run_dir)
        known = before.get(run_dir.name)
        if known is not None:  # keep how it was recorded: its setup, harness and folder name
            record = replace(  # a setup or harness the manifest gave where the first filing had none
                record,
                setup=known.setup or record.setup,
                harness=known.harness if "(" in known.harness else record.harness,
                run_dir=known.run_dir,
            )
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
