"""``report.html``: report.md as one self-contained page (inline CSS, plots inlined as data URIs, no script).

report.md is converted by a small converter for exactly the Markdown it uses: ``#``..``####`` headings,
paragraphs, ``- `` lists (nested by two spaces), pipe tables with a header separator row, ``> `` quotes (the
partial-run warning), ``**bold**``, ``*italic*`` and `` `code` ``; every other character is escaped. The page keeps
report.md's order (the answer first); the plots follow the decision section, each captioned with its file name.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["REPORT_HTML", "markdown_to_html", "render_html", "write_html_report"]

REPORT_HTML = "report.html"

_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1f24; margin: 0 auto;
  padding: 1.5em 2em 4em; max-width: 1500px; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: .3em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.1em; margin-top: 1.5em; }
h4 { font-size: 1em; }
p, li { max-width: 110ch; }
code { font: .88em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f3f4f6;
  padding: .1em .3em; border-radius: 3px; overflow-wrap: anywhere; }
blockquote { margin: 1em 0; padding: .5em 1em; border-left: 4px solid #d29922; background: #fff8e5; }
.table-wrap { overflow-x: auto; margin: 1em 0; }
table { border-collapse: collapse; font-size: .9em; }
th, td { border: 1px solid #d0d7de; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
tbody tr:nth-child(even) { background: #fafbfc; }
td { min-width: 4em; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: 0; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { font-size: .85em; color: #57606a; }
"""

# the plots a reader wants first (the speed answer), then any others by name
_PLOT_ORDER = ("speedup", "sweep_speedup", "sweep_latency_throughput", "groups", "tpot_cdf", "acceptance_by_position")
_HEADING = re.compile(r"^(#{1,4}) +(.*?)(?: +#+)? *$")
_ITEM = re.compile(r"^( *)- +(.*)$")
_SEPARATOR = re.compile(r"^\|? *:?-+:? *(\| *:?-+:? *)*\|? *$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")


def _inline(text: str) -> str:
    """One line's inline Markdown (code, bold, italic) as HTML; everything else escaped."""
    codes: list[str] = []

    def keep(m: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    out = html.escape(_CODE.sub(keep, text.replace("\x00", "")))
    out = _ITALIC.sub(r"<em>\1</em>", _BOLD.sub(r"<strong>\1</strong>", out))
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], out)


