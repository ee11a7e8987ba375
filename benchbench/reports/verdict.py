"""The verdict section that opens report.md: the limiting resource, capacities, evidence, advice."""

from __future__ import annotations

from typing import Any

from benchbench.core import units as fmt

NAMES = {"resnet50": "ResNet50", "transformer": "the transformer"}


def _cap(v: float | None) -> str:
    return "—" if v is None else fmt.figure(v)


def measured_au(v: dict[str, Any]) -> str:
    """The real pipeline's AU; above 100% with its cause (the verdict's note), never bare."""
    x = v.get("measured_accelerator_utilisation")
    if not isinstance(x, (int, float)):
        return "—"
    note = v.get("measured_accelerator_utilisation_note")
    if x > 1.0:
        return note.removeprefix("AU ") if note else f"100% (measured {fmt.percent(x)})"
    return fmt.percent(x)


def section(v: dict[str, Any]) -> list[str]:
    limiting = v.get("limiting_resource")
    unit = v.get("unit", "samples/s")
    name = NAMES.get(v.get("workload", ""), v.get("workload"))
    if limiting is None:
        head = f"## Verdict: unknown — nothing measured names what limits {name}"
        lead = "No capacity could be measured; see Unknown below."
    else:
        head = f"## Verdict: {limiting} limits {name} training here"
        au = v.get("predicted_accelerator_utilisation")
        lead = (f"**{limiting}** caps {name} training at "
                f"**{_cap(v['capacities'][limiting])} {unit}**"
                + (f" ({v['precision']})" if v.get("precision") else "") + "; "
                f"predicted accelerator utilisation "
                f"**{fmt.percent(au) if au is not None else 'unknown'}**")
        if v.get("measured_accelerator_utilisation") is not None:
            lead += f", measured by the real pipeline at {measured_au(v)}"
        lead += "."
    out = [head, "", lead, ""]
    ds = v.get("dataset") or {}
    if ds.get("name"):
        out += [f"The verdict judges {ds['name']}: {ds['samples']:,} images, "
                f"{ds['bytes'] / 1e9:,.3g} GB ({ds.get('basis')}).", ""]
    rows = []
    for r, d in sorted(v.get("capacity_details", {}).items(),
                       key=lambda kv: (kv[1]["value"] is None, kv[1]["value"] or 0)):
        label = f"**{r}** ← limits" if r == limiting else r
        rows.append([label, _cap(d["value"]), d["status"], d.get("source") or "—",
                     d["how"] or d["missing"] or ""])
    out += fmt.table(["resource", f"capacity ({unit})", "status", "from", "how"], rows)
    if v.get("first_epoch"):
        out += [f"First epoch: {v['first_epoch']['detail']}.", ""]
    # The per-resource evidence is the table above; list the rest.
    table_rows = tuple(f"{r}:" for r in v.get("capacity_details", {}))
    evidence = [e for e in v.get("evidence", []) if not e.startswith(table_rows)]
    out += ["**Evidence**", ""] + [f"- {e}" for e in evidence] + [""]
    out += ["**What would fix it**", ""] + [f"- {a}" for a in v.get("advice", [])] + [""]
    if v.get("unknown"):
        out += ["**Unknown** (not measured, so not judged)", ""]
        out += [f"- {u}" for u in v["unknown"]] + [""]
    cons = [c for c in v.get("constraints", []) if c.get("status") != "not applicable"]
    if cons:
        out += ["**GPU memory**", ""] + [f"- {c['check']}: {c['status']} — {c.get('detail')}"
                                         for c in cons] + [""]
    others = [(w, o) for w, o in (v.get("per_workload") or {}).items()
              if w != v.get("workload")]
    for w, o in others:
        lim = o.get("limiting_resource")
        out.append(f"For {NAMES.get(w, w)}: "
                   + (f"{lim} at {_cap(o['capacities'][lim])} {o.get('unit')}." if lim
                      else "unknown (" + "; ".join(o.get("unknown", [])) + ")."))
    return out + ([""] if others else [])
