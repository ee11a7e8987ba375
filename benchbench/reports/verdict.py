"""The verdict section that opens report.md: the limiting resource, capacities, evidence, advice."""

from __future__ import annotations

from benchbench.analysis.advice import model_name
from benchbench.analysis.verdict import capacity_line
from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import units as fmt
from benchbench.core.names import capitalised, precision_name, resource_name


def sentence_name(resource: str) -> str:
    """A resource's human name at the start of a sentence or a heading."""
    return capitalised(resource_name(resource))


def label(resource: str) -> str:
    """A resource's name as a table cell or a title: 'Host-to-GPU link (PCIe)'."""
    return capitalised(resource_name(resource).removeprefix("the "))


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


def lead(v: WorkloadVerdict) -> str:
    """The verdict's first sentence, Markdown. On a CPU-only machine it says that the CPU
    trains, at what rate and what a GPU would meet next; on a GPU box, the predicted
    accelerator utilisation."""
    limiting, unit, name = v.limiting_resource, v.unit, model_name(v.workload)
    prec = f", {precision_name(v.precision)}" if v.precision else ""
    if v.on_cpu:
        rate = v.capacity(limiting) if limiting else None
        if limiting is None or rate is None:
            return ("No GPU here: training runs on the CPU; nothing measured names what limits "
                    "it (see Unknown below).")
        text = (f"No GPU here: training runs on the CPU at **{_cap(rate)} {unit}** "
                f"({name}{prec}), limited by {resource_name(limiting)}.")
        nxt = v.next_limit
        if limiting == "cpu_compute" and nxt:
            floor = v.floor_of(nxt[0])
            text += (f" A GPU would lift that limit; this machine's next one, "
                     f"{resource_name(nxt[0])}, would feed it "
                     + (f"at least {_cap(nxt[1])} {unit} ({floor})." if floor else
                        f"at most {_cap(nxt[1])} {unit}."))
        elif v.capacity("cpu_compute") is not None:
            text += f" The CPU alone computes {_cap(v.capacity('cpu_compute'))} {unit}."
        return text  # the real pipeline's AU, about a device that is not here, is evidence
    if limiting is None:
        return "No capacity could be measured; see Unknown below."
    au = v.predicted_accelerator_utilisation
    text = (f"**{sentence_name(limiting)}** caps {name} training at "
            f"**{_cap(v.capacity(limiting))} {unit}**"
            + (f" ({precision_name(v.precision)})" if v.precision else "") + "; "
            f"predicted accelerator utilisation "
            f"**{fmt.percent(au) if au is not None else 'unknown'}**")
    if v.measured_accelerator_utilisation is not None:
        text += f", measured by the real pipeline at {au_short(v)}"
    if v.close_call:
        other = next(r for r in v.close_call if r != limiting)
        text += (f". A close call with {resource_name(other)} at "
                 f"{_cap(v.capacity(other))} {unit}: the two lie within their measured noise")
    return text + "."


def au_short(v: WorkloadVerdict) -> str:
    """The real pipeline's AU in a headline: above 100% its cause is in the evidence, so it
    is pointed to, not said twice."""
    x = v.measured_accelerator_utilisation
    if x is None:
        return "—"
    return fmt.percent(x) if x <= 1.0 else f"100% (measured {fmt.percent(x)}, see the evidence)"


def section(verdict: Verdict, after_lead: list[str] | None = None) -> list[str]:
    """The verdict section; `after_lead` (Markdown lines) follows its first sentence."""
    v = verdict.main
    limiting = v.limiting_resource
    unit = v.unit
    name = model_name(v.workload)
    if limiting is None:
        head = f"## Verdict: unknown — nothing measured names what limits {name}"
    else:
        head = f"## Verdict: {sentence_name(limiting)} limits {name} training here"
    out = [head, "", lead(v), "", *(after_lead or [])]
    if verdict.health:
        out += [verdict.health, ""] + [f"- {c}" for c in verdict.health_causes] + (
            [""] if verdict.health_causes else [])
    ds = v.dataset
    out += [f"The verdict judges {ds.name}: {ds.samples:,} images, "
            f"{fmt.iec(ds.bytes)} ({ds.basis}).", ""]
    rows = []
    for r, d in sorted(v.capacity_details.items(),
                       key=lambda kv: (kv[1].value is None, kv[1].value or 0)):
        cell = f"**{label(r)}** ← limits" if r == limiting else label(r)
        rows.append([cell, ("≥ " if d.at_least else "") + _cap(d.value), d.status,
                     f"`{d.source}`" if d.source else "—",
                     d.how or d.missing or ""])
    out += fmt.table(["resource", f"capacity ({unit})", "status", "from", "how"], rows)
    if v.first_epoch:
        out += [f"First epoch: {v.first_epoch.detail}.", ""]
    out += ["**Evidence**", ""] + [f"- {e}" for e in evidence_beyond_table(v)] + [""]
    out += ["**What would fix it**", ""] + [f"- {a}" for a in v.advice] + [""]
    if v.unknown:  # why each is unknown is in the table's last column: not said twice
        out += ["**Unknown** (not measured, so not judged; the table says why): "
                + ", ".join(label(u.partition(": ")[0]) for u in v.unknown) + ".", ""]
    cons = [c for c in v.constraints if c.status != "not applicable"]
    if cons:
        out += ["**GPU memory**", ""] + [f"- {c.check}: {c.status} — {c.detail}"
                                         for c in cons] + [""]
    others = verdict.others()
    for o in others:
        lim = o.limiting_resource
        out.append(f"For {model_name(o.workload)}: "
                   + (f"{resource_name(lim)} at {_cap(o.capacity(lim))} {o.unit}." if lim
                      else "unknown, because " + "; ".join(map(_short_unknown, o.unknown))
                      + "."))
    return out + ([""] if others else [])


def _short_unknown(item: str) -> str:
    """'cpu_compute: the transformer probe skipped: …' as 'CPU compute was not measured: the
    transformer probe skipped': the full reason is said once, under Skipped and failed."""
    resource, _, why = item.partition(": ")
    return f"{resource_name(resource)} was not measured: {why.partition(': ')[0]}"


def unknown_line(item: str) -> str:
    """'cpu_compute: why' (the verdict keeps the id) as 'CPU compute: why'."""
    resource, _, why = item.partition(": ")
    return f"{sentence_name(resource)}: {why}" if why else item


def evidence_beyond_table(v: WorkloadVerdict) -> list[str]:
    """The evidence without the lines that restate one capacity ("Storage: …"), which the
    capacity table shows, nor the first epoch's, which has its own line. A verdict cached by
    an older benchbench began the capacity lines with the id."""
    shown = tuple(capacity_line(r, "") for r in v.capacity_details) + tuple(
        f"{r}:" for r in v.capacity_details)
    if v.first_epoch and v.first_epoch.detail:
        shown += (capitalised(v.first_epoch.detail),)
    return [e for e in v.evidence if not e.startswith(shown)]
