"""The configuration doctor: read-only checks of a machine, or of a saved run, with fixes.

`run_checks(env, run, scenario)` holds an environment snapshot (and, when given, the run's
measurements) against the buyer's guide's rules, NVIDIA's driver table and what the run
measured. Where a measurement answers the guide's question, the measured verdict wins. Pure
functions: no torch, no NVML, nothing changed on the machine. The per-fact rules live in
doctor_rules; this module adds the storage rule, the scenario table and the order of checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.analysis import cached_reads
from benchbench.analysis.capacities import why_missing
from benchbench.analysis.verdict import analysis_config, training_set
from benchbench.core import interruption
from benchbench.core import units as fmt
from benchbench.core.peaks import gpu_peak
from benchbench.core.results import RunResult
from benchbench.doctor import measured as by_measurement
from benchbench.doctor.gpu_rules import (
    check_memory_errors,
    check_pcie,
    check_persistence,
    check_processes,
    check_throttling,
)
from benchbench.doctor.rules import (
    GUIDE,
    STATUSES,
    Check,
    check_cpu,
    check_driver_guide,
    check_driver_torch,
    check_ram,
    check_virtualisation,
    count,
    gpus,
    no_fact,
    skipped,
)

__all__ = ["Check", "STATUSES", "SCENARIOS", "Scenario", "run_checks", "failed", "counts"]

# The guide: below 3 GB/s sequential per data drive, it reports GPU utilisation under 30%.
GUIDE_READ_RATE = 3e9
MEASURED = "measured: this run's read rate against its training need"


def _throughput_need(env: dict[str, Any], run: RunResult) -> tuple[float | None, str]:
    """(B/s the GPUs consume at this run's best training throughput, how it was found), or
    (None, why not). Every GPU trains data-parallel, each reading its own files."""
    size = (run.extra.get("dataset") or {}).get("mean_file_size")
    best: dict[str, float] = {}
    for probe, metric in (("resnet50", "throughput"), ("pipeline", "compute_throughput")):
        pr = run.probe(probe)
        for m in pr.measurements if pr and pr.status == "ok" else []:
            dev = str(m.key.get("device", ""))
            if m.metric == metric and m.unit == "samples/s" and dev.startswith("cuda"):
                best[dev] = max(best.get(dev, 0.0), m.value)
    if not best:
        return None, "the run has no GPU training throughput (resnet50 or pipeline)"
    if not size:
        return None, "the run has no dataset facts (mean file size)"
    per_gpu = max(best.values())
    n = max(len(gpus(env)), len(best))
    return per_gpu * n * size, (f"{per_gpu:,.0f} images/s per GPU × {n} GPU"
                                f"{'s' if n > 1 else ''} × {fmt.iec(size)} mean file")


def check_storage(env: dict[str, Any], run: RunResult | None) -> Check:
    name = "storage read bandwidth"
    threshold = "≥ 3 GB/s sequential per data drive (below it the guide reports GPU utilisation " \
                "under 30%)"
    if run is None:
        return skipped(name, threshold, GUIDE, "no storage measurement: measure with "
                       "`benchbench run --only storage`, then `benchbench doctor RUN`")
    pr = run.probe("storage")
    if pr is None or pr.status != "ok":
        why = "the run has no storage probe" if pr is None and interruption.of(run) is None \
            else why_missing(run, "storage")
        return skipped(name, threshold, GUIDE, why)
    seq = [m for m in pr.measurements
           if m.metric == "read_bandwidth" and m.key.get("job") == "seq1m"]
    if not seq:
        return skipped(name, threshold, GUIDE, "the storage probe has no seq1m read")
    m = max(seq, key=lambda x: x.value)
    bw = m.value
    cached = cached_reads.host_cache(run)
    measured = (f"{fmt.si(bw, 'B/s')} sequential 1 MiB reads on {m.context.get('path')} "
                f"({m.context.get('device')}, {m.context.get('engine')})"
                + (f" ({cached_reads.HOST_CACHE})" if cached else ""))
    fix = ("put the dataset on NVMe (≥ 3 GB/s sequential), stripe several drives (RAID 0 or a "
           "parallel filesystem), or pack small files into large shards (WebDataset, TFRecord)")
    need, how = _throughput_need(env, run)
    ts = training_set(run, analysis_config(run))
    epoch = cached_reads.epoch_share(run, ts.bytes)
    if need is not None and epoch is not None:
        # Of a set larger than free RAM the page cache keeps part: storage reads the rest.
        need *= epoch[0]
        how += (f" × {epoch[0]:.1%}, the part of {ts.name} ({fmt.iec(ts.bytes)}) beyond the "
                f"{fmt.iec(epoch[1])} of free RAM that each epoch reads from storage")
    cold = [x.value for x in pr.measurements if x.metric == "dataset_read_bandwidth"]
    if cold:  # the dataset's own files, read cold: shown beside the rule, which stays seq1m
        how += f"; the dataset's own files read cold at {fmt.si(max(cold), 'B/s')}"
    if cached:
        how += f"; these reads {cached}"
    if need is None:
        if bw >= GUIDE_READ_RATE:
            return Check(name, "pass", measured, threshold, GUIDE, None, how)
        return Check(name, "warn", measured, threshold, GUIDE, fix, how)
    threshold = f"≥ {fmt.si(need, 'B/s')} measured need (guide: ≥ 3 GB/s)"
    need_text = f"the GPUs need {fmt.si(need, 'B/s')} ({how})"
    if bw >= need:
        note = need_text + (": enough, although below the guide's 3 GB/s"
                            if bw < GUIDE_READ_RATE else "")
        return Check(name, "pass", measured, threshold, MEASURED, None, note)
    return Check(name, "fail", measured, threshold, MEASURED, fix,
                 need_text + "; once the dataset sits in the page cache, later epochs hide this")


# --- network -----------------------------------------------------------------------------------

def gbps(rate: float) -> str:
    """A link rate in B/s as network people write it: bits per second."""
    return f"{rate * 8 / 1e9:g} Gb/s"


def links(env: dict[str, Any]) -> tuple[list[tuple[str, float]], list[dict[str, Any]]]:
    """(every NIC and active RDMA port with a known rate, the active RDMA ports)."""
    net = env.get("network") or {}
    rdma = [p for p in net.get("infiniband") or []
            if p.get("rate") and str(p.get("state") or "").upper() == "ACTIVE"]
    found = [(n.get("name"), n["rate"]) for n in net.get("interfaces") or [] if n.get("rate")]
    found += [(f"{p.get('device')}/{p.get('port')}", p["rate"]) for p in rdma]
    return found, rdma


def network_capacity(env: dict[str, Any]) -> float | None:
    """B/s a node can send: its active RDMA ports together, or its fastest NIC. (A RoCE port is
    also a NIC: the two are not added.)"""
    found, rdma = links(env)
    if not found:
        return None
    return max(sum(p["rate"] for p in rdma), max(rate for _, rate in found))


def check_network(env: dict[str, Any]) -> Check:
    name, threshold = "network (multi-node)", "≥ 100 Gb/s (only for multi-node training)"
    net = env.get("network")
    if net is None:
        return skipped(name, threshold, GUIDE, "the snapshot has no network facts")
    found, rdma = links(env)
    if not found:
        unknown = ", ".join(net.get("unknown_speed") or [])
        return skipped(name, threshold, GUIDE, "no physical NIC or active RDMA port reports a "
                       "link rate" + (f" (speed unknown: {unknown})" if unknown else ""))
    top, rate = max(found, key=lambda x: x[1])
    measured = f"fastest link {top} {gbps(rate)}"
    if rdma:
        measured += (f"; {len(rdma)} active RDMA ports, {gbps(sum(p['rate'] for p in rdma))} "
                     "together")
    if rate >= 100e9 / 8:
        return Check(name, "pass", measured, threshold, GUIDE)
    return Check(name, "warn", measured, threshold, GUIDE,
                 "for multi-node training: 100 Gb/s or faster InfiniBand or RoCE NICs, ideally "
                 "one per GPU",
                 "only matters for multi-node training: GPUs in one node talk over NVLink or "
                 "PCIe")


# --- scenarios: the guide's table of recommended configurations, by capability --------------------

GiB, GB, TB = 1024**3, 1e9, 1e12
# Nominal sizes: the kernel keeps some RAM, a filesystem some of its drive, and NVML may report
# a little under the marketed GPU memory, so a machine within this fraction meets the figure.
NOMINAL = 0.95
NOMINAL_DISK = 0.9


@dataclass(frozen=True)
class Scenario:
    """One row of the guide's recommended configurations, as capabilities to meet."""

    title: str
    gpus: str  # the row as the guide writes it
    gpu_count: int  # the fewest GPUs the row names
    gpu_ref: str  # the weakest GPU the row names, as NVML spells it (looked up in peaks)
    # B per GPU as the card holds it: a GPU's marketed "GB" are GiB (an A100 or H100 80GB
    # reports 81,559-81,920 MiB, an RTX 4090 24,564 MiB); the T4's 16 GB row is decimal, since
    # ECC keeps 1 GiB of its 16 GiB and it reports 15,360 MiB.
    gpu_memory: float
    dtype: str  # the precision the workload trains or serves in
    ram: float  # B
    ram_text: str
    storage: float | None  # B of the data filesystem; None: any size
    storage_text: str
    network: float | None  # B/s a node sends; None: an active RDMA port is what counts
    network_text: str


SCENARIOS = {
    "cv": Scenario("ResNet50-class CV training", "1–2× RTX 4090 24 GB", 1,
                   "NVIDIA GeForce RTX 4090", 24 * GiB, "bf16", 32 * GiB, "32–64 GB", 1 * TB,
                   "1 TB NVMe", 1e9 / 8, "1 GbE"),
    "nlp-finetune": Scenario("BERT/Llama fine-tuning", "4× A100 80 GB / H100", 4,
                             "NVIDIA A100-SXM4-80GB", 80 * GiB, "bf16", 256 * GiB, "256–512 GB",
                             2 * TB, "2 TB NVMe", None, "InfiniBand/RoCE"),
    "multimodal-pretrain": Scenario("GPT/CLIP-class pre-training", "8× H100 80 GB or more", 8,
                                    "NVIDIA H100 80GB HBM3", 80 * GiB, "bf16", 1024 * GiB,
                                    "≥ 1 TB", 10 * TB, "10 TB+ all-flash", 200e9 / 8,
                                    "≥ 200 Gb/s"),
    # T4 has no bf16 tensor cores; batch inference on this row runs in fp16.
    "inference": Scenario("batch inference", "1–2× T4/L4/RTX 4090", 1, "Tesla T4", 16 * GB,
                          "fp16", 16 * GiB, "16–32 GB", None, "SSD", 1e9 / 8, "1 GbE"),
}


def _per_gpu_flops(env: dict[str, Any], run: RunResult | None, dtype: str
                   ) -> tuple[float | None, str]:
    """(the slowest GPU's dense FLOP/s, its basis): the datasheet, compared with the reference's
    datasheet, like with like; this run's matmul peak only when the GPU is not in the table."""
    sheet = [gpu_peak(g.get("name")) for g in gpus(env)]
    sheet_flops = [p.flops(dtype) if p else None for p in sheet]
    known = [(p, f) for p, f in zip(sheet, sheet_flops, strict=True) if p and f]
    pr = run.probe("matmul") if run else None
    measured = [m.value for m in (pr.measurements if pr else [])
                if m.metric == "peak_flops" and m.key.get("dtype") == dtype
                and str(m.key.get("device", "")).startswith("cuda")]
    note = f"; this run measured {fmt.si(min(measured), 'FLOP/s')}" if measured else ""
    if known and len(known) == len(sheet):
        peak, flops = min(known, key=lambda pf: pf[1])
        return flops, f"{peak.model} datasheet{note}"
    if measured:
        return min(measured), "measured matmul peak (the GPU is not in the datasheet table)"
    if not gpus(env):
        return None, no_fact(env, "GPUs")
    names = ", ".join(sorted({str(g.get("name")) for g in gpus(env)}))
    return None, f"no datasheet {dtype} figure for {names} and no measured matmul peak"


def scenario_checks(key: str, env: dict[str, Any], run: RunResult | None) -> list[Check]:
    s = SCENARIOS[key]
    source = f"buyer's guide: recommended configuration for {s.title}"
    # Where the run measured what the row asks (how large a model fine-tunes, what rate is
    # served), the measurement answers instead of the GPU's memory or compute by name.
    fit = by_measurement.fine_tuning(key, run) if key == "nlp-finetune" else None
    served = by_measurement.serving(key, run) if key == "inference" else None
    out = [fit or _gpu_memory(key, s, env, source),
           served or _gpu_compute(key, s, env, run, source)]

    name, threshold = f"{key}: RAM", f"{s.ram_text} (≥ {fmt.iec(s.ram)})"
    ram = (env.get("host") or {}).get("memory_total")
    if not ram:
        out.append(skipped(name, threshold, source, "the snapshot has no RAM size"))
    else:
        short = ram < NOMINAL * s.ram
        out.append(Check(name, "warn" if short else "pass", fmt.iec(ram), threshold, source,
                         f"add RAM to {s.ram_text}" if short else None))

    out.append(_scenario_storage(key, s, env, source))
    out.append(_scenario_network(key, s, env, source))
    return out


def _gpu_memory(key: str, s: Scenario, env: dict[str, Any], source: str) -> Check:
    name, threshold = f"{key}: GPU memory", (
        f"{s.gpus}: ≥ {s.gpu_count} × {fmt.si(s.gpu_memory, 'B')} = "
        f"{fmt.si(s.gpu_count * s.gpu_memory, 'B')}")
    sizes = [g["memory_total"] for g in gpus(env) if g.get("memory_total") is not None]
    if not sizes or len(sizes) < len(gpus(env)):
        return skipped(name, threshold, source, no_fact(env, "GPU memory"))
    measured = f"{count(len(sizes), 'GPU')} × {fmt.iec(min(sizes))} = {fmt.iec(sum(sizes))}"
    small = min(sizes) < NOMINAL * s.gpu_memory
    short = small or sum(sizes) < NOMINAL * s.gpu_count * s.gpu_memory
    return Check(name, "warn" if short else "pass", measured, threshold, source,
                 f"more GPUs or GPUs with more memory ({s.gpus})" if short else None,
                 "per-GPU memory below the reference's: the model must be sharded"
                 if small else None)


def _gpu_compute(key: str, s: Scenario, env: dict[str, Any], run: RunResult | None,
                 source: str) -> Check:
    ref = gpu_peak(s.gpu_ref)
    ref_flops = ref.flops(s.dtype) if ref else None
    name = f"{key}: GPU {s.dtype} compute"
    threshold = (f"≥ {fmt.si(ref_flops or 0, 'FLOP/s')} dense {s.dtype} per GPU "
                 f"({ref.model if ref else s.gpu_ref})")
    flops, basis = _per_gpu_flops(env, run, s.dtype)
    if flops is None:
        return skipped(name, threshold, source, basis)
    short = flops < (ref_flops or 0)
    return Check(name, "warn" if short else "pass", f"{fmt.si(flops, 'FLOP/s')} ({basis})",
                 threshold, source, f"faster GPUs ({s.gpus})" if short else None)


def _scenario_storage(key: str, s: Scenario, env: dict[str, Any], source: str) -> Check:
    name = f"{key}: storage"
    threshold = f"{s.storage_text} (solid-state)"
    st = env.get("storage") or {}
    total, rotational = st.get("total"), st.get("rotational")
    if not total and rotational is None:
        return skipped(name, threshold, source, "the snapshot has no storage facts")
    medium = {True: "rotational", False: "non-rotational"}.get(bool(rotational),
                                                              "medium unknown") \
        if rotational is not None else "medium unknown"
    measured = (f"{fmt.si(total, 'B') if total else '? B'} filesystem at "
                f"{st.get('mountpoint')} ({st.get('device')}, {medium})")
    problems = []
    if s.storage and total and total < NOMINAL_DISK * s.storage:
        problems.append(f"smaller than {s.storage_text}")
    if rotational:
        problems.append("the device reports itself rotational (a spinning disk, or a virtual "
                        "disk that says so)")
    note = "; ".join(problems) or None
    if not problems:
        note = "the filesystem of the snapshot's path; a dataset elsewhere is not checked"
    return Check(name, "warn" if problems else "pass", measured, threshold, source,
                 f"{s.storage_text} for the dataset" if problems else None, note)


def _scenario_network(key: str, s: Scenario, env: dict[str, Any], source: str) -> Check:
    name, threshold = f"{key}: network", s.network_text
    if env.get("network") is None:
        return skipped(name, threshold, source, "the snapshot has no network facts")
    found, rdma = links(env)
    if s.network is None:  # the row asks for InfiniBand or RoCE, whatever its rate
        kinds = sorted({str(p.get("link_layer") or "RDMA") for p in rdma})
        if rdma:
            return Check(name, "pass", f"{len(rdma)} active RDMA ports ({', '.join(kinds)})",
                         threshold, source)
        return Check(name, "warn", "no active InfiniBand or RoCE port", threshold, source,
                     "InfiniBand or RoCE NICs for multi-node training")
    cap = network_capacity(env)
    if cap is None:
        return skipped(name, threshold, source, "no physical NIC or active RDMA port reports a "
                       "link rate")
    short = cap < s.network
    return Check(name, "warn" if short else "pass", gbps(cap), threshold, source,
                 f"{s.network_text} networking" if short else None)


# --- all of it -------------------------------------------------------------------------------

def run_checks(env: dict[str, Any], run: RunResult | None = None,
               scenario: str | None = None) -> list[Check]:
    """Every check, in reading order; the scenario's after the rest. Never raises on missing
    facts: those checks are skipped with the reason."""
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: choose from {', '.join(SCENARIOS)}")
    env = env if isinstance(env, dict) else {}
    checks = [
        check_ram(env), check_cpu(env, run), check_storage(env, run), check_driver_guide(env),
        check_driver_torch(env), check_persistence(env), check_pcie(env, run),
        check_throttling(env, run), check_memory_errors(env), check_processes(env, run),
        check_virtualisation(env, run), check_network(env),
    ]
    if scenario:
        checks += scenario_checks(scenario, env, run)
    return checks


def counts(checks: list[Check]) -> dict[str, int]:
    return {s: sum(c.status == s for c in checks) for s in STATUSES}


def failed(checks: list[Check]) -> bool:
    """True when a check failed: `benchbench doctor` then exits 1. Warnings alone do not."""
    return any(c.status == "fail" for c in checks)
