"""The configuration doctor's rules for the GPUs' state: persistence mode, the PCIe link under
load, clock throttling, memory errors and other processes. Pure functions of the snapshot and,
where a run measured the same fact under load, of the RunResult; nothing here changes a
setting."""

from __future__ import annotations

import re
import statistics
from typing import Any

from benchbench.core import units as fmt
from benchbench.core.gpus import gpu_for
from benchbench.core.results import RunResult
from benchbench.doctor.rules import Check, count, gpus, no_fact, skipped, worst
from benchbench.machine.telemetry_series import BUSY_UTIL, CLOCK_DROP


def check_persistence(env: dict[str, Any]) -> Check:
    name, threshold = "persistence mode", "on"
    source = "NVIDIA driver persistence documentation"
    known = [g for g in gpus(env) if g.get("persistence_mode") is not None]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "persistence mode"))
    off = [str(g.get("index")) for g in known if not g["persistence_mode"]]
    if not off:
        return Check(name, "pass", f"on ({count(len(known), 'GPU')})", threshold, source)
    return Check(name, "warn", f"off on GPU {', '.join(off)}", threshold, source,
                 "`sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`"
                 ", which lasts until reboot)",
                 "without it the driver unloads when the last CUDA process exits: every start "
                 "pays driver initialisation again")


def _loaded_links(env: dict[str, Any], run: RunResult | None) -> dict[int, dict[str, Any]]:
    """NVML GPU index -> the PCIe link host_device_copy read from NVML while copies were
    running. The probe names GPUs as the run saw them (cuda:N under CUDA_VISIBLE_DEVICES), so
    each is matched to its NVML record by UUID."""
    pr = run.probe("host_device_copy") if run else None
    out: dict[int, dict[str, Any]] = {}
    for m in pr.measurements if pr else []:
        g = gpu_for(env, str(m.key.get("device", "")))
        if g is not None and g.get("index") is not None \
                and m.context.get("pcie_gen_current") is not None:
            out.setdefault(int(g["index"]), m.context)
    return out


def check_pcie(env: dict[str, Any], run: RunResult | None) -> Check:
    name, threshold = "PCIe link", "current = maximum generation and width, under load"
    source = "NVML link state"
    loaded = _loaded_links(env, run)
    rows, statuses = [], []
    for g in gpus(env):
        i = g.get("index")
        link = (loaded.get(i) if i is not None else None) or g
        gen, width = link.get("pcie_gen_current"), link.get("pcie_width_current")
        gmax = link.get("pcie_gen_max") or g.get("pcie_gen_max")
        wmax = link.get("pcie_width_max") or g.get("pcie_width_max")
        if gen is None or width is None or gmax is None or wmax is None:
            continue
        when = "under load" if i in loaded else "at idle"
        rows.append(f"GPU {i}: Gen{gen} x{width} of Gen{gmax} x{wmax} {when}")
        short = gen < gmax or width < wmax
        statuses.append(("fail" if i in loaded else "warn") if short else "pass")
    if not rows:
        return skipped(name, threshold, source, no_fact(env, "the PCIe link"))
    status = worst(statuses)
    if loaded:
        source = "measured: NVML link state read by host_device_copy under load"
    if status == "pass":
        return Check(name, status, "; ".join(rows), threshold, source)
    if status == "fail":
        return Check(name, status, "; ".join(rows), threshold, source,
                     "reseat the GPU or move it to a full-width slot; check risers, cables and "
                     "the BIOS PCIe speed and bifurcation settings",
                     "the link ran below its maximum while copies were in flight")
    return Check(name, status, "; ".join(rows), threshold, source,
                 "`benchbench run --only host_device_copy` reads the link under load",
                 "idle links train down to save power, so this reading may be harmless")


# Clock-event reasons that are no throttling: an idle GPU, clocks an administrator chose, the
# display clock, and sync boost (a group of GPUs held to the slowest one's clock).
_NOT_THROTTLING = ("idle", "applicationsclock", "userdefinedclock", "displayclock", "syncboost")


def throttle_kind(reason: str) -> str | None:
    """'fail' for thermal, power-brake or hardware slowdown; 'warn' for clock drops and other
    limits; 'held' for the software power cap alone; None for what is not throttling. Takes
    NVML reason names ('hw_thermal_slowdown') and the telemetry module's flag sentences
    ('GPU 0 power-capped during 35% of the probe').

    The software power cap is the driver holding the board at its power limit: an H100 or H200
    under dense bf16 load reports it in nearly every sample while it runs as designed. Alone it
    is no fault (a lowered limit is checked apart, and a clock that fell under its busy median
    has its own flag); it is reported beside the pass."""
    n = re.sub(r"[^a-z]", "", reason.lower())
    if any(k in n for k in _NOT_THROTTLING):
        return None
    if "thermal" in n or "brake" in n or "hwslowdown" in n:
        return "fail"
    if n.endswith("powercap") or "powercapped" in n:
        return "held"
    if any(k in n for k in ("power", "slowdown", "throttl", "limit", "clockfell")):
        return "warn"
    return None  # a flag about something else, e.g. a pegged host CPU


