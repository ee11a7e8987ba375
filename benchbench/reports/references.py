"""The "Published references" section of report.md: the health line, then each headline figure
against what healthy machines of its GPU model measured in a published source."""

from __future__ import annotations

from collections.abc import Sequence

from benchbench.analysis import reference_check as refs
from benchbench.analysis.reference_figures import Figure
from benchbench.core import units as fmt
from benchbench.core.results import RunResult
from benchbench.doctor.checks import Check


def figure_name(f: Figure) -> str:
    where = f"slowest of {f.of_gpus} GPUs: {f.device}" if f.of_gpus > 1 else f.device
    return f"{f.name} ({where})"


def _source(h: refs.Held) -> str:
    s = h.reference.source
    who = f"[{s.get('publisher')}]({s['url']})" if s.get("url") else str(s.get("publisher"))
    return f"{who}, {s.get('date')}"


def _clock(f: Figure) -> str:
    """', its SM clock held at 75% of its maximum (1,485 MHz)' where the figure's samples ran
    under 90% of the GPU's maximum clock; nothing otherwise."""
    c = f.clock
    if c is None or not c.held_down or c.share is None:
        return ""
    return (f", its SM clock held at {fmt.percent(c.share)} of its maximum "
            f"({c.clock_Hz / 1e6:,.0f} MHz)")


def _lines(r: refs.Row) -> list[list[str]]:
    """One table line per comparable reference; else one for the closest, or none."""
    f = r.figure
    at = "; ".join(x for x in (refs.stated(f), f.basis) if x)
    head = [figure_name(f), refs.show(f.value, f.unit) + (f" ({at})" if at else "")]
    near = (f"; under the health line ({fmt.percent(r.below)} of the lower published figure)"
            if r.below is not None else
            f"; borderline ({fmt.percent(r.borderline)} of the lower published figure, within "
            f"{refs.BORDERLINE_MARGIN * 100:.0f} points of the {refs.HEALTH_FRACTION:.0%} line)"
            if r.borderline is not None else "")
    if r.matched:
        return [head + [refs.published(h.reference), refs.describe(h.reference, False),
                        _source(h), refs.share(h, f.value) + _clock(f) + near]
                for h in r.matched]
    if r.held:
        h = refs.closest(r.held)
        return [head + [refs.published(h.reference), refs.describe(h.reference, False),
                        _source(h), refs.mismatch(h, which=False)]]
    return [head + ["—", "—", "—", r.text]]


def section(run: RunResult, checks: Sequence[Check]) -> list[str]:
    rows = refs.rows(run)
    if not rows:
        return []
    h = refs.health(run, checks)
    out = ["## Published references", ""]
    if h.flagged:  # the verdict opens with the health line; here with the doctor's evidence too
        out += [h.line, ""] + [f"- {c}" for c in h.causes] + [""]
    out += ["What healthy machines of the same GPU model measured in a published source, not a "
            "datasheet ceiling: the share is measured / published high – measured / published "
            "low. A figure is held against a reference only when the compared conditions "
            "(precision, batch, image size, GPUs, copy counting and method, NCCL algorithm) "
            "agree; docs/references.md gives each row's source and caveats.", ""]
    table = [line for r in rows for line in _lines(r)]
    return out + fmt.table(["figure", "measured (its conditions)", "published",
                            "published conditions", "source", "% of published, or why not"],
                           table)
