"""Property-based bad input for run settings: any --speculative-config JSON and any numeric design flag either passes
validation or ends in one line that names the flag; never a traceback, never an engine start.

Each example goes through the real CLI entry point in-process (``specharness.cli.main``) with a missing model, so a
config that passes validation stops at model resolution, before any server would be launched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specharness.cli import main
from specharness.experiment.config import canonical_vllm_args

_json_scalars = st.none() | st.booleans() | st.integers(-5, 20) | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_spec_dicts = st.fixed_dictionaries(
    {},
    optional={
        "method": st.sampled_from(["ngram", "eagle", "", "NGRAM"]) | _json_scalars,
        "num_speculative_tokens": st.integers(-2, 10) | _json_scalars,
        "prompt_lookup_min": st.integers(-2, 10) | _json_scalars,
        "prompt_lookup_max": st.integers(-2, 10) | _json_scalars,
    },
)
_SPEC_FIELDS = ("speculative config", "--speculative-config")


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("specharness: error: "), err
    return lines[0]


def _base(tmp: Path) -> list[str]:
    return ["run", "--model", str(tmp / "no-such-model.gguf"), "--out", str(tmp / "run"), "--no-progress"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=_spec_dicts | _json)
def test_any_speculative_config_is_valid_or_named(
    spec: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_error_line(capsys, [*_base(tmp_path), f"--speculative-config={json.dumps(spec)}"])
    assert any(f in line for f in _SPEC_FIELDS) or "no-such-model.gguf" in line, line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flag=st.sampled_from(
        [
            "--blocks",
            "--requests",
            "--warmups",
            "--max-tokens-cap",
            "--num-speculative-tokens",
            "--prompt-lookup-min",
            "--prompt-lookup-max",
            "--min-correct",
            "--equivalence-margin",
            "--temperature",
            "--request-timeout",
            "--start-timeout",
            "--max-model-len",
            "--kv-cache-gib",
            "--gpu-memory-utilization",
            "--port",
            "--seed",
        ]
    ),
    value=st.integers(-3, 6) | st.floats(-2, 3, allow_nan=False) | st.sampled_from(["nan", "inf", "-inf"]),
)
def test_any_numeric_flag_is_valid_or_named(
    flag: str, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = str(value)
    try:
        line = _one_error_line(capsys, [*_base(tmp_path), f"{flag}={text}"])
    except SystemExit as exc:  # argparse rejected the type itself (e.g. 1.5 for an integer flag): usage + one error
        err = capsys.readouterr().err
        assert exc.code == 2 and flag in err and "Traceback" not in err, err
        return
    named = flag.removeprefix("--").replace("-", "_")  # the speculative settings are named as in the JSON
    assert flag in line or named in line or "no-such-model.gguf" in line, line
    if "no-such-model.gguf" in line:  # accepted: then the value must be one the engine and the sampler can use
        number = float(text)
        assert number == number and abs(number) != float("inf"), f"{flag} {text} was accepted"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(clients=st.text(alphabet="0123456789,-x ", min_size=1, max_size=8))
def test_any_client_list_is_valid_or_named(clients: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        line = _one_error_line(capsys, [*_base(tmp_path), f"--clients={clients}"])
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2 and "--clients" in err and "Traceback" not in err, err
        return
    assert "--clients" in line or "no-such-model.gguf" in line, line


_names = st.sampled_from(["--max-num-seqs", "--enforce-eager", "--max-num-batched-tokens", "--seed", "--block-size"])
_groups = st.lists(
    st.tuples(_names, st.lists(st.sampled_from(["1", "8", "-1", "abc"]), max_size=2)),
    max_size=5,
    unique_by=lambda g: g[0],
)


@given(_groups, st.randoms(use_true_random=False))
def test_canonical_vllm_args_ignore_option_order_and_spelling(groups: list[tuple[str, list[str]]], rnd: Any) -> None:
    """Distinct long options in any order, ``--a=x`` for ``--a x`` and underscores for dashes: one canonical form;
    dropping an option or changing a value changes it."""
    words = [w for name, values in groups for w in (name, *values)]
    shuffled = list(groups)
    rnd.shuffle(shuffled)
    respelled: list[str] = []
    for name, values in shuffled:
        snake = "--" + name[2:].replace("-", "_")
        respelled += [f"{snake}={values[0]}"] if len(values) == 1 else [snake, *values]
    canonical = canonical_vllm_args(words)
    assert canonical_vllm_args(respelled) == canonical == canonical_vllm_args(canonical)
    if groups:
        assert canonical_vllm_args(words[: -1 - len(groups[-1][1])]) != canonical  # the last option dropped
        changed = [w for name, values in groups[:-1] for w in (name, *values)] + [groups[-1][0], *groups[-1][1], "x"]
        assert canonical_vllm_args(changed) != canonical


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            ["--enable-prefix-caching", "--no-enable-prefix-caching"],
            ["--no-enable-prefix-caching", "--enable-prefix-caching"],
        ),
        (["--max-num-seqs", "4", "--max-num-seqs", "8"], ["--max-num-seqs", "8", "--max-num-seqs", "4"]),
        (["-tp", "2", "--tensor-parallel-size", "4"], ["--tensor-parallel-size", "4", "-tp", "2"]),
        (["--speculative-config.num_speculative_tokens", "5"], ["--speculative-config.num-speculative-tokens", "5"]),
    ],
    ids=["no-form", "repeated", "short-alias", "json-key"],
)
def test_canonical_vllm_args_keep_apart_what_vllm_reads_apart(first: list[str], second: list[str]) -> None:
    """vLLM's last flag wins, a short option may alias a long one, and after a dot the words are JSON keys: these
    pairs set different engines and must read as two setups."""
    assert canonical_vllm_args(first) != canonical_vllm_args(second)
