"""Pure functions over a RunResult: % of datasheet peak, per-GPU spread. No torch import."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import limits, matmul_rates, scaling, stability
from benchbench.core import units as fmt
from benchbench.core.flops import resnet50_flops_per_image
from benchbench.core.gpus import gpu_for
from benchbench.core.peaks import PRECISION_DTYPE, GpuPeak, gpu_peak, pcie_rate
from benchbench.core.results import Measurement, RunResult
from benchbench.core.stats import rel_spread, spread

# Within one node, GPUs of one model differ by a few percent; 5% or more deserves a look
# (cooling, power capping, a degraded link).
GPU_SPREAD_WARN = 0.05


def gpu_name(run: RunResult, device: str) -> str | None:
    """The model name of 'cuda:N' from the environment snapshot (NVML, else torch)."""
    g = gpu_for(run.environment, device)
    return g.get("name") if g else None


def reference(run: RunResult, probe: str, m: Measurement) -> tuple[float, str] | None:
    """(the datasheet or link rate this measurement should be held against, what it is)."""
    if probe == "matmul" and m.metric in ("flops", "peak_flops"):
        peak = gpu_peak(m.context.get("gpu_name") or gpu_name(run, m.key["device"]))
        flops = peak.flops(m.key["dtype"]) if peak else None
        return (flops, f"{peak.model} dense {m.key['dtype']}") if peak and flops else None
    if probe == "memory_bandwidth" and m.key.get("memory", "host") != "host":
        peak = gpu_peak(m.context.get("gpu_name") or gpu_name(run, m.key["memory"]))
        return (peak.memory_bandwidth, f"{peak.model} memory") if peak else None
    if probe == "host_device_copy" and "pcie_gen_current" in m.context:
        gen, width = m.context.get("pcie_gen_current"), m.context.get("pcie_width_current")
        gmax, wmax = m.context.get("pcie_gen_max"), m.context.get("pcie_width_max")
        rate = pcie_rate(gen, width)
        what = f"PCIe Gen{gen} x{width}"
        if gmax and wmax and (gmax, wmax) != (gen, width):
            what += f" (link capable of Gen{gmax} x{wmax})"
        return (rate, what) if rate else None
    return None


def fraction_of_reference(run: RunResult, probe: str, m: Measurement) -> float | None:
    ref = reference(run, probe, m)
    return m.value / ref[0] if ref else None


def gpu_spread(run: RunResult, probe: str, metric: str, group: str,
               same: str | None = None) -> list[dict[str, Any]]:
    """Per `group` value (e.g. dtype), the slowest GPU and the relative spread across GPUs.

    With `same`, only measurements that agree on that context field are compared (matmul's
    peaks: `best_size`), so GPUs measured at different matrix sizes are never held against
    each other: a smaller matrix is slower on any GPU.
    """
    pr = run.probe(probe)
    if pr is None:
        return []
    by_group: dict[Any, list[Measurement]] = {}
    for m in pr.measurements:
        if m.metric == metric and str(m.key.get("device", "")).startswith("cuda"):
            at = m.context.get(same) if same else None
            by_group.setdefault((m.key.get(group), at), []).append(m)
    rows = []
    for (g, at), ms in by_group.items():
        if len(ms) < 2:
            continue
        slowest = min(ms, key=lambda m: m.value)
        s = spread([m.value for m in ms])
        row = {group: g, "slowest_device": slowest.key["device"],
               "slowest_value": slowest.value, "unit": slowest.unit, "spread": s,
               "gpus": len(ms), "warn": s >= GPU_SPREAD_WARN}
        if same:
            row[same] = at
        rows.append(row)
    return rows


# --- training ---------------------------------------------------------------------------------

ANALYSIS_VERSION = 6  # 2: all-reduce against its link, DDP scaling; 3: the verdict; 4: advice
# from the judged workload's own measurements, evidence ordered by the limit, plain names;
# 5: a real pipeline timed over less than one round of its workers does not arbitrate;
# 6: a figure beyond its physical limit (analysis/limits.py) is a measurement error
TRAINING_PROBES = ("resnet50", "transformer")
# (numerator, denominator) precision pairs of the speedup table, in reading order.
SPEEDUP_PAIRS = [("tf32", "fp32"), ("amp_bf16", "tf32"), ("amp_bf16", "fp32"),
                 ("amp_fp16", "tf32"), ("amp_fp16", "fp32"), ("fp8", "amp_bf16")]


def _throughputs(run: RunResult, probe: str) -> list[Measurement]:
    pr = run.probe(probe)
    return [m for m in pr.measurements if m.metric == "throughput"] if pr else []


def _ceiling(run: RunResult, device: str, dtype: str, peak: GpuPeak | None
             ) -> matmul_rates.MatmulRate | None:
    """mamfu's denominator: the sustained matmul rate of the dtype, or of one the datasheet
    rates equal (matmul_rates.equal_rated), so that every precision's share rests on the clock
    the power limit holds, not on one dtype's burst; a burst median only where the run timed
    nothing sustained."""
    sheet = {d: peak.flops(d) for d in ("bf16", "fp16", dtype)} if peak else {}
    return matmul_rates.equal_rated(run, device, dtype, sheet)


def _mamfu_basis(c: matmul_rates.MatmulRate, dtype: str) -> str:
    """'674 TFLOP/s, bf16 sustained 5.0 s': the denominator and how it was timed."""
    how = "sustained" if c.sustained else "burst median"
    seconds = c.measurement.context.get("seconds")
    over = f" {seconds:.1f} s" if c.sustained and isinstance(seconds, (int, float)) else ""
    equal = ", rated equal by the datasheet" if c.dtype != dtype else ""
    return f"{fmt.value(c.value, 'FLOP/s')}, {c.dtype} {how}{over}{equal}"


def _utilisation(run: RunResult, m: Measurement, achieved: float) -> dict[str, Any]:
    """MFU against the datasheet peak of the dtype the precision runs in (its boost clock),
    mamfu against the sustained matmul rate measured in this run (the clock the power limit
    held), each with its basis."""
    dtype = PRECISION_DTYPE[m.key["precision"]]
    peak = gpu_peak(m.context.get("gpu_name") or gpu_name(run, m.key["device"]))
    datasheet = peak.flops(dtype) if peak else None
    ceiling = _ceiling(run, m.key["device"], dtype, peak)
    return {
        "key": m.key, "flops_achieved": achieved, "dtype": dtype,
        "mfu": achieved / datasheet if datasheet else None,
        "mfu_reason": None if datasheet else (
            "no datasheet peak for a CPU" if m.key["device"] == "cpu" else
            f"no datasheet {dtype} peak for {m.context.get('gpu_name')}"),
        "peak_model": peak.model if peak else None,
        "mamfu": achieved / ceiling.value if ceiling else None,
        "mamfu_basis": _mamfu_basis(ceiling, dtype) if ceiling else None,
        "mamfu_reason": None if ceiling else f"matmul measured no {dtype} ceiling on "
                                             f"{m.key['device']} in this run",
    }


def transformer_utilisation(run: RunResult) -> list[dict[str, Any]]:
    """Per transformer throughput: achieved FLOP/s, MFU and mamfu (_utilisation)."""
    pr = run.probe("transformer")
    if pr is None:
        return []
    fpt = {(m.key.get("preset"), m.key.get("seq_len")): m.value
           for m in pr.measurements if m.metric == "flops_per_token"}
    rows = []
    for m in _throughputs(run, "transformer"):
        per_token = fpt.get((m.key.get("preset"), m.key.get("seq_len")))
        if per_token is not None:
            rows.append(_utilisation(run, m, m.value * per_token))
    return rows


def resnet50_utilisation(run: RunResult) -> list[dict[str, Any]]:
    """Per ResNet50 throughput (images/s): achieved FLOP/s, MFU and mamfu (_utilisation)."""
    return [_utilisation(run, m, m.value * resnet50_flops_per_image(int(m.key["image_size"])))
            for m in _throughputs(run, "resnet50") if m.key.get("image_size")]


def training_utilisation(run: RunResult) -> list[dict[str, Any]]:
    """Both training models' rows: ResNet50's, then the transformer's."""
    return resnet50_utilisation(run) + transformer_utilisation(run)