_FELL = re.compile(r"(?:round (\d+): )?GPU (\S+) SM clock fell")


def _series(run: RunResult | None, probe: str, round_no: int) -> dict[str, Any] | None:
    """A probe's stored telemetry in round `round_no` (machine/telemetry.py's shape)."""
    tel = (run.extra.get("telemetry") if run else None) or {}
    got = (tel.get("probes") or {}).get(probe) if round_no == 1 else \
        (tel.get("rounds") or {}).get(f"{probe} (round {round_no})")
    return got if isinstance(got, dict) else None


def cap_explains(series: dict[str, Any] | None, gpu: str) -> bool:
    """Whether the power cap explains a GPU's clock drop: every busy sample whose SM clock fell
    under CLOCK_DROP of its busy median (the telemetry flag's rule) carried the software power
    cap, and none a thermal, power-brake or hardware slowdown. A GPU held at its power limit
    moves its clock with the load's power (a dense bf16 GEMM at an H200's 700 W runs at
    1,245-1,590 MHz); a drop without the cap is the GPU's own or another limit's."""
    s = ((series or {}).get("gpus") or {}).get(gpu) or {}
    clocks, util, reasons = s.get("sm_clock_Hz") or [], s.get("util") or [], s.get("throttle")
    if not reasons:
        return False
    busy = [(c, r) for c, u, r in zip(clocks, util, reasons, strict=False)
            if c is not None and u is not None and u > BUSY_UTIL]
    if not busy:
        return False
    med = statistics.median(c for c, _ in busy)
    low = [r for c, r in busy if c < CLOCK_DROP * med]
    kinds = [[throttle_kind(n) for n in r] for r in low if r is not None]
    return bool(low) and len(kinds) == len(low) and all(
        "held" in k and "fail" not in k and "warn" not in k for k in kinds)


def _explained_drop(run: RunResult | None, probe: str, flag: str) -> bool:
    """Whether a "SM clock fell" flag of this probe is the power cap's doing (cap_explains)."""
    got = _FELL.match(flag)
    if not got:
        return False
    return cap_explains(_series(run, probe, int(got.group(1) or 1)), got.group(2))


def _telemetry(run: RunResult | None) -> tuple[dict[str, list[str]], bool]:
    """(probe -> flags, whether GPU clock-event reasons were sampled during the run)."""
    tel = (run.extra.get("telemetry") if run else None) or {}
    flags = tel.get("flags")
    sampled = isinstance(flags, dict) and str((tel.get("source") or {}).get("gpu", "")) == "NVML"
    return (flags if isinstance(flags, dict) else {}), sampled


def check_throttling(env: dict[str, Any], run: RunResult | None) -> Check:
    name = "clock throttling"
    threshold = ("no thermal, power-brake or hardware slowdown, no power limit below the "
                 "default and no clock drop the power cap does not explain (idle, application "
                 "clocks, display clock, sync boost and the software power cap at the default "
                 "limit are not throttling)")
    flags, sampled = _telemetry(run)
    found = [(f"{probe}: {r}", r) for probe, rs in flags.items() for r in rs or []]
    # A clock drop the power cap explains (its stored samples say so) is the cap's, not a fault.
    explained = {f"{probe}: {r}" for probe, rs in flags.items() for r in rs or []
                 if _explained_drop(run, probe, r)}
    known = [g for g in gpus(env) if g.get("clock_event_reasons") is not None]
    found += [(f"GPU {g.get('index')} {r} at the snapshot", r) for g in known
              for r in g["clock_event_reasons"]]
    if not sampled and not known:
        return skipped(name, threshold, "NVML clock-event reasons",
                       no_fact(env, "clock-event reasons")
                       + (", and the run's telemetry sampled no GPU" if run else ""))
    source = ("measured: NVML clock-event reasons sampled during the run" if sampled
              else "NVML clock-event reasons at the snapshot")
    kinds = [(text + (", every such sample under the power cap" if text in explained else ""),
              "held" if text in explained else throttle_kind(r)) for text, r in found]
    hits = [(text, kind) for text, kind in kinds if kind in ("warn", "fail")]
    held = [text for text, kind in kinds if kind == "held"]
    lowered = [g for g in gpus(env) if g.get("power_limit") and g.get("power_limit_default")
               and g["power_limit"] < 0.99 * g["power_limit_default"]]
    capped = [f"GPU {g.get('index')} power limit {g['power_limit']:g} W, below its default "
              f"{g['power_limit_default']:g} W" for g in lowered]
    status = worst([k for _, k in hits] + ["warn"] * len(capped))
    measured = "; ".join([text for text, _ in hits] + capped) or (
        f"none; at its power limit in {count(len(held), 'reading')}" if held else "none")
    notes = [] if sampled else ["one reading at the snapshot, not under load; a run with "
                                "telemetry samples the reasons during each probe"]
    if held:
        at = _limits(env)
        notes.append(f"held at its power limit{at}: the software power cap, no fault alone (a "
                     "data-center GPU under dense load runs there by design, its SM clock "
                     "moving with the load's power; a clock drop outside the cap would show as "
                     "its own reason): " + "; ".join(held))
    note = "; ".join(notes) or None
    if status == "pass":
        return Check(name, status, measured, threshold, source, None, note)
    fixes = []
    if any(k == "fail" for _, k in hits):
        fixes.append("check cooling (airflow, fans, inlet temperature) and power delivery (PSU "
                     "redundancy, power-brake signal); watch `nvidia-smi -q -d PERFORMANCE` "
                     "during a run")
    if lowered:
        fixes.append("restore the default power limit: " + ", ".join(
            f"`sudo nvidia-smi -i {g.get('index')} -pl {g['power_limit_default']:g}`"
            for g in lowered))
    if not fixes:
        note = "; ".join([*notes, "the SM clock dropped or a limit other than the power cap "
                          "held it: the numbers are below what the GPU can do"])
    return Check(name, status, measured, threshold, source, "; ".join(fixes) or None, note)


