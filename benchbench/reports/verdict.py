"""The verdict section that opens report.md: the limiting resource, capacities, evidence, advice."""

from __future__ import annotations

from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import units as fmt

NAMES = {"resnet50": "ResNet50", "transformer": "the transformer"}


def _cap(v: float | None) -> str:
    return "—" if v is None else fmt.figure(v)


def measured_au(v: WorkloadVerdict) -> str:
    """The real pipeline's AU; above 100% with its cause (the verdict's note), never bare."""
    x = v.measured_accelerator_utilisation
    if x is None:
        return "—"
    note = v.measured_accelerator_utilisation_note
    if x > 1.0:
        return note.removeprefix("AU ") if note else f"100% (measured {fmt.percent(x)})"
    return fmt.percent(x)


def section(verdict: Verdict) -> list[str]:
    v = verdict.main
    limiting = v.limiting_resource
    unit = v.unit
    name = NAMES.get(v.workload, v.workload)
    if limiting is None:
        head = f"## Verdict: unknown — nothing measured names what limits {name}"
        lead = "No capacity could be measured; see Unknown below."
    else:
        head = f"## Verdict: {limiting} limits {name} training here"
        au = v.predicted_accelerator_utilisation
        lead = (f"**{limiting}** caps {name} training at "
                f"**{_cap(v.capacity(limiting))} {unit}**"
                + (f" ({v.precision})" if v.precision else "") + "; "
                f"predicted accelerator utilisation "
                f"**{fmt.percent(au) if au is not None else 'unknown'}**")
        if v.measured_accelerator_utilisation is not None:
            lead += f", measured by the real pipeline at {measured_au(v)}"
        lead += "."
    out = [head, "", lead, ""]
    if verdict.health:
        out += [verdict.health, ""] + [f"- {c}" for c in verdict.health_causes] + (
            [""] if verdict.health_causes else [])
    ds = v.dataset
    out += [f"The verdict judges {ds.name}: {ds.samples:,} images, "
            f"{ds.bytes / 1e9:,.3g} GB ({ds.basis}).", ""]
    rows = []
    for r, d in sorted(v.capacity_details.items(),
                       key=lambda kv: (kv[1].value is None, kv[1].value or 0)):
        label = f"**{r}** ← limits" if r == limiting else r
        rows.append([label, _cap(d.value), d.status, d.source or "—", d.how or d.missing or ""])
    out += fmt.table(["resource", f"capacity ({unit})", "status", "from", "how"], rows)
    if v.first_epoch:
        out += [f"First epoch: {v.first_epoch.detail}.", ""]
    out += ["**Evidence**", ""] + [f"- {e}" for e in evidence_beyond_table(v)] + [""]
    out += ["**What would fix it**", ""] + [f"- {a}" for a in v.advice] + [""]
    if v.unknown:
        out += ["**Unknown** (not measured, so not judged)", ""]
        out += [f"- {u}" for u in v.unknown] + [""]
    cons = [c for c in v.constraints if c.status != "not applicable"]
    if cons:
        out += ["**GPU memory**", ""] + [f"- {c.check}: {c.status} — {c.detail}"
                                         for c in cons] + [""]
    others = verdict.others()
    for o in others:
        lim = o.limiting_resource
        out.append(f"For {NAMES.get(o.workload, o.workload)}: "
                   + (f"{lim} at {_cap(o.capacity(lim))} {o.unit}." if lim
                      else "unknown (" + "; ".join(o.unknown) + ")."))
    return out + ([""] if others else [])


def evidence_beyond_table(v: WorkloadVerdict) -> list[str]:
    """The evidence without the lines that restate one capacity ("storage: …"): the capacity
    table shows those."""
    table_rows = tuple(f"{r}:" for r in v.capacity_details)
    return [e for e in v.evidence if not e.startswith(table_rows)]
