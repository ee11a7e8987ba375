"""Render a run as one self-contained report.html: the verdict first, then the capacity chart,
then report.md's content, with the figures inline as base64 PNG.

The page works offline and from a mail attachment: inline CSS, no script, no external URL.
Every string that came from the user or the machine (labels, hostnames, paths, GPU names,
reasons, the verdict's sentences) goes through html.escape, the Markdown included: the small
converter in html_markdown.py escapes each line before it adds its few tags.
"""

from __future__ import annotations

from typing import Any

from benchbench.analysis.advice import model_name
from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import units as fmt
from benchbench.core.names import capitalised, in_words, precision_name, resource_name
from benchbench.core.results import RunResult
from benchbench.reports import noise, speedups

# esc is imported from here by the other pages (compare, ops): exported explicitly.
from benchbench.reports.html_markdown import esc as esc
from benchbench.reports.html_markdown import (
    img,
    inline,
    markdown_to_html,
    slug,
    split_sections,
    table_rows,
)
from benchbench.reports.markdown import MEASUREMENTS, interrupted_line, named
from benchbench.reports.verdict import au_short, evidence_beyond_table, label, unknown_line

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
.interrupted { background: #fce8e6; border-bottom: 4px solid var(--limit); max-width: none;
  padding: 10px max(24px, calc((100% - 1052px) / 2)); font-size: 17px; }
