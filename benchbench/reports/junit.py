"""JUnit XML for CI systems, from a computed Comparison, History or Fleet: one test case per
measurement. A regression (compare), a latest segment that regressed (history) or an outlier
below its group (fleet) fails its case, with the evidence as the message; what cannot be called
(inconclusive, not tested) is skipped with the reason. Written with the standard library's
ElementTree, in the schema Jenkins, GitLab and GitHub's test reporters read (testsuites >
testsuite > testcase > failure | skipped)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from benchbench.analysis import regression as reg
from benchbench.compare.align import row_name
from benchbench.compare.comparison import Comparison
from benchbench.compare.fleet import Fleet
from benchbench.compare.history_series import History
from benchbench.reports.fleet_md import median_change, outlier_text
from benchbench.reports.history_text import gate_text, pct, shift_text, value


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    failure: str | None = None
    skipped: str | None = None
    output: str | None = None  # what passed says, for the reader of the CI log


def document(suite: str, cases: Sequence[Case]) -> bytes:
    """The XML document of one suite."""
    failures = sum(c.failure is not None for c in cases)
    skipped = sum(c.skipped is not None and c.failure is None for c in cases)
    root = ET.Element("testsuites", name="benchbench", tests=str(len(cases)),
                      failures=str(failures), errors="0", skipped=str(skipped))
    s = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)),
                      failures=str(failures), errors="0", skipped=str(skipped), time="0")
    for c in cases:
        el = ET.SubElement(s, "testcase", classname=c.classname, name=c.name, time="0")
        if c.failure is not None:
            f = ET.SubElement(el, "failure", message=c.failure, type="regression")
            f.text = c.failure
        elif c.skipped is not None:
            ET.SubElement(el, "skipped", message=c.skipped)
        if c.output:
            ET.SubElement(el, "system-out").text = c.output
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def compare_cases(comp: Comparison) -> list[Case]:
    base = comp.baseline.label
    several = len(comp.sides) > 2
    out = []
    for r in comp.rows:
        for lab, c in r.cells.items():
            d = c.decision
            if d is None:
                continue
            name = row_name(r) + (f" [{lab}]" if several else "")
            change = "—" if d.change_pct is None else pct(d.change_pct)
            said = (f"{lab}: {value(c.value, r.unit)} against {base}'s "
                    f"{value(r.cells[base].value, r.unit)} ({change}): {d.outcome}"
                    + (f"; {d.reason}" if d.reason else ""))
            out.append(Case(f"benchbench.compare.{r.probe}", name,
                            failure=said if d.outcome == reg.REGRESSED else None,
                            skipped=said if d.outcome in (reg.INCONCLUSIVE, reg.NOT_TESTED)
                            else None, output=said))
    out += [Case(f"benchbench.compare.{x.probe}", f"{x.probe} measures [{x.side}]",
                 failure=f"{x.side}: {x.probe} {x.status} where every baseline run measured "
                         f"it: {x.reason}") for x in comp.stopped]
    return out


def history_cases(h: History) -> list[Case]:
    out = []
    for s in h.series:
        if not s.judged:  # the gate holds the latest run against its own conditions' runs
            out.append(Case(f"benchbench.history.{s.probe}", s.name, skipped=(
                f"not judged: {len(s.runs)} runs under {s.condition}, other conditions than "
                f"the latest run ({h.runs[-1].conditions})")))
            continue
        if s.regression is not None:
            out.append(Case(f"benchbench.history.{s.probe}", s.name,
                            failure=gate_text(h, s, causes=True)))
            continue
        if s.unheld(h.threshold_pct):  # passes, but is not "within the threshold" either
            out.append(Case(f"benchbench.history.{s.probe}", s.name, output=(
                f"beyond {h.threshold_pct:g}% but not held (more runs will tell): "
                + gate_text(h, s))))
            continue
        if s.shifts:
            last = s.shifts[-1]
            said = (f"latest segment since {shift_text(h, s, len(s.shifts) - 1)}; within "
                    f"{h.threshold_pct:g}% or better: {value(last.after, s.unit)}")
        else:
            level = value(s.segments[0].level, s.unit) if s.segments else "—"
            said = f"one level over {len(s.runs)} runs, no change point: {level}"
        out.append(Case(f"benchbench.history.{s.probe}", s.name, output=said))
    return out


def fleet_cases(f: Fleet) -> list[Case]:
    out = []
    for m in f.measures:
        low = [outlier_text(f, m, e) for e in m.low]
        said = f"{len(m.entities)} in {m.group}; median {value(m.median, m.unit)}" + (
            f"; {len(m.changes)} against their earlier runs, the median change "
            f"{pct(median_change(m))}" if m.changes else "")
        out.append(Case(f"benchbench.fleet.{m.key[0]}", f"{m.name} [{m.group}]",
                        failure=" | ".join(low) if low else None, output=said))
    return out
