"""The Markdown subset report.md, compare.md, history.md and fleet.md use (headings, tables,
lists, paragraphs, bold, code) as HTML, and the few helpers every page shares.

Every text is escaped with html.escape before it gets a tag: a string that came from the user
or a machine (labels, hostnames, paths, reasons) cannot add markup.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def inline(text: Any) -> str:
    """Escape, then turn Markdown's **bold** and `code` into tags."""
    out = esc(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def slug(text: str) -> str:
    return "s-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section")


def img(name: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="fig-{esc(name)}"><img src="data:image/png;base64,{data}" '
            f'alt="{esc(alt)}"></figure>')


# --- the Markdown subset report.md uses: headings, tables, lists, paragraphs, bold, code ------

# a number, but not a count of named things ("8× NVIDIA H100 …" is text: right-aligned and kept
# on one line, it pushed fleet.html's Measurements table past the page's edge)
_NUM = re.compile(r"^(\*\*)?[−\-]?\d(?![\d.,]*×\s*[A-Za-z])")
_BULLET = re.compile(r"^\s*[-*] ")
# a figure, not a sentence that opens with one: kept on one line, "575 TFLOP/s to 604 TFLOP/s
# against 782 TFLOP/s …; 2.24 kimages/s against …" squeezed history.html's Outlier runs table
# into a column a word wide
NUM_CHARS = 40
SPAN_TO = " to "  # between the least and the most of a span (history_text.span)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _table(rows: list[str]) -> list[str]:
    head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    # A column of numbers is right-aligned, so that magnitudes line up.
    num = [all(_NUM.match(r[i]) and len(r[i]) <= NUM_CHARS for r in body
               if i < len(r) and r[i])
           for i in range(max(map(len, body), default=0))]
    out = ['<div class="scroll"><table>']
    if any(head):  # report.md's key-value tables have an empty header row
        out.append("<thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
                   + "</tr></thead>")
    out.append("<tbody>")
    for r in body:
        out.append("<tr>" + "".join(
            _num_cell(c) if num[i] else f"<td>{inline(c)}</td>" for i, c in enumerate(r))
            + "</tr>")
    return out + ["</tbody></table></div>"]


def _num_cell(text: str) -> str:
    """A number's cell, kept on one line; a span of two ("784 TFLOP/s to 787 TFLOP/s") may
    break before its "to" only, each figure whole, so that a table of spans leaves its text
    columns room."""
    if SPAN_TO not in text:
        return f'<td class="num">{inline(text)}</td>'
    parts = [inline(part).replace(" ", "&nbsp;") for part in text.split(SPAN_TO)]
    return '<td class="num wrap">' + " to&nbsp;".join(parts) + "</td>"


def markdown_to_html(lines: list[str]) -> str:
    """Convert report.md's Markdown subset. Each text is escaped before it gets a tag."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif m := re.match(r"^(#{1,4}) (.*)$", line):
            level = max(2, len(m.group(1)))  # the page's one h1 is the verdict
            out.append(f'<h{level} id="{slug(m.group(2))}">{inline(m.group(2))}</h{level}>')
            i += 1
        elif line.lstrip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            block = lines[i:j]
            if len(block) >= 2 and re.match(r"^\s*\|(\s*:?-+:?\s*\|)+\s*$", block[1]):
                out += _table(block)
            else:
                out.append(f"<p>{'<br>'.join(inline(b) for b in block)}</p>")
            i = j
        elif _BULLET.match(line):
            out.append("<ul>")
            while i < len(lines) and _BULLET.match(lines[i]):
                out.append(f"<li>{inline(_BULLET.sub('', lines[i]))}</li>")
                i += 1
            out.append("</ul>")
        else:
            para = []
            while (i < len(lines) and lines[i].strip() and not re.match(
                    r"^(#{1,4} |\s*\||\s*[-*] )", lines[i])):
                para.append(inline(lines[i]))
                i += 1
            out.append(f"<p>{' '.join(para)}</p>")
    return "\n".join(out)


def split_sections(md: str) -> list[tuple[str | None, list[str]]]:
    """(the h2 title or None for the preamble, its lines), dropping the Markdown's h1: the page
    opens with the verdict (or the comparison's outcome) instead."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in md.splitlines():
        if line.startswith("# "):
            continue
        if line.startswith("## "):
            sections.append((line[3:].strip(), [line]))
        else:
            sections[-1][1].append(line)
    return sections


def table_rows(header: list[str], rows: list[list[str]], classes: list[str] | None = None
                ) -> list[str]:
    """A table whose cells are already HTML (each escaped by the caller)."""
    out = ['<div class="scroll"><table><thead><tr>'
           + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for i, r in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return out + ["</tbody></table></div>"]
