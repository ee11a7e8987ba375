"""The interconnect section of report.md: all-reduce by size, the link it ran over, DDP
scaling and its knee, and who took part in a multi-node run."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import scaling
from benchbench.core import units as fmt
from benchbench.core.names import counted
from benchbench.core.results import ProbeResult, RunResult


def single_rank_allreduce(pr: ProbeResult) -> str | None:
    """The one line that stands for an all-reduce measured over one rank (in runs from before
    the probe skipped that case itself), or None. No byte left the device: its times are the
    timer's floor and its algbw is no bandwidth, so neither a table nor a plot shows them."""
    if pr.name != "allreduce" or pr.status != "ok":
        return None
    if {m.key.get("world_size") for m in pr.measurements} != {1}:
        return None
    one = "one GPU" if pr.params.get("backend") == "nccl" else "one rank"
    return (f"- All-reduce skipped, because {one}: there is nothing to exchange (this run "
            "timed it over one rank, where no data moves; its figures are not shown).")


def single_rank_ddp(pr: ProbeResult) -> str | None:
    """The one line that stands for DDP trained over one rank only (runs from before the probe
    skipped that case), or None: one point has no scaling or knee, and its throughput is
    ResNet50's under a wrapper that exchanged nothing."""
    if pr.name != "ddp_scaling" or pr.status != "ok":
        return None
    if {m.key.get("ranks") for m in pr.measurements} != {1}:
        return None
    return ("- DDP scaling skipped, because one GPU: there is nothing to exchange, and one "
            "point has no scaling or cost knee to read (this run trained one rank only; its "
            "figures are not shown).")


def _allreduce(run: RunResult) -> list[str]:
    pr = run.probe("allreduce")
    if pr is None or pr.status != "ok":
        return []
    if line := single_rank_allreduce(pr):
        return [line, ""]
    by_size: dict[int, dict[str, Any]] = {}
    for m in pr.measurements:
        if "size_bytes" in m.key:
            by_size.setdefault(m.key["size_bytes"], {})[m.metric] = m
    a = scaling.allreduce_vs_link(run) or {}
    # At 2 ranks the bus factor 2(n−1)/n is 1: busbw is algbw, and a second column (and a
    # second table, and a second set of warnings) would only repeat it.
    same = bool(by_size) and all("busbw" in ms and ms["busbw"].value == ms["algbw"].value
               for ms in by_size.values())
    rows = [[fmt.iec(size), fmt.seconds(ms["allreduce_time"].value),
             fmt.value(ms["algbw"].value, "B/s"),
             *([] if same else [fmt.value(ms["busbw"].value, "B/s") if "busbw" in ms
                                else "not applicable"]),
             str(ms["allreduce_time"].context.get("iters_per_sample"))]
            for size, ms in sorted(by_size.items())]
    n = a.get("world_size")
    out = [f"**All-reduce, {pr.params.get('backend')}, {n} ranks** "
           "(nccl-tests' definitions: algbw = bytes / time, busbw = algbw × 2(n−1)/n; each "
           "sample is the slowest rank's)", ""]
    if same:
        out += ["At 2 ranks the bus factor 2(n−1)/n is 1: busbw equals algbw, so one column "
                "shows both." if n == 2 else
                "busbw equals algbw in this run, so one column shows both.", ""]
    out += fmt.table(["size", "time", "algbw = busbw" if same else "algbw",
                      *([] if same else ["busbw"]), "all-reduces per sample"], rows)
    overhead = next((m.context.get("launch_overhead") for m in pr.measurements
                     if m.context.get("launch_overhead")), None)
    if overhead and overhead.startswith("included"):
        out.append("- Small sizes include torch's per-call host overhead (20-40 µs a call): "
                   "their times are not NCCL's latency.")
    if "busbw" in a:
        line = (f"- Best busbw **{fmt.value(a['busbw'], 'B/s')}** at "
                f"{fmt.iec(a['best_size_bytes'] or 0)}")
        if "fraction" in a:
            line += (f": {fmt.percent(a['fraction'])} of {a['link']} "
                     f"({fmt.value(a['link_per_direction'], 'B/s')} per direction), "
                     f"{a['finding']}")
        elif "cross_node" in a:
            cn = a["cross_node"]
            line += (f" across {a['nodes']} nodes: "
                     f"{'meets' if cn['passes'] else '**misses**'} {cn['rule']}")
        out.append(line + ".")
    if a.get("reason"):
        out.append(f"- Link comparison skipped, because {a['reason']}.")
    nccl = a.get("nccl") or {}
    if nccl:
        algos = ", ".join(nccl["algorithms"]) if nccl.get("algorithms") else (
            "not logged (release NCCL builds log per-call choices at TRACE level only)")
        out.append(f"- NCCL {nccl.get('version', '?')}: transports "
                   f"{', '.join(nccl.get('transports') or ['?'])}, ring channels "
                   f"{nccl.get('ring_channels', '?')}, NVLS "
                   f"{'available' if nccl.get('nvls_available') else 'not available'}, "
                   f"algorithm/protocol {algos}.")
    return out + [""]


def _ddp(run: RunResult) -> list[str]:
    d = scaling.ddp_scaling(run)
    if not d or "rows" not in d:
        return []
    pr = run.probe("ddp_scaling")
    if len(d["rows"]) < 2 and pr is not None:  # one rank alone
        return [single_rank_ddp(pr) or "- DDP scaling: one rank only, no scaling to read.", ""]
    rows = [[str(r["ranks"]), fmt.value(r["throughput"], d["unit"]),
             fmt.percent(r["efficiency"]),
             fmt.percent(r["marginal"]) if "marginal" in r else "—"] for r in d["rows"]]
    out = [f"**DDP scaling, ResNet50 {d['precision']}** (weak scaling: a full batch per rank; "
           "efficiency = T(N) / (N × T(1)); marginal = what each added rank added, per rank)",
           ""]
    out += fmt.table(["ranks", "throughput", "efficiency", "marginal"], rows)
    if d.get("functional_check_only"):
        out.append(f"- A functional check only: {d['functional_check_only']}. No knee is "
                   "read from it.")
    else:
        out.append(f"- Cost knee: **{d['knee']} GPUs**, the most whose every added GPU kept "
                   f"a marginal efficiency of at least {scaling.KNEE_MARGINAL:.0%} (the "
                   f"buyer's guide claims {d['guide_knee']}).")
    return out + [""]


def _ranks(run: RunResult) -> list[str]:
    dist = run.extra.get("distributed")
    if not dist:
        return []
    out = [f"**Launched by {dist['launcher']}**: {dist['world_size']} ranks on "
           f"{counted(dist['nodes'], 'node')} ({', '.join(dist['hosts'])}). Per-node probes ran on "
           "local rank 0 of each node; rank 0 gathered the results.", ""]
    for node in run.extra.get("nodes") or []:
        cells = [f"{p['name']} {p['status']}" for p in node["probes"]]
        out.append(f"- node {node['host']} (rank {node['rank']}): "
                   f"{', '.join(cells) or 'no per-node probes'}")
    return out + [""]


def section(run: RunResult) -> list[str]:
    body = _allreduce(run) + _ddp(run) + _ranks(run)
    if not body:
        return []
    return ["## Interconnect and scaling", ""] + body
