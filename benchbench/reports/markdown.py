"""Render a RunResult as report.md: environment, one table per probe, skips and warnings."""

from __future__ import annotations

import math
import re
from typing import Any

from benchbench.analysis import cached_reads, clocks, limits
from benchbench.analysis import derive as analysis
from benchbench.analysis.verdict_types import Verdict
from benchbench.compare import identity
from benchbench.core import interruption
from benchbench.core import units as fmt
from benchbench.core.names import counted, in_words, listed, probe_name, resource_name
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.stats import MIN_SPREAD_SAMPLES, summarize
from benchbench.doctor.checks import Check
from benchbench.reports import datapath, energy, guide, interconnect, noise, speedups, training
from benchbench.reports import doctor as doctor_section
from benchbench.reports import references as references_section
from benchbench.reports import stability as stability_section
from benchbench.reports import verdict as verdict_section

# The one section that holds every probe's own tables (### per probe); report.html folds each.
MEASUREMENTS = "## Measurements, probe by probe"


def _yes_no(v: Any) -> str:
    return "?" if v is None else ("on" if v else "off")


def _virtualisation(v: Any) -> str:
    """'vm (KVM), container docker; evidence: …', or why it is unknown."""
    if not isinstance(v, dict):
        return "not recorded (a snapshot by an older benchbench)"
    kind = str(v.get("kind") or "unknown")
    text = kind + (f" ({v['hypervisor']})" if v.get("hypervisor") else "")
    if kind == "unknown" and v.get("reason"):
        text += f", because {v['reason']}"
    text += f", container {v['container']}" if v.get("container") else ", no container seen"
    text += f", sandbox {v['sandbox']}" if v.get("sandbox") else ""
    evidence = v.get("evidence") or []
    return text + (f"; evidence: {', '.join(map(str, evidence))}" if evidence else "")


def _sharing(g: dict[str, Any]) -> str:
    """', GPU virtualisation passthrough, MIG on (3 slices)' for an NVML record, else ''."""
    if "virtualization_mode" not in g:
        return ""
    mig, slices = g.get("mig_mode"), g.get("mig_devices")
    if not isinstance(mig, dict):
        mig_text = "MIG unknown (not supported or not readable)"
    else:
        mig_text = "MIG " + _yes_no(mig.get("current")) + (
            f" ({slices} slice{'s' if slices != 1 else ''})" if mig.get("current")
            and slices is not None else "") + (
            f", {_yes_no(mig.get('pending'))} after the next reset"
            if mig.get("pending") != mig.get("current") else "")
    return (f", GPU virtualisation {g.get('virtualization_mode') or 'unknown'}, "
            f"{mig_text}")


def _identity(env: dict[str, Any]) -> str | None:
    """What `history` and `fleet` know this machine by, and why a stronger fact is missing."""
    rec = env.get("identity")
    if not isinstance(rec, dict):
        return None
    ident = identity.of(env)
    dmi: dict[str, Any] = rec["dmi"] if isinstance(rec.get("dmi"), dict) else {}
    why: dict[str, Any] = (rec["dmi_unreadable"] if isinstance(rec.get("dmi_unreadable"), dict)
                           else {})
    board = " ".join(str(dmi[k]) for k in ("sys_vendor", "product_name") if dmi.get(k))
    raw = str(dmi.get("product_serial") or "").strip()
    serial = (raw if ident.serial else f"a placeholder (\"{raw}\")" if raw
              else f"unread: {why.get('product_serial', 'not recorded')}")
    n = len(ident.gpu_uuids)
    return (f"{board or 'DMI product unknown'}, serial {serial}, {n} GPU UUID"
            f"{'' if n == 1 else 's'}; `history` and `fleet` know it by its {ident.basis}")


