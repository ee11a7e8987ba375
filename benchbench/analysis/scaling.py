"""Pure functions over a RunResult for the interconnect: all-reduce busbw against the link it
ran over and against the cross-node rule, and DDP scaling efficiency with its cost knee."""

from __future__ import annotations

from typing import Any

from benchbench.core.results import RunResult
from benchbench.machine.topology import link_for

# NCCL's large-message busbw typically reaches about 80% of a link's per-direction line rate;
# well under that (here: under 60%) deserves a look at the topology, the driver, or the BIOS.
NCCL_TYPICAL = 0.8
NCCL_LOW = 0.6
# The buyer's guide: nodes should be joined by at least 100 Gbps (12.5 GB/s).
CROSS_NODE_MIN = 100e9 / 8
# A GPU added to the job should add at least 90% of a GPU's throughput to be worth its price.
KNEE_MARGINAL = 0.9
GUIDE_KNEE = 4  # the buyer's guide's claim


def allreduce_vs_link(run: RunResult) -> dict[str, Any] | None:
    """The best busbw, the link it ran over and the fraction of that link's rate, the
    cross-node rule when the ranks span nodes, and NCCL's facts."""
    pr = run.probe("allreduce")
    if pr is None or pr.status != "ok":
        return None
    peak = next((m for m in pr.measurements if m.metric == "peak_busbw"), None)
    world = int(pr.params.get("world_size") or 1)
    nccl = (pr.measurements[0].context.get("nccl") or {}) if pr.measurements else {}
    out: dict[str, Any] = {"world_size": world, "backend": pr.params.get("backend"),
                           "nccl": nccl}
    if peak is None:
        out["reason"] = "busbw does not apply at world size 1"
        return out
    nodes = int(peak.key.get("nodes") or 1)
    out.update(busbw=peak.value, best_size_bytes=peak.context.get("best_size_bytes"),
               nodes=nodes)
    if nodes > 1:
        out["cross_node"] = {"minimum": CROSS_NODE_MIN, "passes": peak.value >= CROSS_NODE_MIN,
                             "rule": "the guide's >= 100 Gbps (12.5 GB/s) between nodes"}
        return out
    if out["backend"] != "nccl":
        out["reason"] = ("CPU ranks exchange through shared memory and loopback: there is no "
                         "link rate to compare with")
        return out
    link = link_for(run.environment.get("topology"), world)
    if not link or not link.get("per_direction"):
        out["reason"] = "NVML did not give this GPU set's link and its rate"
        return out
    fraction = peak.value / link["per_direction"]
    in_switch = bool(nccl.get("nvls_used") or any("CollNet" in t for t in nccl.get(
        "transports") or []))
    out.update(link=link["path"], link_per_direction=link["per_direction"], fraction=fraction)
    if fraction > 1 and in_switch:
        out["finding"] = ("above the wire rate, which NVLS or SHARP in-switch reduction "
                          "allows (NCCL's log shows it)")
    elif fraction > 1:
        out["finding"] = ("above the link's rate although NCCL's log shows no NVLS or SHARP: "
                          "the topology reading may be wrong")
    elif fraction < NCCL_LOW:
        out["finding"] = (f"under {NCCL_LOW:.0%} of the link's rate, where NCCL usually "
                          f"reaches about {NCCL_TYPICAL:.0%}: check the topology, P2P and "
                          "the driver")
    else:
        out["finding"] = f"in line with NCCL's usual ~{NCCL_TYPICAL:.0%} of the line rate"
    return out


def ddp_scaling(run: RunResult) -> dict[str, Any] | None:
    """Efficiency T(N) / (N T(1)), marginal efficiency between counts, and the knee: the
    largest N up to which every added GPU kept its marginal efficiency >= 0.9."""
    pr = run.probe("ddp_scaling")
    if pr is None or pr.status != "ok":
        return None
    by_n = {int(m.key["ranks"]): m for m in pr.measurements if m.metric == "throughput"}
    if 1 not in by_n:
        return {"reason": "no 1-rank throughput to scale against"}
    t1 = by_n[1].value
    rows, knee, prev, still = [], 1, None, True
    for n in sorted(by_n):
        t = by_n[n].value
        row = {"ranks": n, "throughput": t, "efficiency": t / (n * t1)}
        if prev is not None:
            row["marginal"] = (t - by_n[prev].value) / ((n - prev) * t1)
            still = still and row["marginal"] >= KNEE_MARGINAL
            if still:
                knee = n
        rows.append(row)
        prev = n
    first = by_n[1]
    return {"rows": rows, "knee": knee, "guide_knee": GUIDE_KNEE,
            "precision": first.key.get("precision"), "unit": first.unit,
            "functional_check_only": first.context.get("functional_check_only")}
