"""compare.md's "Conditions" section and the marks' legend, both above the first table: what
each side ran under (compare/conditions.py), where a side differs from the baseline, and
what every mark in the tables below means."""

from __future__ import annotations

from benchbench.analysis import regression as reg
from benchbench.compare.comparison import Comparison
from benchbench.core import units as fmt

MARK = {reg.REGRESSED: "▼", reg.IMPROVED: "▲", reg.WITHIN: "≈", reg.NO_CHANGE: "=",
        reg.INCONCLUSIVE: "?", reg.NOT_TESTED: "–"}
UNLIKE = "≠"  # a side measured under other conditions than the baseline: no verdict
LEGEND = ("▼ regressed, ▲ improved (significant and beyond the threshold), ≈ significant but "
          "within the threshold, = no significant change, ? inconclusive (the noise explains "
          f"the change, or is unknown), – not tested (a peak, a count, other hardware), "
          f"{UNLIKE} not like for like (measured under other conditions, listed above: a "
          "ratio, no verdict); ratios are the side's median over the baseline's, and a time "
          "or a size says how many times slower or faster, higher or lower it is")


def warning(comp: Comparison) -> str | None:
    """'full and quick differ in mode; ResNet50 training: image size: the rows these touch are
    marked ≠ …', or None when the sides ran under the same recorded conditions."""
    found = comp.unlike
    if not found:
        return None
    labels = [s.label for s in comp.sides]
    who = " and ".join(labels) if len(labels) == 2 else "the sides"
    return (f"{who} differ in {'; '.join(c.title for c in found)}: the rows these touch are "
            f"marked {UNLIKE} and get no regression verdict")


def section(comp: Comparison) -> list[str]:
    """The warning, the conditions table (run-level always, a probe's where a side differs)
    and the legend of the marks."""
    labels = [s.label for s in comp.sides]
    shown = [c for c in comp.conditions if c.probe is None or c.differs]
    rows = [[f"**≠ {c.title}**" if c.differs else c.title]
            + [f"**{c.values[lab]}**" if c.differs else c.values[lab] for lab in labels]
            for c in shown]
    told = warning(comp)
    lead = f"**Not like for like**: {told}." if told else (
        "The sides ran under the same recorded conditions: like for like.")
    quiet = len(comp.conditions) - len(shown)
    others = ("The other recorded condition" if quiet == 1 else
              f"The {quiet} other recorded conditions")
    tail = ([f"{others} (each probe's image size, precisions, batch size, preset, sizes, --set "
             f"values …) {'agrees' if quiet == 1 else 'agree'} wherever the sides recorded "
             f"{'it' if quiet == 1 else 'them'}.", ""] if quiet else [])
    return (["## Conditions", "", lead, ""] + fmt.table(["condition"] + labels, rows) + tail
            + [f"Marks in the tables below: {LEGEND}.", ""])
