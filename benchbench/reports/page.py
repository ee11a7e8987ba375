"""One self-contained HTML page from a Markdown report: an outcome banner first, then the
Markdown's sections with the figures inline as base64 PNG, each under the section it belongs
to. compare.html, history.html and fleet.html are rendered here.

The same rules as report.html: inline CSS, no script, no external URL, and every string that
came from the user or a machine escaped with html.escape (reports/html_markdown.py's Markdown
converter escapes each line before its few tags).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchbench.reports.html import CSS
from benchbench.reports.html_markdown import esc, img, markdown_to_html, slug, split_sections

OUTCOME_CSS = """
.outcome { max-width: none; padding: 18px max(24px, calc((100% - 1052px) / 2)) 14px; }
.outcome.bad { background: #fdecea; border-bottom: 4px solid #c0392b; }
.outcome.good { background: #e6f4ea; border-bottom: 4px solid #1e8e3e; }
.outcome h1 { margin: 0; font-size: 34px; }
.outcome p { margin: 4px 0; }
"""


@dataclass(frozen=True)
class Figure:
    name: str
    png: bytes
    alt: str
    section: str | None = None  # the title (its start) of the section it follows


def outcome(bad: bool, lead: str, title: str, lines: Sequence[str] = ()) -> str:
    """The banner: `lead` and `lines` are HTML already escaped, `title` is text."""
    return (f'<section class="outcome {"bad" if bad else "good"}"><p>{lead}</p>'
            f"<h1>{esc(title)}</h1>" + "".join(f"<p>{x}</p>" for x in lines) + "</section>")


def render(title: str, banner: str, markdown_text: str, figures: Sequence[Figure],
           notes: Sequence[str] | None = None) -> str:
    sections = split_sections(markdown_text)
    titles = [t for t, _ in sections if t]
    body = [banner, "<nav>" + " ".join(
        f'<a href="#{slug(t)}">{esc(t)}</a>' for t in titles) + "</nav>"]
    placed: set[str] = set()
    for head, lines in sections:
        part = markdown_to_html(lines)
        for f in figures:
            if f.section and head and head.startswith(f.section) and f.name not in placed:
                part += img(f.name, f.png, f.alt)
                placed.add(f.name)
        if part.strip():
            body.append(f"<section>{part}</section>")
    rest = [f for f in figures if f.name not in placed]
    if rest:
        body.append('<section id="more-figures"><h2>More figures</h2>'
                    + "".join(img(f.name, f.png, f.alt) for f in rest) + "</section>")
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>'
                    + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}{OUTCOME_CSS}</style></head>\n<body>"
            + "\n".join(body) + "\n</body></html>\n")