def precision_speedups(run: RunResult) -> list[dict[str, Any]]:
    """Per training model: tf32/fp32, amp/tf32 and amp/fp32, beside the datasheet ratio."""
    rows = []
    for probe in TRAINING_PROBES:
        by_precision = {m.key["precision"]: m for m in _throughputs(run, probe)}
        for num, den in SPEEDUP_PAIRS:
            a, b = by_precision.get(num), by_precision.get(den)
            if a is None or b is None:
                continue
            peak = gpu_peak(a.context.get("gpu_name"))
            pa, pb = (peak.flops(PRECISION_DTYPE[num]), peak.flops(PRECISION_DTYPE[den])) \
                if peak else (None, None)
            rows.append({"model": probe, "ratio": f"{num}/{den}", "measured": a.value / b.value,
                         "expected": pa / pb if pa and pb else None,
                         "expected_source": peak.model if peak and pa and pb else None})
    return rows


# MLPerf Storage's pass mark: the accelerator must be busy at least 90% of the time.
AU_PASS = 0.9
# The pipeline takes its batches from the loader the dataloader probe measured alone, so it
# cannot train faster than that loader delivers. Beyond this ratio (the loader's rounds spread
# by up to ~10% on an H200) the two figures disagree: the pipeline times again where it can,
# and the verdict does not let it decide.
LOADER_DISAGREES = 1.15
# Timed rounds of the loader's workers (a batch from each) that show the pipeline's steady
# state: a full prefetch buffer, two batches a worker, feeds the first rounds at the step's
# speed, and one round after a late warm-up read 0.94 on an H200 whose loader fed 0.71.
PIPELINE_MIN_ROUNDS = 5