def environment_section(env: dict[str, Any]) -> list[str]:
    host = env.get("host", {})
    ver = env.get("versions", {})
    tch = env.get("torch", {}) or {}
    nodes = host.get("numa_nodes")
    numa = counted(nodes, "NUMA node") if isinstance(nodes, int) else f"{nodes} NUMA nodes"
    rows = [
        ["Host", f"{host.get('hostname')} — {host.get('os')}"],
        ["CPU", f"{host.get('cpu_model')}: {host.get('cores_physical')} physical / "
                f"{host.get('cores_logical')} logical / {host.get('cores_usable')} usable cores, "
                f"{numa}, last-level cache "
                f"{fmt.iec(host['llc_bytes']) if host.get('llc_bytes') else '?'}"],
        ["RAM", fmt.iec(host.get("memory_total") or 0)],
        ["Virtualisation", _virtualisation(env.get("virtualisation"))],
    ]
    machine = _identity(env)
    if machine:
        rows.append(["Machine identity", machine])
    gpus = env.get("gpus", [])
    if not gpus:
        rows.append(["GPUs", f"none ({env.get('gpus_reason') or 'no reason recorded'})"])
    for g in gpus:
        link = (f"PCIe Gen{g.get('pcie_gen_current')} x{g.get('pcie_width_current')} now, "
                f"Gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')} max"
                if g.get("pcie_gen_max") else "PCIe link unknown")
        extra = (f"persistence {_yes_no(g.get('persistence_mode'))}, "
                 f"ECC {_yes_no(g.get('ecc_current'))}, power limit {g.get('power_limit')} W"
                 if "persistence_mode" in g else "facts from torch (NVML unavailable)")
        others = g.get("other_processes") or []
        busy = (f", **{counted(len(others), 'other process', 'other processes')} on it**"
                if others else "")
        seen = ""
        if "torch_index" in g:  # matched to the run's devices by UUID
            seen = (f" (cuda:{g['torch_index']})" if g["torch_index"] is not None
                    else " (not visible to this run: CUDA_VISIBLE_DEVICES)")
        rows.append([f"GPU {g.get('index')}{seen}",
                     f"{g.get('name')}, {fmt.iec(g.get('memory_total') or 0)}, {link}, "
                     f"{extra}{_sharing(g)}{busy}"])
    links = _gpu_links(env.get("topology"))
    if links:
        rows.append(["GPU links", links])
    if env.get("driver"):
        rows.append(["Driver", f"{env.get('driver')} (CUDA driver {env.get('cuda_driver')})"])
    rows.append(["Software", f"Python {ver.get('python')}, torch {ver.get('torch')} "
                             f"(CUDA {tch.get('torch_cuda')}, cuDNN {tch.get('cudnn')}, "
                             f"NCCL {tch.get('nccl')}), torchvision {ver.get('torchvision')}, "
                             f"DALI {ver.get('nvidia_dali') or 'not installed'}, "
                             f"fio {ver.get('fio') or 'not installed'}"])
    st = env.get("storage", {})
    if st:
        rows.append(["Output storage", f"{st.get('path')} on {st.get('fstype')} "
                                       f"({st.get('device')})"])
    return ["## Environment", ""] + fmt.table(["", ""], rows)


def _gpu_links(topology: dict[str, Any] | None) -> str | None:
    """GPU pairs grouped by the path NVML reports between them: '0-1, 2-3: NVLink ×4 (P2P
    ok)'."""
    groups: dict[str, list[str]] = {}
    for p in (topology or {}).get("pairs") or []:
        label = f"{p.get('path')} (P2P {p.get('p2p_read') or '?'})"
        groups.setdefault(label, []).append(f"{p['a']}-{p['b']}")
    return "; ".join(f"{', '.join(pairs)}: {label}" for label, pairs in groups.items()) or None


