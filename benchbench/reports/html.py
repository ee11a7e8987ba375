"""Render a run as one self-contained report.html: the verdict first, then the capacity chart,
then report.md's content, with the figures inline as base64 PNG.

The page works offline and from a mail attachment: inline CSS, no script, no external URL.
Every string that came from the user or the machine (labels, hostnames, paths, GPU names,
reasons, the verdict's sentences) goes through html.escape, the Markdown included: the small
converter below escapes each line before it adds its few tags.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any

from benchbench.analysis.verdict_types import Verdict
from benchbench.core import units as fmt
from benchbench.core.results import RunResult
from benchbench.reports.plots import resource_name
from benchbench.reports.verdict import evidence_beyond_table, measured_au

# report.md's sections that a figure belongs under; a figure whose section is missing goes to
# "More figures" at the end rather than being dropped.
FIGURE_SECTIONS = {
    "precision_speedups": "Training throughput",
    "stability": "Stability",
    "loader_workers": "Data path",
    "allreduce_busbw": "Interconnect and scaling",
}
FIGURE_ALT = {
    "capacities": "Each resource's capacity in the workload's samples per second",
    "precision_speedups": "Measured speedup between precisions beside the datasheet's",
    "stability": "Throughput of one fixed kernel over time, with its drops",
    "allreduce_busbw": "all_reduce bus and algorithm bandwidth against message size",
    "loader_workers": "Data loading throughput against the number of workers",
    "telemetry": "CPU, disk and GPU telemetry over the run, probe by probe",
}
# report.md sections that the page's opening already shows, from the verdict dict itself.
SHOWN_ABOVE = ("Verdict",)
STATUS_CLASS = {"ok": "ok", "tight": "tight", "does not fit": "bad", "unknown": "unk",
                "measured": "ok", "not applicable": "unk", "pass": "ok", "warn": "tight",
                "fail": "bad", "skipped": "unk"}

CSS = """
:root { --limit: #c0392b; --ink: #1d1d1f; --muted: #5f6368; --line: #dadce0; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
  sans-serif; color: var(--ink); background: #fafafa; }
body > section, body > nav { max-width: 1100px; margin: 0 auto; padding: 0 24px; }
.verdict { background: #fff3e0; border-bottom: 4px solid var(--limit); max-width: none;
  padding: 20px max(24px, calc((100% - 1052px) / 2)) 18px; }
.verdict .run { margin: 0; color: var(--muted); font-size: 13px; }
.verdict .kicker { margin: 10px 0 0; font-size: 17px; }
.verdict h1 { margin: 0; font-size: 44px; line-height: 1.15; color: var(--limit); }
.verdict h1.none { color: var(--ink); font-size: 32px; }
.verdict h1 code { font-size: 15px; color: var(--muted); font-weight: normal; }
.verdict .au { font-size: 19px; margin: 6px 0 12px; }
.verdict .au strong { font-size: 26px; }
.verdict h2 { font-size: 15px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); margin: 12px 0 2px; border: 0; }
.cols { display: flex; gap: 32px; flex-wrap: wrap; }
.cols > div { flex: 1 1 420px; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 32px; }
figure { margin: 12px 0; }
figure img { max-width: 100%; height: auto; background: #fff; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; background: #fff; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left;
  vertical-align: top; }
