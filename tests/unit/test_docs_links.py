"""The README is a short front door and every relative link in it and in docs/ resolves, file and anchor.

Anchors follow GitHub's rules for headings: the heading's text without its Markdown (code spans, emphasis, link
targets), lowercased, every character that is not a letter, mark, number, underscore, hyphen or space dropped,
spaces turned into hyphens; a repeated heading gets ``-1``, ``-2``, ... Links inside code (fenced blocks, code spans)
are not links. No network: links with a scheme are skipped.
"""

from __future__ import annotations

import re
import shutil
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The README's two commands, byte for byte: CI (.ci/run) runs them, so they stay its first code block.
TWO_COMMANDS = (
    "bash scripts/setup.sh && .venv/bin/specharness run --profile quick     # set up, then run the default experiment\n"
    "bash scripts/test.sh                                                   # lint, types, unit + engine-backed tests\n"
)
MAX_README_LINES = 150

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
        elif fence is not None and m and m.group(1).startswith(fence):
            fence = None
        elif fence is None:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's Markdown text."""
    text = _INLINE_LINK_TEXT.sub(r"\1", heading)
    text = _CODE_SPAN.sub(lambda m: m.group(2), text)
    text = text.replace("*", "").lower()
    kept = "".join(
        ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of a Markdown file."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each run of non-blank prose lines: a code span may cross a line break."""
    out: list[tuple[int, list[str]]] = []
    last = -1
    for number, line in _prose_lines(text):
        if not line.strip():
            last = -1
            continue
        if number == last + 1 and out:
            out[-1][1].append(line)
        else:
            out.append((number, [line]))
        last = number
    return [(first, "\n".join(block)) for first, block in out]


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in a Markdown file's prose, code spans left out."""
    out: list[tuple[int, str]] = []
    for first, block in _paragraphs(path.read_text(encoding="utf-8")):
        prose = _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), block)  # keeps line breaks
        out.extend((first + prose.count("\n", 0, m.start()), m.group(1)) for m in _LINK.finditer(prose))
    return out


def markdown_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def broken_links(root: Path) -> list[str]:
    """One line per relative link under ``root`` (README.md, docs/*.md) whose file or anchor does not exist."""
    problems: list[str] = []
    for md in markdown_files(root):
        for number, target in links(md):
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # empty, or http:, https:, mailto: ...: not checked here
            file_part, _, anchor = target.partition("#")
            dest = (md.parent / file_part).resolve() if file_part else md
            where = f"{md.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no file {file_part}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in {dest.name}")
            elif anchor and dest.suffix != ".md":
                problems.append(f"{where}: an anchor into a file that is not Markdown")
    return problems


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    assert (ROOT / "docs").is_dir()
    assert broken_links(ROOT) == []


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    """The control: a copy of the README and docs with one missing file and one missing anchor fails the check."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    before = broken_links(tmp_path)
    with (tmp_path / "docs" / "method.md").open("a", encoding="utf-8") as f:
        f.write("\nSee [nowhere](nowhere.md) and [a lost section](results.md#no-such-section).\n")
    problems = [p for p in broken_links(tmp_path) if p not in before]
    assert len(problems) == 2
    assert "no file nowhere.md" in problems[0]
    assert "#no-such-section" in problems[1]


def test_slug_follows_githubs_rules() -> None:
    assert slug("Engine starts, first and second (2026-12-04)") == "engine-starts-first-and-second-2026-12-04"
    assert slug("Real traffic at 8 clients, with an A/A arm (H200, vLLM 0.26.0, 2026-12-04)") == (
        "real-traffic-at-8-clients-with-an-aa-arm-h200-vllm-0260-2026-12-04"
    )
    assert slug("Rebuilt (`scripts/rebuild_reports.sh`, *2026*)") == "rebuilt-scriptsrebuild_reportssh-2026"
    assert slug("Where a release's vLLM comes from") == "where-a-releases-vllm-comes-from"


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < MAX_README_LINES
    first_block = re.search(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    assert first_block is not None
    assert first_block.group(1) == TWO_COMMANDS
