"""compare.md's "Published references" section: each side's headline figures as a share of
what healthy machines of its GPU model measured (the report's analysis, on each pooled run)."""

from __future__ import annotations

from benchbench.analysis import reference_check as refs
from benchbench.compare.comparison import Comparison
from benchbench.core import units as fmt
from benchbench.reports.compare_conditions import UNLIKE


def _cell(r: refs.Row) -> str:
    """'2,512 img/s (amp_fp16, 224 px, batch 256, 1 GPU): 90–96% of Lambda, H100 SXM,
    amp_fp16, 224 px, …': the figure's conditions, then each published figure's."""
    f = r.figure
    at = refs.stated(f)
    value = refs.show(f.value, f.unit) + (f" ({at})" if at else "")
    if r.matched:
        return f"{value}: " + "; ".join(
            f"{refs.share(h, f.value)} of {refs.describe(h.reference)}" for h in r.matched)
    if r.held:
        return f"{value}: {refs.mismatch(refs.closest(r.held))}"
    return f"{value}: {r.text}"


def section(comp: Comparison) -> list[str]:
    runs = [(s.label, s.run) for s in comp.sides if s.run is not None]
    per_side = {label: refs.rows(run) for label, run in runs}
    names = list(dict.fromkeys(r.figure.name for rows in per_side.values() for r in rows))
    if not names:
        return []
    out = ["## Published references", "",
           "Each side's headline figures, with the conditions they were measured under, against "
           "published figures of its GPU model under the same conditions; where a condition "
           f"differs, no share is given (report.md lists the sources). {UNLIKE}: measured "
           "under other conditions than the baseline's figure of that name. A pooled side is "
           "its merged run.", ""]
    for label, run in runs:
        h = refs.health(run)
        out += [f"- {label}: {h.line}"] + [f"  - {c}" for c in h.causes]
    out.append("")
    first = runs[0][0]  # the baseline

    def at(label: str, name: str) -> set[str]:
        return {refs.stated(r.figure) for r in per_side[label] if r.figure.name == name}

    def cell(label: str, name: str) -> str:
        """A side's figures of this name; ≠ first where they were measured under other
        conditions than the baseline's (one name, 224 px against 64 px)."""
        text = " / ".join(_cell(r) for r in per_side[label] if r.figure.name == name)
        unlike = label != first and at(first, name) and at(label, name) \
            and at(label, name) != at(first, name)
        return f"{UNLIKE} {text}" if unlike else text or "—"

    table = [[name] + [cell(label, name) for label, _ in runs] for name in names]
    return out + fmt.table(["figure"] + [label for label, _ in runs], table)