def _limits(env: dict[str, Any]) -> str:
    """', its default of 700 W' where every GPU's enforced limit is its default; '' where the
    snapshot has no limits (a lowered one is its own warning)."""
    limits = {(g.get("power_limit"), g.get("power_limit_default")) for g in gpus(env)}
    if len(limits) != 1:
        return ""
    (limit, default), = limits
    if not limit or not default or limit < 0.99 * default:
        return ""
    return f", its default of {limit:g} W"


def _gpu_memory_problems(g: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one GPU's memory-error counters."""
    fail, warn = [], []
    rows = g.get("remapped_rows") or {}
    if rows.get("pending"):
        fail.append("a row remap is pending (needs a GPU reset)")
    if rows.get("failure"):
        fail.append("a row remap failed")
    if g.get("retired_pages_pending"):
        fail.append("a page retirement is pending (needs a GPU reset)")
    if g.get("ecc_uncorrected_volatile"):
        fail.append(f"{g['ecc_uncorrected_volatile']} uncorrected ECC errors since the driver "
                    "loaded")
    if g.get("ecc_uncorrected_aggregate") and not g.get("ecc_uncorrected_volatile"):
        warn.append(f"{g['ecc_uncorrected_aggregate']} uncorrected ECC errors in its lifetime")
    retired = (g.get("retired_pages_double_bit") or 0) + (g.get("retired_pages_single_bit") or 0)
    if retired:
        warn.append(f"{retired} retired pages")
    if rows.get("uncorrectable"):
        warn.append(f"{rows['uncorrectable']} rows remapped after uncorrectable errors")
    if g.get("ecc_current") is False:
        warn.append("ECC is off, so memory errors go undetected")
    return fail, warn


_MEMORY_KEYS = ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pages_double_bit",
                "retired_pages_single_bit", "retired_pages_pending", "remapped_rows")


def check_memory_errors(env: dict[str, Any]) -> Check:
    name = "ECC and memory errors"
    threshold = ("no uncorrected ECC error since the driver loaded, no pending page retirement "
                 "or row remap, no remap failure")
    source = "NVML memory error counters (NVIDIA GPU memory error management)"
    known = [g for g in gpus(env) if any(g.get(k) is not None for k in _MEMORY_KEYS)]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "ECC or row-remapping counters")
                       + (" (GeForce GPUs have no ECC)" if gpus(env) else ""))
    fails, warns = [], []
    for g in known:
        f, w = _gpu_memory_problems(g)
        fails += [f"GPU {g.get('index')}: {x}" for x in f]
        warns += [f"GPU {g.get('index')}: {x}" for x in w]
    if not fails and not warns:
        return Check(name, "pass", "no uncorrected errors, retired pages or pending remaps on "
                                   + count(len(known), "GPU"), threshold, source)
    fix = ("drain the GPU, then reset it (`sudo nvidia-smi -r -i N`) or reboot: benchbench never "
           "resets a GPU; if errors recur or a remap failed, ask the vendor for an RMA "
           "(`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` shows the counters)")
    if not fails and all("ECC is off" in w for w in warns):
        fix = "`sudo nvidia-smi -e 1`, then reboot"
    return Check(name, "fail" if fails else "warn", "; ".join(fails + warns), threshold, source,
                 fix)


def check_processes(env: dict[str, Any], run: RunResult | None) -> Check:
    name, threshold = "other GPU processes", "no other compute process on the GPUs"
    source = "NVML running compute processes"
    known = [g for g in gpus(env) if "other_processes" in g]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "running processes"))
    busy = [f"GPU {g.get('index')}: " + ", ".join(
        f"pid {p.get('pid')}" + (f" ({fmt.iec(p['memory_used'])})" if p.get("memory_used")
                                 else "") for p in g["other_processes"])
            for g in known if g["other_processes"]]
    if not busy:
        return Check(name, "pass", f"none on {count(len(known), 'GPU')}", threshold, source)
    # In a saved run the snapshot was taken just before the probes: they shared the GPU.
    return Check(name, "fail" if run else "warn", "; ".join(busy), threshold, source,
                 "stop them, or choose idle GPUs with CUDA_VISIBLE_DEVICES; list them with "
                 "`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`",
                 "this run's measurements shared the GPU with them" if run else None)
