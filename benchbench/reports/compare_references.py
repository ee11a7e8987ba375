"""compare.md's "Published references" section: each side's headline figures as a share of
what healthy machines of its GPU model measured (the report's analysis, on each pooled run)."""

from __future__ import annotations

from benchbench.analysis import reference_check as refs
from benchbench.compare.comparison import Comparison
from benchbench.core import units as fmt


def _cell(r: refs.Row) -> str:
    f = r.figure
    value = refs.show(f.value, f.unit)
    if r.matched:
        return f"{value}: " + "; ".join(
            f"{refs.share(h, f.value)} of {h.reference.source.get('publisher')} "
            f"{h.reference.gpu}" for h in r.matched)
    if r.held:
        closest = min(r.held, key=lambda h: len(h.differs))
        return f"{value}: conditions differ ({'; '.join(closest.differs)})"
    return f"{value}: {r.text}"


def section(comp: Comparison) -> list[str]:
    runs = [(s.label, s.run) for s in comp.sides if s.run is not None]
    per_side = {label: refs.rows(run) for label, run in runs}
    names = list(dict.fromkeys(r.figure.name for rows in per_side.values() for r in rows))
    if not names:
        return []
    out = ["## Published references", "",
           "Each side's headline figures against published figures of its GPU model under the "
           "same conditions (report.md lists the sources); a pooled side is its merged run.", ""]
    for label, run in runs:
        h = refs.health(run)
        out += [f"- {label}: {h.line}"] + [f"  - {c}" for c in h.causes]
    out.append("")
    table = [[name] + [" / ".join(_cell(r) for r in per_side[label] if r.figure.name == name)
                       or "—" for label, _ in runs] for name in names]
    return out + fmt.table(["figure"] + [label for label, _ in runs], table)