def accelerator_utilisation(run: RunResult) -> list[dict[str, Any]]:
    """AU = total_ips / compute_ips (MLPerf Storage): real input pipeline against synthetic
    data on the device, both measured by `pipeline` at the same batch, size and precision."""
    pr = run.probe("pipeline")
    if pr is None:
        return []
    compute = {str(m.key): m for m in pr.measurements if m.metric == "compute_throughput"}
    rows = []
    for m in pr.measurements:
        c = compute.get(str(m.key))
        if m.metric != "total_throughput" or c is None or c.value <= 0:
            continue
        au = m.value / c.value
        # Batches come in rounds, one from each worker at once: fewer timed steps than a
        # round time a burst or a wait, not the loader's rate (workloads/pipeline/steady.py).
        # A sample per timed round; before rounds were kept, a sample per step.
        round_ = int(m.context.get("steps_per_round") or 1)
        rounds = m.context.get("timed_rounds")
        steps = int(m.context["steps"]) if rounds is not None else len(m.samples)
        rows.append({"key": m.key, "total_ips": m.value, "compute_ips": c.value, "au": au,
                     "passes": au >= AU_PASS, "steps": steps,
                     "compute_steps": len(c.samples),
                     "few_steps": bool(m.context.get("few_steps")),
                     "round": round_, "partial_round": steps < round_,
                     "rounds": int(rounds) if rounds is not None else steps // round_,
                     "spread": rel_spread(m.samples) if rounds is not None else None})
    return rows


def derive(run: RunResult) -> dict[str, Any]:
    """Every derived figure, stamped with the analysis version. Stored in results.json as a
    cache; report and compare recompute it. Figures beyond their physical limits are left
    out, and listed."""
    run = limits.screened(run)
    return {"analysis_version": ANALYSIS_VERSION,
            "measurement_errors": limits.errors(run),
            "precision_speedup": precision_speedups(run),
            "transformer_utilisation": transformer_utilisation(run),
            "accelerator_utilisation": accelerator_utilisation(run),
            "allreduce": scaling.allreduce_vs_link(run),
            "ddp_scaling": scaling.ddp_scaling(run),
            "stability": stability.judge_run(run)}