def _measurement_rows(run: RunResult, pr: ProbeResult, ms: list[Measurement]
                      ) -> tuple[list[str], list[list[str]]]:
    key_names = list(dict.fromkeys(k for m in ms for k in m.key))
    with_ref = any(analysis.reference(run, pr.name, m) for m in ms)
    all_median = all(m.statistic in ("median", "total_over_time") for m in ms)
    few = any(len(m.samples) < MIN_SPREAD_SAMPLES for m in ms)
    header = key_names + ["value", "statistic", ("IQR, or the values" if few else "IQR")
                          if all_median else "basis", "CV", "n"]
    if with_ref:
        header.append("of reference")
    at = [clocks.at_clock(run, clocks.behind(pr, m)) for m in ms]
    if any(at):
        header += ["SM clock (of its max)", "per GHz of it"]
    rows = []
    for m, c in zip(ms, at, strict=True):
        s = summarize(m.samples)
        row = [fmt.key_value(k, m.key.get(k, "")) for k in key_names]
        if m.statistic in ("median", "total_over_time") and s.n < MIN_SPREAD_SAMPLES:
            spread = ["one sample" if s.n == 1 else
                      "values " + ", ".join(fmt.value(x, m.unit) for x in m.samples), "—"]
        elif m.statistic in ("median", "total_over_time"):  # samples are comparable repeats
            spread = [f"{fmt.value(s.q1, m.unit)} – {fmt.value(s.q3, m.unit)}",
                      fmt.percent(s.cv) + (" ⚠" if noise.noisy(m) else "")]
        else:  # the best of several medians: their spread says nothing about noise
            best = next((f"{k.removeprefix('best_')}={fmt.key_value(k[5:], v)}"
                         for k, v in m.context.items() if k.startswith("best_")), "")
            spread = [f"{m.statistic} of {s.n}, at `{best}`" if best else m.statistic, "—"]
        row += [f"**{fmt.value(m.value, m.unit)}**", statistic_name(m), *spread, str(s.n)]
        if with_ref:
            ref = analysis.reference(run, pr.name, m)
            row.append(f"{fmt.percent(m.value / ref[0])} of {ref[1]} "
                       f"({fmt.value(ref[0], m.unit)})" if ref else "")
        if any(at):
            row += _clock_cells(c, m.unit)
        rows.append(row)
    return header, rows


def statistic_name(m: Measurement) -> str:
    """What the value is: its statistic, unless a "median" is not the median of its samples
    (a figure an older benchbench took from one of them): then which sample it is."""
    if m.statistic != "median" or not m.samples:
        return m.statistic
    mid = summarize(m.samples).median
    if math.isclose(m.value, mid, rel_tol=1e-6, abs_tol=1e-12):
        return "median"
    last = m.samples[-1] == m.value
    return (f"the last of {len(m.samples)} samples, not their median" if last
            else "not the median of its samples")


def _clock_cells(c: clocks.AtClock | None, unit: str) -> list[str]:
    """'1,485 MHz (75%)' and the rate per GHz of the samples' own clock; dashes without."""
    if c is None:
        return ["—", "—"]
    share = f" ({fmt.percent(c.share)})" if c.share is not None else ""
    return [f"{c.clock_Hz / 1e6:,.0f} MHz{share}", fmt.value(c.per_GHz, unit)]