.interrupted p { margin: 0; }
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
td.num.wrap { white-space: normal; }
tr.limit td { background: #fdecea; font-weight: 600; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; }
.badge.ok { background: #e6f4ea; } .badge.tight { background: #fef7e0; }
.badge.bad { background: #fce8e6; } .badge.unk { background: #eee; }
code { font-size: 90%; background: #f1f3f4; padding: 0 3px; border-radius: 3px; }
nav { font-size: 13px; color: var(--muted); padding-top: 8px; }
nav a { color: inherit; margin-right: 10px; }
.notes { color: var(--muted); }
details { margin: 4px 0; }
summary { cursor: pointer; }
"""


# --- the verdict ------------------------------------------------------------------------------

def _items(title: str, items: list[Any] | None) -> str:
    if not items:
        return ""
    return (f"<h2>{esc(title)}</h2><ul>"
            + "".join(f"<li>{inline(in_words(str(x)))}</li>" for x in items) + "</ul>")


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
        big = f"<h1>{esc(label(limit))} <code>{esc(limit)}</code></h1>"
    else:
        big = '<h1 class="none">No limiting resource named</h1>'
    parts = [head, f'<p class="kicker">What limits <strong>{esc(model_name(v.workload))}'
             "</strong> training on this machine</p>", big, _headline(v), _speedups(run),
             '<div class="cols"><div>', _items("Evidence", evidence_beyond_table(v)),
             "</div><div>", _items("Advice", v.advice), "</div></div>",
             _items("Unknown capacities", [unknown_line(u) for u in v.unknown])]
    first = v.first_epoch
    if first:
        parts.append(f"<p><strong>First epoch</strong> (cold page cache): limited by "
                     f"<strong>{esc(resource_name(first.limiting_resource))}</strong>"
                     f"{': ' + inline(first.detail) if first.detail else ''}</p>")
    cons = [c for c in v.constraints if c.status != "not applicable"]
    if cons:
        parts.append("<h2>Constraints</h2>" + "".join(table_rows(
            ["check", "status", "detail"],
            [[inline(in_words(c.check)), _badge(c.status), inline(in_words(c.detail))]
             for c in cons])))
    for o in verdict.others():
        lim = o.limiting_resource
        o_au = None if o.on_cpu else o.predicted_accelerator_utilisation
        au_text = f", predicted utilisation {esc(fmt.percent(o_au))}" if o_au is not None else ""
        name = model_name(o.workload)
        parts.append(f"<details><summary><strong>{esc(capitalised(name))}</strong>: "
                     "limited by "
                     f"{esc(resource_name(lim)) if lim else 'no resource named'}{au_text}"
                     "</summary>" + _items("Evidence", evidence_beyond_table(o))
                     + _items("Advice", o.advice)
                     + _items("Unknown capacities", [unknown_line(u) for u in o.unknown])
                     + "</details>")
    return f'<section id="verdict" class="verdict">{"".join(parts)}</section>'


def _speedups(run: RunResult) -> str:
    """The precision speedups of both models, under the headline."""
    header, body = speedups.rows(run)
    if not body:
        return ""
    return (f'<p class="notes"><strong>{esc(speedups.TITLE)}</strong>: training throughput of '
            "one precision over another's, beside the datasheet's ratio of the dense "
            "tensor-core peaks</p>"
            + "".join(table_rows(header, [[esc(c) for c in r] for r in body])))


def _headline(v: WorkloadVerdict) -> str:
    """The big line under the limit: on a CPU-only machine, that the CPU trains and at what
    rate (an accelerator utilisation would be about a device that is not there); on a GPU
    box, the predicted accelerator utilisation."""
    limit = v.limiting_resource
    cap = v.capacity(limit) if limit else None
    prec = f", {precision_name(v.precision)}" if v.precision else ""
    if v.on_cpu:
        if cap is None:
            return ('<p class="au">No GPU here: training runs on the CPU, and nothing measured '
                    "names what limits it.</p>")
        text = (f"No GPU here: training runs on the CPU at <strong>"
                f"{esc(fmt.si(cap, v.sample_unit))}</strong> ({esc(model_name(v.workload))}"
                f"{esc(prec)}).")
        nxt = v.next_limit
        if limit == "cpu_compute" and nxt:
            floor = v.floor_of(nxt[0])
            text += (f" A GPU would lift that limit; the next one here, "
                     f"{esc(resource_name(nxt[0]))}, would feed it "
                     + (f"at least {esc(fmt.si(nxt[1], v.sample_unit))} ({esc(floor)})."
                        if floor else f"at most {esc(fmt.si(nxt[1], v.sample_unit))}."))
        return f'<p class="au">{text}</p>'
    at = (f" It caps training at <strong>{esc(fmt.si(cap, v.sample_unit))}</strong>"
          f"{esc(prec.replace(', ', ' in ', 1))}." if cap is not None else "")
    if v.measured_accelerator_utilisation is not None:
        at += f" The real input pipeline measured {esc(au_short(v))}."
    if v.close_call:
        other = next(r for r in v.close_call if r != limit)
        at += (f" A close call with {esc(resource_name(other))} at "
               f"{esc(fmt.si(v.capacity(other) or 0.0, v.sample_unit))}: the two lie within their "
               "measured noise.")
    au = v.predicted_accelerator_utilisation
    return (f'<p class="au">Predicted accelerator utilisation: <strong>'
            f"{esc(fmt.percent(au)) if au is not None else 'unknown'}</strong>.{at}</p>")


def _badge(status: Any) -> str:
    return f'<span class="badge {STATUS_CLASS.get(str(status), "unk")}">{esc(status)}</span>'


def _capacities(verdict: Verdict, png: bytes | None) -> str:
    v = verdict.main
    if not v.capacity_details:
        return ""
    unit = v.sample_unit
    rows, classes = [], []
    for r, d in sorted(v.capacity_details.items(),
                       key=lambda rd: (rd[1].value is None, rd[1].value or 0)):
        rows.append([esc(label(r)),
                     ("≥ " if d.at_least else "") + esc(fmt.si(d.value, unit))
                     if d.value is not None else "—",
                     _badge(d.status), inline(in_words(d.how or d.missing or ""))])
        classes.append("limit" if r == v.limiting_resource else "")
    out = ['<section id="capacities"><h2>Capacities</h2>']
    if png:
        out.append(img("capacities", png, f"{FIGURE_ALT['capacities']} ({unit}); the "
                                           "limiting one in red"))
    out.append(f"<p class=\"notes\">Each resource's capacity in {esc(unit)} for the whole "
               "machine: the rate at which it alone could feed training. The lowest one limits."
               "</p>")
    out += table_rows(["resource", "capacity", "status", "how, or why unknown"], rows, classes)
    return "\n".join(out) + "</section>"


def _telemetry(run: RunResult, png: bytes | None) -> str:
    tel = run.extra.get("telemetry") or {}
    flags = [(p, f) for p, fs in (tel.get("flags") or {}).items() for f in fs or []]
    if not png and not flags:
        return ""
    out = ['<section id="telemetry"><h2>Telemetry</h2>']
    if png:
        out.append(img("telemetry", png, FIGURE_ALT["telemetry"]))
    if flags:
        out.append("<ul>" + "".join(f"<li>{inline(noise.probe_label(p))}: {inline(in_words(f))}"
                                    "</li>" for p, f in flags) + "</ul>")
    return "\n".join(out) + "</section>"


def _folded(lines: list[str]) -> str:
    """The probe-by-probe section with each probe's tables behind its own fold: the page
    stays short, the numbers one click away."""
    parts: list[str] = []
    chunk: list[str] = []
    title: str | None = None
    for line in [*lines, "### "]:
        if line.startswith("### "):
            body = markdown_to_html(chunk)
            parts.append(f"<details><summary>{inline(title)}</summary>{body}</details>"
                         if title is not None else body)
            chunk, title = [], line[4:]
        else:
            chunk.append(line)
    return "\n".join(parts)


def _noise_rows(run: RunResult) -> str:
    """Each noisy measurement behind a fold under the per-probe lines (report.md keeps only
    those lines; measurements.csv marks every row)."""
    found = noise.rows(run)
    if not found:
        return ""
    rows = [[inline(noise.probe_label(r.probe)), f"<code>{esc(r.metric)}</code>", esc(r.setting),
             esc(fmt.percent(r.cv)), esc(r.n)] for r in found]
    return (f"<details><summary>The {len(found)} noisy measurements, one by one</summary>"
            + "".join(table_rows(["probe", "metric", "setting", "CV", "samples"], rows))
            + "</details>")


def render(run: RunResult, verdict: Verdict, doctor_section_lines: list[str],
           plots: dict[str, bytes], markdown_text: str, notes: list[str] | None = None) -> str:
    """The whole page: the computed verdict first, then report.md as written
    (`markdown_text`); `notes` are things to tell the reader, such as a figure that failed to
    draw."""
    host = (run.environment.get("host") or {}).get("hostname") or "run"
    banner = interrupted_line(run)
    body = [f'<section id="interrupted" class="interrupted">{markdown_to_html([banner])}'
            "</section>" if banner else "",
            _verdict(run, verdict), _capacities(verdict, plots.get("capacities"))]
    if doctor_section_lines:
        lines = named(list(doctor_section_lines))
        first = next((ln for ln in lines if ln.strip()), "")
        if not first.startswith("#"):
            lines = ["## Doctor", ""] + lines
        body.append(f'<section id="doctor">{markdown_to_html(lines)}</section>')
    placed: set[str] = set()
    # The page opened with the verdict and the doctor: their report.md sections would repeat.
    shown = {ln[3:].strip() for ln in doctor_section_lines or [] if ln.startswith("## ")}
    sections = [(t, [ln for ln in lines if t or ln != banner])  # the banner opened the page
                for t, lines in split_sections(markdown_text)
                if not (t and (t.startswith(SHOWN_ABOVE) or t in shown))]
    titles = [t for t, _ in sections if t]
    body.append("<nav>" + " ".join(f'<a href="#{slug(t)}">{esc(t)}</a>' for t in titles)
                + "</nav>")
    for title, lines in sections:
        html_ = _folded(lines) if title == MEASUREMENTS[3:] else markdown_to_html(lines)
        if title == noise.TITLE:
            html_ += _noise_rows(run)
        for name, where in FIGURE_SECTIONS.items():
            if title == where and name in plots:
                html_ += img(name, plots[name], FIGURE_ALT[name])
                placed.add(name)
        if html_.strip():
            body.append(f"<section>{html_}</section>")
    body.append(_telemetry(run, plots.get("telemetry")))
    rest = [n for n in plots if n not in placed | {"capacities", "telemetry"}]
    if rest:
        body.append('<section id="more-figures"><h2>More figures</h2>' + "".join(
            img(n, plots[n], FIGURE_ALT.get(n, n)) for n in rest) + "</section>")
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>'
                    + "".join(f"<li>{inline(n)}</li>" for n in notes) + "</ul></section>")
    title = esc(f"benchbench report: {run.label or host}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head>\n<body>"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")
