"""report.html on a SYNTHETIC run folder: one self-contained page, the answer first, every plot inlined."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from specharness.experiment.synthetic import write_synthetic_run
from specharness.reporting.html_report import REPORT_HTML, markdown_to_html, render_html
from specharness.reporting.report import write_report


class _Page(HTMLParser):
    """Tag sequence (``div`` wrappers left out) and text of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "div":
            self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag != "div":
            self.tags.append("/" + tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parsed(fragment: str) -> tuple[list[str], str]:
    page = _Page()
    page.feed(fragment)
    return page.tags, re.sub(r"\s+", "", "".join(page.text))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_synthetic_run(tmp_path_factory.mktemp("html") / "run", records=480)
    write_report(run)
    return run


def test_report_html_is_self_contained_and_inlines_every_plot(run: Path) -> None:
    page = (run / REPORT_HTML).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "http://" not in page and "https://" not in page
    assert 'src="plots/' not in page and not re.search(r"""\b(src|href)=(?!["']?(data:|#))""", page)
    assert "<script" not in page and "<link" not in page
    pngs = sorted((run / "plots").glob("*.png"))
    assert len(pngs) >= 4
    for png in pngs:
        uri = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
        assert f'src="{uri}"' in page, png.name
        assert f"plots/{png.name}</code></figcaption>" in page


def test_report_html_leads_with_the_answer_and_keeps_the_verdicts(run: Path) -> None:
    page = (run / REPORT_HTML).read_text(encoding="utf-8")
    report = orjson.loads((run / "report.json").read_bytes())
    h2 = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert h2[:3] == ["Answer", "Decision", "Plots"], h2  # the plots right after the decision table and its rules
    assert page.index("<h1") < page.index(">Answer</h2>") < page.index(">Decision</h2>") < page.index("<table>")
    assert "<title>specharness decision report — run</title>" in page
    answer = page[page.index(">Answer</h2>") : page.index(">Decision</h2>")]
    for c in report["comparisons"]:
        for verdict in (c["speed"]["verdict"], c["quality"]["verdict"]):
            assert f"<strong>{verdict}</strong>" in answer, verdict
            assert f"<td><strong>{verdict}</strong></td>" in page, verdict
    assert "**" not in page  # no bold left unconverted


def test_report_html_without_plots_has_no_images(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=48)
    write_report(run, plots=False)
    page = (run / REPORT_HTML).read_text(encoding="utf-8")
    assert ">Answer</h2>" in page and "<img" not in page and ">Plots</h2>" not in page


def test_partial_run_warning_is_a_quote(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=48)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["status"] = "interrupted"
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    write_report(run, plots=False)
    page = (run / REPORT_HTML).read_text(encoding="utf-8")
    assert re.search(r"<blockquote>\s*<p><strong>PARTIAL REPORT — run status: interrupted\.</strong>", page)
    assert page.index("<blockquote>") < page.index(">Answer</h2>")


def test_special_characters_are_escaped() -> None:
    md = (
        "# report <run>\n\n## Answer\n\n- **<script>alert(1)</script> & co, 1 client, ngram vs base\"line'**: "
        'speed **helps**; a*b*c stays, `x<y & "z"`\n\n'
        "| workload | arm |\n|---|---|\n| <img src=x onerror=alert(1)> | a&b \\| c |\n"
    )
    page = render_html(md)
    assert "<script>" not in page and "<img" not in page and "<run>" not in page
    assert (
        "<strong>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co, 1 client, ngram vs base&quot;line&#x27;</strong>"
        in page
    )
    assert "<code>x&lt;y &amp; &quot;z&quot;</code>" in page and "a*b*c stays" in page
    assert "<td>&lt;img src=x onerror=alert(1)&gt;</td><td>a&amp;b | c</td>" in page
    assert "<title>report &lt;run&gt;</title>" in page


def test_nested_list_and_lazy_lines() -> None:
    html = markdown_to_html("- a\n  - b *c*\n  - d\n- e\ncontinued\n\ntext\nmore")
    assert html == (
        "<ul><li>a<ul><li>b <em>c</em></li><li>d</li></ul></li><li>e\ncontinued</li></ul>\n<p>text\nmore</p>"
    )


def test_converter_agrees_with_commonmark_on_the_report(run: Path) -> None:
    """The converter against markdown-it (CommonMark with tables; rich's dependency) on a whole report.md: the same
    elements in the same order and the same text. Fails when report.md starts using Markdown the converter lacks."""
    markdown_it = pytest.importorskip("markdown_it")
    md = (run / "report.md").read_text()
    md += "\n> **PARTIAL** see `x`\n\n- a\n  - b\n\n#### small *note*\n"
    assert _parsed(markdown_to_html(md)) == _parsed(markdown_it.MarkdownIt("commonmark").enable("table").render(md))