def _clock_lines(run: RunResult, pr: ProbeResult) -> list[str]:
    """Per GPU, the SM clock its samples ran at, where it was read: the range, the median and
    its share of the GPU's maximum, and how to read the rates per GHz beside them."""
    by_device: dict[str, list[clocks.AtClock]] = {}
    pairs = clocks.probe_clocks(run, pr)
    for m, c in pairs:
        by_device.setdefault(str(clocks.device_of(m)), []).append(c)
    how = (" A rate per GHz is the work per cycle, whatever the clock: figures whose rates "
           "differ while their rates per GHz agree ran at different clocks, not at different "
           "speeds per cycle.")
    out = []
    for dev, cs in by_device.items():
        lo, hi = min(c.low_Hz for c in cs), max(c.high_Hz for c in cs)
        mid = sorted(c.clock_Hz for c in cs)[len(cs) // 2]
        top = cs[0].max_Hz
        of_max = (f", {fmt.percent(mid / top)} of its {top / 1e6:,.0f} MHz maximum"
                  + (" (held below 90% of it)" if mid / top < clocks.BELOW_MAX else "")
                  if top else "")
        out.append(f"- SM clock of {dev} while the timed samples ran: "
                   f"{lo / 1e6:,.0f}–{hi / 1e6:,.0f} MHz, median {mid / 1e6:,.0f} MHz"
                   f"{of_max}.{how}")
    return out


def probe_title(name: str, resource: str) -> str:
    """'Matrix multiply (`matmul`), CPU compute': the human names, the ids in code only."""
    return f"{noise.probe_label(name)}, {resource_name(resource)}"


def _same(a: list[Measurement], b: list[Measurement]) -> bool:
    return len(a) == len(b) and all(x.key == y.key and x.unit == y.unit and x.samples == y.samples
                                    for x, y in zip(a, b, strict=True))


def _merged(by_metric: dict[str, list[Measurement]]) -> list[tuple[list[str], list[Measurement]]]:
    """The metrics, those with identical measurements as one (all-reduce's busbw is its algbw
    at 2 ranks): one table, not two that repeat each other."""
    groups: list[tuple[list[str], list[Measurement]]] = []
    for metric, ms in by_metric.items():
        twin = next((g for g in groups if _same(g[1], ms)), None)
        if twin:
            twin[0].append(metric)
        else:
            groups.append(([metric], ms))
    return groups


def _probe_section(run: RunResult, pr: ProbeResult) -> list[str]:
    out = [f"### {probe_title(pr.name, pr.resource)}", ""]
    # figures of nothing moving, or of one point that scales nothing
    if line := interconnect.single_rank_allreduce(pr) or interconnect.single_rank_ddp(pr):
        return out + [line, ""]
    if pr.reason:
        out += [f"Partly skipped: {fmt.binary_sizes(pr.reason)}.", ""]
    if pr.name == "storage" and (cached := cached_reads.host_cache(run)):
        out += [f"These reads {cached}.", ""]
    if errors := limits.errors(run, pr.name):
        out += [f"- `{e['metric']}` ("
                + ", ".join(f"{k} {fmt.key_value(k, v)}" for k, v in e["key"].items())
                + f"): {e['text']}." for e in errors] + [""]
    flags = ((run.extra.get("telemetry") or {}).get("flags") or {}).get(pr.name) or []
    if flags:
        # Throttling or a clock drop during the probe makes its numbers wrong: say so here.
        out += [f"⚠ During this probe: {f}." for f in flags] + [""]
    by_metric: dict[str, list[Measurement]] = {}
    for m in pr.measurements:
        by_metric.setdefault(m.metric, []).append(m)
    # Summaries (statistic "max" over sizes) first: they are what a reader looks for.
    for metrics, ms in sorted(_merged(by_metric), key=lambda g: g[1][0].statistic != "max"):
        header, rows = _measurement_rows(run, pr, ms)
        title = " = ".join(f"**`{x}`**" for x in metrics)  # a metric's id, as the CSV has it
        if len(metrics) > 1:
            title += (f" (identical here: {', '.join(f'`{x}`' for x in metrics[1:])} equals "
                      f"`{metrics[0]}` at this scale, so one table shows them)")
        out += [title, ""] + fmt.table(header, rows)
    for row in analysis.gpu_spread(run, pr.name, "peak_flops", "dtype", same="best_size"):
        flag = " ⚠ 5% or more: check cooling, power caps and links" if row["warn"] else ""
        at = f" at n={row['best_size']}" if row.get("best_size") else ""
        out.append(f"- {row['dtype']}{at}, {row['gpus']} GPUs: slowest GPU "
                   f"{row['slowest_device']} at "
                   f"{fmt.value(row['slowest_value'], row['unit'])}, spread "
                   f"{fmt.percent(row['spread'])}{flag}")
    lines = _clock_lines(run, pr)
    if lines and out[-1] != "":
        out.append("")
    return out + lines + [""]


def _skipped(run: RunResult, p: ProbeResult) -> str:
    # A reason that already says "… skipped, because …", or the signal that cut the probe
    # short, is not preceded by another "because".
    status = interruption.status(run, p)
    joint = ": " if "because" in (p.reason or "") or status == interruption.CUT \
        else ", because "
    return f"- {noise.probe_label(p.name)}: {status}{joint}{fmt.binary_sizes(p.reason or '')}"


def pacing_note(run: RunResult) -> str | None:
    """One sentence on a run that left out later rounds to keep its wall-clock promise
    (engine/pacing.py), or None."""
    pacing = run.extra.get("pacing") or {}
    out = pacing.get("left_out") or []
    if not out:
        return None
    rounds = listed([f"round {o['round']} of {probe_name(o['probe'])}" for o in out])
    return (f"The machine was slower than usual during this run, which fell up to "
            f"{max(o['behind_s'] for o in out):.1f} s behind its plan: to end within its "
            f"{pacing.get('wall_s') or 0:.0f} s it left out {rounds}. Every probe's first "
            "round ran whole.")


def interrupted_line(run: RunResult) -> str | None:
    """The line report.md opens with when a signal stopped the run, or None."""
    cut = interruption.of(run)
    return f"**{interruption.banner(cut)}**" if cut is not None else None


def _not_run(run: RunResult) -> list[list[str]]:
    """The Probes table's rows for the probes a signal kept from starting."""
    cut = interruption.of(run)
    if cut is None:
        return []
    return [[noise.probe_label(name), "—", "not run", "—",
             f"the run was interrupted by {cut.signal} before it started"]
            for name in cut.not_run]


def render(run: RunResult, verdict: Verdict, checks: list[Check]) -> str:
    """report.md, opening with the verdict computed from the measurements (never the cache),
    with the doctor's `checks` of the run; a run a signal stopped opens with that first."""
    title = run.label or run.environment.get("host", {}).get("hostname", "run")
    cfg = run.config
    banner = interrupted_line(run)
    out = [
        f"# benchbench report: {title}", "", *([banner, ""] if banner else []),
        f"Run {run.started_at} → {run.finished_at or 'unfinished'}, benchbench "
        f"{run.tool.get('version')}, device {cfg.get('device_resolved', cfg.get('device'))}"
        f"{', quick' if cfg.get('quick') else ''}. Bandwidths in decimal units (1 GB/s = 10⁹ "
        "B/s); sizes in binary units (1 MiB = 2²⁰ B). Each value is the median of its samples "
        "unless its statistic says otherwise; IQR is the middle half of the samples.", "",
    ]
    if paced := pacing_note(run):
        out += [paced, ""]
    out += verdict_section.section(verdict, speedups.section(run))
    out += references_section.section(run, checks)
    out += environment_section(run.environment)
    said = len(out)
    out += doctor_section.section(checks)
    out += ["## Probes", ""] + fmt.table(
        ["probe", "resource", "status", "time", "note"],
        [[noise.probe_label(p.name), verdict_section.label(p.resource),
          interruption.status(run, p),
          fmt.seconds(p.duration_s) if p.duration_s and p.status != "skipped" else "—",
          fmt.binary_sizes(p.reason or "")] for p in run.probes] + _not_run(run))
    out += training.section(run)
    out += guide.section(run)
    out += stability_section.section(run)
    out += datapath.section(run)
    out += interconnect.section(run)
    out += energy.section(run)
    measured = [p for p in run.probes if p.status == "ok"]
    if measured:
        out += [MEASUREMENTS, "", "Every measurement, probe by probe; measurements.csv has "
                                  "them all, one row each.", ""]
    for pr in measured:
        out += _probe_section(run, pr)
    skipped = [p for p in run.probes if p.status != "ok"]
    if skipped:
        out += ["## Skipped and failed", ""]
        out += [_skipped(run, p) for p in skipped] + [""]
    out += noise.section(run)
    return "\n".join(named(out[:said] + _refer(out[said:], run.environment)))


_NVML_ERROR = re.compile(r"NVML unavailable: (.+?) \(NVML ships")


_CELL = re.compile(r"(?<!\\)\|")  # a table's cell boundary; a cell's own "|" is escaped


def named(lines: list[str]) -> list[str]:
    """The report's prose with the ids it carries (the analysis's sentences, and reasons as
    a run recorded them, an older run's too) written as names (names.in_words). A table cell
    of one word keeps it: it is a key's value, as results.json and the CSV hold it."""
    out = []
    for line in lines:
        if line.startswith("|"):
            cells = _CELL.split(line)
            line = "|".join(in_words(c) if " " in c.strip() else c for c in cells)
        else:
            line = in_words(line)
        out.append(line)
    return out


def _refer(lines: list[str], env: dict[str, Any]) -> list[str]:
    """The sections after Environment point to its GPUs row for why NVML is unavailable,
    instead of repeating the error (the doctor's and the energy's reasons carry it too)."""
    full = str(env.get("gpus_reason") or "")
    found = _NVML_ERROR.match(full)
    if not found:
        return lines
    pointer = " (see GPUs under Environment)"
    return [ln.replace(full, "NVML unavailable" + pointer)
            .replace(f": {found.group(1)}", pointer) for ln in lines]