def _cells(row: str) -> list[str]:
    """A pipe-table row's cells (an escaped ``\\|`` stays in its cell)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def _table(rows: list[str]) -> str:
    head: list[str] = []
    if len(rows) > 1 and _SEPARATOR.match(rows[1]):
        head, rows = _cells(rows[0]), rows[2:]
    out = ['<div class="table-wrap"><table>']
    if head:
        out.append("<thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead>")
    body = []
    for row in rows:
        cells = _cells(row)
        if head:  # as Markdown does: a row is cut or padded to the header's width
            cells = (cells + [""] * len(head))[: len(head)]
        body.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
    if body:
        out += ["<tbody>", *body, "</tbody>"]
    out.append("</table></div>")
    return "\n".join(out)


def _list(items: list[tuple[int, str]]) -> str:
    """Nested ``<ul>`` from (indent, text) items; a deeper indent opens a list inside the previous item."""
    out: list[str] = []
    depths: list[int] = []
    for indent, text in items:
        if not depths or indent > depths[-1]:
            out.append("<ul>")
            depths.append(indent)
        else:
            while len(depths) > 1 and indent < depths[-1]:
                out.append("</li></ul>")
                depths.pop()
            out.append("</li>")
        out.append(f"<li>{_inline(text)}")
    out.append("</li></ul>" * len(depths))
    return "".join(out)


def _slug(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    slug, n = base, 1
    while slug in used:
        n += 1
        slug = f"{base}-{n}"
    used.add(slug)
    return slug


def markdown_to_html(text: str, *, ids: set[str] | None = None) -> str:
    """report.md's Markdown subset as HTML block elements; ``ids`` the heading ids already taken (added to)."""
    used = set() if ids is None else ids
    lines = text.splitlines()
    out: list[str] = []
    i = 0

    def starts_block(line: str) -> bool:
        return bool(_HEADING.match(line) or _ITEM.match(line) or line.startswith(("|", ">")))

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif m := _HEADING.match(line):
            level = len(m.group(1))
            title = m.group(2)
            out.append(f'<h{level} id="{_slug(title, used)}">{_inline(title)}</h{level}>')
            i += 1
        elif line.startswith(">"):
            quoted: list[str] = []
            while i < len(lines) and lines[i].startswith(">"):
                quoted.append(lines[i][1:].removeprefix(" "))
                i += 1
            out.append(f"<blockquote>\n{markdown_to_html(chr(10).join(quoted), ids=used)}\n</blockquote>")
        elif line.startswith("|"):
            rows: list[str] = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            out.append(_table(rows))
        elif _ITEM.match(line):
            items: list[tuple[int, str]] = []
            while i < len(lines) and lines[i].strip():
                if item := _ITEM.match(lines[i]):
                    items.append((len(item.group(1)), item.group(2)))
                elif starts_block(lines[i]):
                    break
                else:  # a lazy continuation line: part of the item above
                    items[-1] = (items[-1][0], f"{items[-1][1]}\n{lines[i].strip()}")
                i += 1
            out.append(_list(items))
        else:
            para: list[str] = []
            while i < len(lines) and lines[i].strip() and (not para or not starts_block(lines[i])):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(chr(10).join(para))}</p>")
    return "\n".join(out)


def _plot_rank(png: Path) -> tuple[int, str]:
    return (_PLOT_ORDER.index(png.stem) if png.stem in _PLOT_ORDER else len(_PLOT_ORDER), png.name)


def _plots_html(plots_dir: Path) -> str:
    """A ``Plots`` section: every PNG of ``plots_dir`` inlined as a data URI, its file name the caption."""
    figures = []
    for png in sorted(plots_dir.glob("*.png"), key=_plot_rank):
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        name = html.escape(png.name)
        figures.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
            f"<figcaption><code>plots/{name}</code></figcaption></figure>"
        )
    if not figures:
        return ""
    return '<h2 id="plots">Plots</h2>\n<div class="plots">\n' + "\n".join(figures) + "\n</div>"


def render_html(markdown_text: str, plots_dir: Path | None = None, title: str | None = None) -> str:
    """The whole page: report.md's sections in order, the plots of ``plots_dir`` (if any) after the decision
    section (after the answer when there is none); ``title`` defaults to report.md's ``# `` heading."""
    sections: list[list[str]] = [[]]
    for line in markdown_text.splitlines():
        if line.startswith("## "):
            sections.append([])
        sections[-1].append(line)
    if title is None:
        title = next((m.group(2) for line in sections[0] if (m := _HEADING.match(line)) and m.group(1) == "#"), "")
    heads = [s[0][3:].strip() if s and s[0].startswith("## ") else "" for s in sections]
    after = next((k for name in ("Decision", "Answer") for k, h in enumerate(heads) if h == name), len(sections) - 1)
    used = {"plots"}
    body = []
    for k, section in enumerate(sections):
        body.append(markdown_to_html("\n".join(section), ids=used))
        if k == after and plots_dir is not None and plots_dir.is_dir():
            body.append(_plots_html(plots_dir))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body>\n</html>\n"
    )


def write_html_report(run_dir: Path, markdown_text: str, *, plots: bool = True) -> Path:
    """Write ``run_dir/report.html`` from report.md's text, with ``run_dir/plots/*.png`` inlined when ``plots``."""
    path = run_dir / REPORT_HTML
    path.write_text(render_html(markdown_text, run_dir / "plots" if plots else None), encoding="utf-8")
    return path