th { background: #f1f3f4; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.limit td { background: #fdecea; font-weight: 600; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; }
.badge.ok { background: #e6f4ea; } .badge.tight { background: #fef7e0; }
.badge.bad { background: #fce8e6; } .badge.unk { background: #eee; }
code { font-size: 90%; background: #f1f3f4; padding: 0 3px; border-radius: 3px; }
nav { font-size: 13px; color: var(--muted); padding-top: 8px; }
nav a { color: inherit; margin-right: 10px; }
.notes { color: var(--muted); }
"""


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def inline(text: Any) -> str:
    """Escape, then turn Markdown's **bold** and `code` into tags."""
    out = esc(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def slug(text: str) -> str:
    return "s-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section")


def _img(name: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="fig-{esc(name)}"><img src="data:image/png;base64,{data}" '
            f'alt="{esc(alt)}"></figure>')


# --- the Markdown subset report.md uses: headings, tables, lists, paragraphs, bold, code ------

_NUM = re.compile(r"^(\*\*)?[−\-]?\d")
_BULLET = re.compile(r"^\s*[-*] ")


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _table(rows: list[str]) -> list[str]:
    head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
    # A column of numbers is right-aligned, so that magnitudes line up.
    num = [all(_NUM.match(r[i]) for r in body if i < len(r) and r[i])
           for i in range(max(map(len, body), default=0))]
    out = ['<div class="scroll"><table>']
    if any(head):  # report.md's key-value tables have an empty header row
        out.append("<thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
                   + "</tr></thead>")
    out.append("<tbody>")
    for r in body:
        out.append("<tr>" + "".join(
            f'<td class="num">{inline(c)}</td>' if num[i] else f"<td>{inline(c)}</td>"
            for i, c in enumerate(r)) + "</tr>")
    return out + ["</tbody></table></div>"]


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


# --- the verdict ------------------------------------------------------------------------------

def _items(title: str, items: list[Any] | None) -> str:
    if not items:
        return ""
    return (f"<h2>{esc(title)}</h2><ul>" + "".join(f"<li>{inline(x)}</li>" for x in items)
            + "</ul>")


def _verdict(run: RunResult, verdict: Verdict) -> str:
    host = (run.environment.get("host") or {}).get("hostname") or "?"
    cfg = run.config or {}
    v = verdict.main
    head = (f'<p class="run">benchbench {esc(run.tool.get("version", ""))} · '
            f"{esc(run.label or host)} on {esc(host)} · device "
            f"{esc(cfg.get('device_resolved', cfg.get('device', '?')))}"
            f"{' (quick)' if cfg.get('quick') else ''} · {esc(run.started_at)}</p>")
    limit = v.limiting_resource
    if limit:
        cap = v.capacity(limit)
        big = (f"<h1>{esc(resource_name(limit))} <code>{esc(limit)}</code></h1>")
        at = (f" It caps training at <strong>{esc(fmt.si(cap, v.sample_unit))}</strong>."
              if cap is not None else "")
    else:
        big, at = '<h1 class="none">No limiting resource named</h1>', ""
    au = v.predicted_accelerator_utilisation
    if v.measured_accelerator_utilisation is not None:
        at += f" The real input pipeline measured {esc(measured_au(v))}."
    au_line = (f'<p class="au">Predicted accelerator utilisation: <strong>'
               f"{esc(fmt.percent(au))}</strong>.{at}</p>" if au is not None
               else f'<p class="au">Predicted accelerator utilisation: unknown.{at}</p>')
    parts = [head, f'<p class="kicker">What limits <strong>{esc(v.workload)}</strong> training '
             "on this machine</p>", big, au_line,
             '<div class="cols"><div>', _items("Evidence", evidence_beyond_table(v)),
             "</div><div>", _items("Advice", v.advice), "</div></div>",
             _items("Unknown capacities", v.unknown)]
    first = v.first_epoch
    if first:
        parts.append(f"<p><strong>First epoch</strong> (cold page cache): limited by "
                     f"<strong>{esc(resource_name(first.limiting_resource))}</strong>"
                     f"{': ' + inline(first.detail) if first.detail else ''}</p>")
    cons = [c for c in v.constraints if c.status != "not applicable"]
    if cons:
        parts.append("<h2>Constraints</h2>" + "".join(_table_rows(
            ["check", "status", "detail"],
            [[inline(c.check), _badge(c.status), inline(c.detail)] for c in cons])))
    for o in verdict.others():
        lim = o.limiting_resource
        o_au = o.predicted_accelerator_utilisation
        au_text = f", predicted utilisation {esc(fmt.percent(o_au))}" if o_au is not None else ""
        parts.append(f"<details><summary><strong>{esc(o.workload)}</strong>: limited by "
                     f"{esc(resource_name(lim)) if lim else 'no resource named'}{au_text}"
                     "</summary>" + _items("Evidence", o.evidence)
                     + _items("Advice", o.advice)
                     + _items("Unknown capacities", o.unknown) + "</details>")
    return f'<section id="verdict" class="verdict">{"".join(parts)}</section>'


def _badge(status: Any) -> str:
    return f'<span class="badge {STATUS_CLASS.get(str(status), "unk")}">{esc(status)}</span>'


def _table_rows(header: list[str], rows: list[list[str]], classes: list[str] | None = None
                ) -> list[str]:
    """A table whose cells are already HTML (each escaped by the caller)."""
    out = ['<div class="scroll"><table><thead><tr>'
           + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for i, r in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return out + ["</tbody></table></div>"]


def _capacities(verdict: Verdict, png: bytes | None) -> str:
    v = verdict.main
    if not v.capacity_details:
        return ""
    unit = v.sample_unit
    rows, classes = [], []
    for r, d in sorted(v.capacity_details.items(),
                       key=lambda rd: (rd[1].value is None, rd[1].value or 0)):
        rows.append([esc(resource_name(r)),
                     esc(fmt.si(d.value, unit)) if d.value is not None else "—",
                     _badge(d.status), inline(d.how or d.missing or "")])
        classes.append("limit" if r == v.limiting_resource else "")
    out = ['<section id="capacities"><h2>Capacities</h2>']
    if png:
        out.append(_img("capacities", png, f"{FIGURE_ALT['capacities']} ({unit}); the "
                                           "limiting one in red"))
    out.append(f"<p class=\"notes\">Each resource's capacity in {esc(unit)} for the whole "
               "machine: the rate at which it alone could feed training. The lowest one limits."
               "</p>")
    out += _table_rows(["resource", "capacity", "status", "how, or why unknown"], rows, classes)
    return "\n".join(out) + "</section>"


def _telemetry(run: RunResult, png: bytes | None) -> str:
    tel = run.extra.get("telemetry") or {}
    flags = [(p, f) for p, fs in (tel.get("flags") or {}).items() for f in fs or []]
    if not png and not flags:
        return ""
    out = ['<section id="telemetry"><h2>Telemetry</h2>']
    if png:
        out.append(_img("telemetry", png, FIGURE_ALT["telemetry"]))
    if flags:
        out.append("<ul>" + "".join(f"<li>{esc(p)}: {inline(f)}</li>" for p, f in flags)
                   + "</ul>")
    return "\n".join(out) + "</section>"


def render(run: RunResult, verdict: Verdict, doctor_section_lines: list[str],
           plots: dict[str, bytes], markdown_text: str, notes: list[str] | None = None) -> str:
    """The whole page: the computed verdict first, then report.md as written
    (`markdown_text`); `notes` are things to tell the reader, such as a figure that failed to
    draw."""
    host = (run.environment.get("host") or {}).get("hostname") or "run"
    body = [_verdict(run, verdict), _capacities(verdict, plots.get("capacities"))]
    if doctor_section_lines:
        lines = list(doctor_section_lines)
        first = next((ln for ln in lines if ln.strip()), "")
        if not first.startswith("#"):
            lines = ["## Doctor", ""] + lines
        body.append(f'<section id="doctor">{markdown_to_html(lines)}</section>')
    placed: set[str] = set()
    # The page opened with the verdict and the doctor: their report.md sections would repeat.
    shown = {ln[3:].strip() for ln in doctor_section_lines or [] if ln.startswith("## ")}
    sections = [(t, lines) for t, lines in split_sections(markdown_text)
                if not (t and (t.startswith(SHOWN_ABOVE) or t in shown))]
    titles = [t for t, _ in sections if t]
    body.append("<nav>" + " ".join(f'<a href="#{slug(t)}">{esc(t)}</a>' for t in titles)
                + "</nav>")
    for title, lines in sections:
        html_ = markdown_to_html(lines)
        for name, where in FIGURE_SECTIONS.items():
            if title == where and name in plots:
                html_ += _img(name, plots[name], FIGURE_ALT[name])
                placed.add(name)
        if html_.strip():
            body.append(f"<section>{html_}</section>")
    body.append(_telemetry(run, plots.get("telemetry")))
    rest = [n for n in plots if n not in placed | {"capacities", "telemetry"}]
    if rest:
        body.append('<section id="more-figures"><h2>More figures</h2>' + "".join(
            _img(n, plots[n], FIGURE_ALT.get(n, n)) for n in rest) + "</section>")
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>'
                    + "".join(f"<li>{inline(n)}</li>" for n in notes) + "</ul></section>")
    title = esc(f"benchbench report: {run.label or host}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head>\n<body>"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")
