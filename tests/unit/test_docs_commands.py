"""Every command the README and docs/ show is one the tools accept: each ``specharness`` subcommand exists and every
option named after it is one of its options (its ``--help`` then runs), each ``asv`` subcommand and option is ASV's,
and every ``scripts/…`` file named exists. Commands are read from fenced code blocks and code spans; a placeholder
value (``RUN_DIR``, ``A B``) is not parsed, only the names."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from specharness.cli import _parser, main

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_PROGRAM = re.compile(r"(?:^|[\s;&|(])(?:\.venv/bin/|python -m )?(specharness|asv) ([a-z][a-z-]*)(.*)")
_SCRIPT = re.compile(r"\bscripts/[\w./-]+\.(?:sh|py|toml)\b")


def code_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every fenced code line and every code span outside fences."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
        elif fence is not None and m and m.group(1).startswith(fence):
            fence = None
        elif fence is not None:
            out.append((number, line))
        else:
            out += [(number, span.group(2)) for span in _SPAN.finditer(line)]
    return out


def commands(program: str) -> list[tuple[str, str, list[str]]]:
    """(where, subcommand, option names) for every ``program SUBCOMMAND …`` the docs show."""
    found = []
    for path in DOCS:
        for number, text in code_texts(path):
            pieces = re.split(r"&&|\|\||;|\|", text.split(" # ", 1)[0])  # each command of a chain on its own
            for m in (m for piece in pieces for m in _PROGRAM.finditer(piece)):
                if m.group(1) != program:
                    continue
                rest = m.group(3).replace("\\", " ")
                try:
                    words = shlex.split(rest)
                except ValueError:  # a code span cut mid-quote: the names are still words
                    words = rest.split()
                options = [w.strip("[]…,").split("=", 1)[0] for w in words]
                found.append(
                    (f"{path.relative_to(ROOT)}:{number}", m.group(2), [o for o in options if o.startswith("-")])
                )
    return found


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def option_names(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def test_the_docs_show_commands_of_both_programs() -> None:
    """The reader below finds what it checks (fails if it silently reads nothing)."""
    ours, asv = commands("specharness"), commands("asv")
    assert len(ours) >= 30 and {c[1] for c in ours} >= {"run", "report", "release-compare", "import"}, ours[:5]
    assert len(asv) >= 10 and {c[1] for c in asv} >= {"run", "compare", "publish"}, asv[:5]


def test_every_specharness_command_in_the_docs_parses() -> None:
    subs = subparsers(_parser())
    problems = []
    for where, sub, options in commands("specharness"):
        if sub not in subs:
            problems.append(f"{where}: no subcommand {sub!r}")
            continue
        known = option_names(subs[sub])
        problems += [f"{where}: specharness {sub} has no option {o}" for o in options if o not in known]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("sub", sorted({c[1] for c in commands("specharness")}))
def test_help_of_each_documented_subcommand(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([sub, "--help"])
    assert stop.value.code == 0 and f"specharness {sub}" in capsys.readouterr().out


def test_every_asv_command_in_the_docs_is_asvs() -> None:
    from asv.commands import make_argparser

    subs = subparsers(make_argparser()[0])
    problems = []
    for where, sub, options in commands("asv"):
        if sub not in subs:
            problems.append(f"{where}: asv has no subcommand {sub!r}")
            continue
        known = option_names(subs[sub])
        problems += [f"{where}: asv {sub} has no option {o}" for o in options if o not in known]
    assert problems == [], "\n".join(problems)


def test_every_script_the_docs_name_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path in DOCS
        for number, text in code_texts(path)
        for name in _SCRIPT.findall(text)
        if not (ROOT / name).exists()
    ]
    assert missing == [], "\n".join(missing)
