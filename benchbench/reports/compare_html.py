"""Render a comparison as one self-contained compare.html: the outcome first, then compare.md's
sections with the figures inline as base64 PNG.

The same rules as report.html: inline CSS, no script, no external URL, and every string that
came from the user or a machine (labels, paths, hostnames, GPU names, reasons) escaped with
html.escape: the Markdown converter of reports/html.py escapes each line before its few tags.
"""

from __future__ import annotations

from benchbench.compare.comparison import Comparison
from benchbench.reports.compare_plots import ALT
from benchbench.reports.html import CSS, _img, esc, markdown_to_html, slug, split_sections

EXTRA_CSS = """
.outcome { max-width: none; padding: 18px max(24px, calc((100% - 1052px) / 2)) 14px; }
.outcome.bad { background: #fdecea; border-bottom: 4px solid #c0392b; }
.outcome.good { background: #e6f4ea; border-bottom: 4px solid #1e8e3e; }
.outcome h1 { margin: 0; font-size: 34px; }
.outcome p { margin: 4px 0; }
"""
# compare.md's section a figure belongs under.
FIGURE_SECTIONS = {"headline": "Headline figures", "allreduce_busbw": "Measurements"}


def _outcome(comp: Comparison) -> str:
    n = len(comp.outcomes("regressed"))
    cls, title = ("bad", f"{n} regression(s)") if n else ("good", "No regression")
    sides = " vs ".join(esc(s.label) for s in comp.sides)
    hw = "".join(f"<p><strong>Different hardware</strong>: {esc(lab)} is compared with the "
                 "baseline, but no regression is called on it.</p>"
                 for lab in comp.different_hardware)
    return (f'<section class="outcome {cls}"><p>benchbench compare · {sides} · baseline '
            f"<strong>{esc(comp.baseline.label)}</strong></p><h1>{esc(title)}</h1>"
            f"<p>exit {3 if n else 0}: significant at α = {esc(f'{comp.alpha:g}')} and beyond "
            f"{esc(f'{comp.threshold_pct:g}')}%.</p>{hw}</section>")


def render(comp: Comparison, markdown_text: str, plots: dict[str, bytes],
           notes: list[str] | None = None) -> str:
    sections = split_sections(markdown_text)
    titles = [t for t, _ in sections if t]
    body = [_outcome(comp), "<nav>" + " ".join(
        f'<a href="#{slug(t)}">{esc(t)}</a>' for t in titles) + "</nav>"]
    placed = set()
    for title, lines in sections:
        part = markdown_to_html(lines)
        for name, where in FIGURE_SECTIONS.items():
            if name in plots and title and title.startswith(where):
                part += _img(name, plots[name], ALT[name])
                placed.add(name)
        if part.strip():
            body.append(f"<section>{part}</section>")
    rest = [n for n in plots if n not in placed]
    if rest:
        body.append('<section id="more-figures"><h2>More figures</h2>'
                    + "".join(_img(n, plots[n], ALT.get(n, n)) for n in rest) + "</section>")
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>'
                    + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></section>")
    title = esc("benchbench compare: " + " vs ".join(s.label for s in comp.sides))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}{EXTRA_CSS}</style></head>\n<body>"
            + "\n".join(body) + "\n</body></html>\n")
