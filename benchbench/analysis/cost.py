"""What training costs on a measured machine, and whether to buy it or rent it.

Pure functions over a RunResult and its verdict (no torch). The throughput costed is the whole
machine's, as it would train: ResNet50 at the real 224 px in its best measured precision, and
the transformer's best tokens/s, each × the devices; when the verdict names a bottleneck that
is not compute, the end-to-end figure replaces the synthetic one. A figure that cannot be
computed is None, with the reason among the caveats; one that is computed from a run that does
not represent real training (a --quick run, another image size) is marked representative False.
Prices are in US dollars; the run's own is run.extra["cost"]["usd_per_hour"] (run
--price-per-hour).
"""

from __future__ import annotations

import math
from typing import Any

from benchbench.analysis import capacities as cap
from benchbench.analysis import energy, guide
from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core.gpus import gpu_count, run_gpus
from benchbench.core.names import counted
from benchbench.core.results import Measurement, RunResult

REFERENCE_EPOCHS = 90
IMAGENET_IMAGES = 1_281_167  # ImageNet-1k (ILSVRC-2012) training images per epoch
DEFAULT_JOB_TOKENS = 10_000_000_000  # the transformer reference job; the user can set it
REAL_IMAGE_SIZE = 224  # ResNet50's ImageNet training crop
COMPUTE = ("gpu_compute", "cpu_compute")
HOURS_PER_YEAR = 8760
# The buyer's guide's claim that buy_vs_rent holds the user's own numbers against.
GUIDE_CLAIM = "owning is 35–50% cheaper over 3 years above 60–70% utilisation"
GUIDE_SAVING = (35, 50)  # percent
GUIDE_UTILISATION = 0.60
GUIDE_YEARS = 3.0
IDLE_POWER = ("not charged: energy is counted only for useful hours, at power_watts; an idle "
              "machine is assumed switched off or drawing little next to its load")
# Host power next to the GPUs' limits: a stated allowance, not a measurement. Server CPUs draw
# about 4-6 W per core at full load (e.g. EPYC 9654: 360 W TDP / 96 cores; Xeon 8480+: 350 W /
# 56 cores), plus memory, fans, NICs and drives. Pass power_watts for the machine's own figure.
HOST_BASE_W = 150.0
CPU_CORE_W = 5.0
UNKNOWN_CORES = 64  # a dual-socket host, when the run did not record its cores
# A GPU whose power limit NVML did not report counts at the H100/H200 SXM limit, so that the
# default never understates a data-centre GPU's draw.
UNKNOWN_GPU_W = 700.0


def price_of(run: RunResult) -> float | None:
    """The run's own price in USD per hour (run --price-per-hour), else None."""
    c = run.extra.get("cost")
    price = c.get("usd_per_hour") if isinstance(c, dict) else None
    return float(price) if isinstance(price, (int, float)) and not isinstance(price, bool) \
        else None


def _devices(run: RunResult) -> tuple[int, str]:
    if str(run.config.get("device_resolved") or "cpu") == "cuda":
        n = max(1, gpu_count(run.environment))
        return n, counted(n, "GPU")
    return 1, "the CPU"


def _workload_verdict(verdict: Verdict | None, workload: str) -> WorkloadVerdict | None:
    return verdict.per_workload.get(workload) if verdict else None


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _bottleneck(wv: WorkloadVerdict | None, synthetic: float, unit: str, caveats: list[str]
                ) -> tuple[float | None, str]:
    """The verdict's bottleneck capacity when it is not compute: (value or None, its name)."""
    limiting = wv.limiting_resource if wv else None
    if limiting is None:
        why = "the verdict names no bottleneck" if wv else "the run has no verdict"
        caveats.append(f"{why}: the synthetic compute figure of {_fmt(synthetic)} {unit} is "
                       "costed, an upper bound that the input side may not reach")
        return None, ""
    if limiting in COMPUTE:
        return None, limiting
    value = wv.capacity(limiting) if wv else None
    if value is None:
        caveats.append(f"the verdict names {limiting} as the bottleneck but records no "
                       f"capacity for it: the synthetic {_fmt(synthetic)} {unit} is costed")
        return None, ""
    return float(value), limiting


def _images(run: RunResult, verdict: Verdict | None, caveats: list[str]
            ) -> tuple[float | None, str, bool]:
    """ResNet50 images/s for the whole machine: (value, basis, representative)."""
    n, where = _devices(run)
    candidates = cap.metric(cap.ok_probe(run, "resnet50"), "throughput")
    if not candidates:
        caveats.append(f"no images/s to cost: {cap.why_missing(run, 'resnet50')}")
        return None, "not measured", True
    real = [m for m in candidates if m.key.get("image_size") == REAL_IMAGE_SIZE]
    best = max(real or candidates, key=lambda m: m.value)
    representative = bool(real)
    if not real:
        caveats.append(f"not representative: resnet50 was measured at "
                       f"{best.key.get('image_size')} px, not the real {REAL_IMAGE_SIZE} px, so "
                       "its images/s (and their cost) are not those of ImageNet training; rerun "
                       f"without --quick or with --set resnet50.image_size={REAL_IMAGE_SIZE}")
    synthetic = best.value * n
    basis = (f"synthetic: resnet50 {best.key.get('precision')} at {best.key.get('image_size')} "
             f"px, {_fmt(best.value)} images/s per device × {where}")
    bottleneck, limiting = _bottleneck(_workload_verdict(verdict, "resnet50"), synthetic,
                                       "images/s", caveats)
    if bottleneck is None:
        return synthetic, basis, representative
    resnet = _workload_verdict(verdict, "resnet50")
    pipe = _pipeline(run, (resnet.precision if resnet else None) or best.key.get("precision"))
    if pipe is not None and pipe.value * n < bottleneck:
        if pipe.key.get("image_size") != REAL_IMAGE_SIZE:
            representative = False
            caveats.append(f"not representative: the end-to-end pipeline ran at "
                           f"{pipe.key.get('image_size')} px, not the real {REAL_IMAGE_SIZE} px")
        return pipe.value * n, (
            f"end to end ({limiting} limits training): the pipeline probe trained "
            f"{_fmt(pipe.value)} images/s per device from real data "
            f"({pipe.key.get('loader')}, {pipe.key.get('workers')} workers, "
            f"{pipe.key.get('precision')}) × {where}, below the verdict's {limiting} capacity of "
            f"{_fmt(bottleneck)} images/s"), representative
    return bottleneck, (f"end to end: the verdict's bottleneck, {limiting}, at "
                        f"{_fmt(bottleneck)} images/s for the whole machine (synthetic compute "
                        f"would reach {_fmt(synthetic)})"), representative


def _pipeline(run: RunResult, precision: str | None) -> Measurement | None:
    rows = cap.metric(cap.ok_probe(run, "pipeline"), "total_throughput")
    same = [m for m in rows if m.key.get("precision") == precision]
    return max(same or rows, key=lambda m: m.value, default=None)


def _tokens(run: RunResult, verdict: Verdict | None, caveats: list[str]
            ) -> tuple[float | None, str]:
    n, where = _devices(run)
    best = max(cap.metric(cap.ok_probe(run, "transformer"), "throughput"),
               key=lambda m: m.value, default=None)
    if best is None:
        caveats.append(f"no tokens/s to cost: {cap.why_missing(run, 'transformer')}")
        return None, "not measured"
    synthetic = best.value * n
    basis = (f"synthetic: transformer {best.key.get('preset')} (seq_len "
             f"{best.key.get('seq_len')}) {best.key.get('precision')}, {_fmt(best.value)} "
             f"tokens/s per device × {where}; a larger model trains fewer tokens/s")
    bottleneck, limiting = _bottleneck(_workload_verdict(verdict, "transformer"), synthetic,
                                       "tokens/s", caveats)
    if bottleneck is None:
        return synthetic, basis
    return bottleneck, (f"end to end: the verdict's bottleneck, {limiting}, at "
                        f"{_fmt(bottleneck)} tokens/s for the whole machine (synthetic compute "
                        f"would reach {_fmt(synthetic)})")


def usable_throughput(run: RunResult, verdict: Verdict | None) -> dict[str, Any]:
    """Whole-machine training throughput to cost: images/s (ResNet50) and tokens/s
    (transformer), each with the basis it was taken on, whether the run represents real
    training, and the caveats."""
    caveats: list[str] = []
    representative = True
    if run.config.get("quick"):
        representative = False
        caveats.append("not representative: a --quick run (small sizes, short timings); rerun "
                       "without --quick before costing this machine")
    ips, images_basis, images_ok = _images(run, verdict, caveats)
    tps, tokens_basis = _tokens(run, verdict, caveats)
    return {"images_per_s": ips, "images_basis": images_basis,
            "tokens_per_s": tps, "tokens_basis": tokens_basis,
            "representative": representative and images_ok, "caveats": caveats}


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be zero or a positive number, got {value!r}")


def run_costs(run: RunResult, verdict: Verdict | None, usd_per_hour: float,
              job_tokens: int = DEFAULT_JOB_TOKENS) -> dict[str, Any]:
    """Dollars per million images and per billion tokens, the reference jobs' time and cost,
    and throughput per dollar-hour, at usd_per_hour. None where the throughput is unknown."""
    _positive("usd_per_hour", usd_per_hour)
    _positive("job_tokens", job_tokens)
    t = usable_throughput(run, verdict)
    ips, tps = t["images_per_s"], t["tokens_per_s"]
    images = REFERENCE_EPOCHS * IMAGENET_IMAGES
    ref = None
    if ips:
        hours = images / ips / 3600
        ref = {"what": f"ResNet50, {REFERENCE_EPOCHS} epochs of ImageNet-1k", "images": images,
               "hours": hours, "usd": hours * usd_per_hour}
    token_job = None
    if tps:
        hours = job_tokens / tps / 3600
        token_job = {"tokens": int(job_tokens), "hours": hours, "usd": hours * usd_per_hour}
    per_kwh, per_kwh_basis = energy.images_per_kwh(run)
    served, served_basis = _served(run)
    params, params_basis = _largest_model(run)
    return {
        "usd_per_hour": float(usd_per_hour),
        # Serving and fine-tuning, from the inference and memory_fit workloads.
        "usd_per_million_inferences": usd_per_hour / (served * 3600) * 1e6 if served else None,
        "inferences_basis": served_basis,
        "largest_model_params": params,
        "params_per_usd_hour": params / usd_per_hour if params else None,
        "largest_model_basis": params_basis,
        "usd_per_million_images": usd_per_hour / (ips * 3600) * 1e6 if ips else None,
        "usd_per_billion_tokens": usd_per_hour / (tps * 3600) * 1e9 if tps else None,
        "reference_job": ref, "token_job": token_job,
        "images_per_s_per_usd_hour": ips / usd_per_hour if ips else None,
        "tokens_per_s_per_usd_hour": tps / usd_per_hour if tps else None,
        # measured on one device (analysis/energy), or None with the reason as its basis
        "images_per_kwh": per_kwh, "images_per_kwh_basis": per_kwh_basis,
        "basis": {"images": t["images_basis"], "tokens": t["tokens_basis"]},
        "representative": t["representative"], "caveats": t["caveats"],
    }


def _served(run: RunResult) -> tuple[float | None, str]:
    """(ResNet50 images/s this machine serves: within the p99 bound, else offline; how)."""
    pr = cap.ok_probe(run, "inference")
    served = guide.server_rate(pr)
    if served is not None:
        # A rate whose search ran out of time is a floor: the cost it gives is a ceiling.
        floor = (f"; {guide.LOWER_BOUND}; the cost per million inferences is at most this"
                 if guide.rate_is_lower_bound(served) else "")
        return served.value, (f"inference server_throughput: ResNet50 within "
                              f"{served.key['latency_bound_s'] * 1e3:g} ms p99 "
                              f"({guide.conditions(served)}){floor}")
    offline = guide.offline_peak(pr)
    if offline is not None:
        return offline.value, (f"inference peak_offline_throughput ({guide.conditions(offline)}; "
                               "no rate met the latency bound, so offline)")
    return None, f"skipped, because {cap.why_missing(run, 'inference')}"


def _largest_model(run: RunResult) -> tuple[float | None, str]:
    """(the most parameters one device fully fine-tunes, measured; how)."""
    ms = cap.metric(cap.ok_probe(run, "memory_fit"), "largest_model")
    best = max(ms, key=lambda m: m.value, default=None)
    if best is None:
        return None, f"skipped, because {cap.why_missing(run, 'memory_fit')}"
    return best.value, (f"memory_fit largest_model: {best.context.get('rung')} "
                        f"({best.key['mode']}, seq {best.key['seq_len']}) on one device")


def buy_vs_rent(purchase_usd: float, cloud_usd_per_hour: float, *, power_watts: float,
                usd_per_kwh: float = 0.15, years: float = 3.0, ops_usd_per_year: float = 0.0,
                utilization: float = 0.7) -> dict[str, Any]:
    """Owning against renting the same (or an equivalent) machine, per hour of useful work.

    At utilisation U the owned machine costs (purchase / (years × 8760) + ops / 8760) / U
    plus its energy per useful hour (power_watts / 1000 × usd_per_kwh); idle hours are not
    charged for energy (IDLE_POWER). Owning breaks even where that equals the cloud price.
    """
    _positive("purchase_usd", purchase_usd)
    _positive("cloud_usd_per_hour", cloud_usd_per_hour)
    _non_negative("power_watts", power_watts)
    _non_negative("usd_per_kwh", usd_per_kwh)
    _positive("years", years)
    _non_negative("ops_usd_per_year", ops_usd_per_year)
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) \
            or not 0 < utilization <= 1:
        raise ValueError(f"utilization must be a fraction above 0 and at most 1, got "
                         f"{utilization!r}")
    fixed = purchase_usd / (years * HOURS_PER_YEAR) + ops_usd_per_year / HOURS_PER_YEAR
    energy = power_watts / 1000 * usd_per_kwh
    owned = fixed / utilization + energy
    margin = cloud_usd_per_hour - energy
    break_even = fixed / margin if margin > 0 and fixed / margin <= 1 else None
    saving = 1 - owned / cloud_usd_per_hour
    useful_hours = years * HOURS_PER_YEAR * utilization
    over_years = (cloud_usd_per_hour * useful_hours
                  - (purchase_usd + ops_usd_per_year * years + energy * useful_hours))
    return {
        "owned_usd_per_useful_hour": owned, "cloud_usd_per_hour": float(cloud_usd_per_hour),
        "break_even_utilization": break_even, "saving_at_utilization": saving,
        "saving_over_years_usd": over_years,
        "inputs": {"purchase_usd": purchase_usd, "cloud_usd_per_hour": cloud_usd_per_hour,
                   "power_watts": power_watts, "usd_per_kwh": usd_per_kwh, "years": years,
                   "ops_usd_per_year": ops_usd_per_year, "utilization": utilization,
                   "energy_usd_per_useful_hour": energy, "idle_power": IDLE_POWER},
        "guide_claim": GUIDE_CLAIM,
        "guide_check": _guide_check(saving, utilization, years, break_even),
    }


def _guide_check(saving: float, utilization: float, years: float,
                 break_even: float | None) -> str:
    pct = round(saving * 100)
    what = f"{pct}% cheaper" if pct >= 0 else f"{-pct}% dearer"
    low, high = GUIDE_SAVING
    if low <= pct <= high:
        against = f"within the guide's {low}–{high}%"
    else:
        side = "more than" if pct > high else "less than"
        against = f"outside the guide's {low}–{high}% ({side} it claims)"
    text = (f"At {utilization:.0%} utilisation over {years:g} years your own numbers give "
            f"owning {what} than renting: {against}")
    scope = []
    if utilization < GUIDE_UTILISATION:
        scope.append("the guide's claim is for 60–70% utilisation and above")
    if years != GUIDE_YEARS:
        scope.append(f"it counts {GUIDE_YEARS:g} years, you gave {years:g}")
    if scope:
        text += f" ({'; '.join(scope)})"
    text += (f". Owning breaks even at {break_even:.0%} utilisation" if break_even is not None
             else ". Owning never breaks even at this cloud price, even fully used")
    return text + "; idle hours are not charged for energy."


def _host_allowance(run: RunResult) -> tuple[float, str]:
    host = run.environment.get("host") or {}
    cores = host.get("cores_physical") or host.get("cores_usable")
    counted = f"{cores} cores" if cores else f"{UNKNOWN_CORES} cores assumed (not recorded)"
    host_w = HOST_BASE_W + CPU_CORE_W * (cores or UNKNOWN_CORES)
    return host_w, (f"a host allowance of {host_w:,.0f} W ({HOST_BASE_W:.0f} W for memory, "
                    f"fans, NICs and drives + {CPU_CORE_W:.0f} W per CPU core × {counted})")


def power_under_load(run: RunResult) -> tuple[float, str]:
    """The machine's power under training load, for buy_vs_rent: (watts, the basis, which says
    whether it was measured). Measured where the training probes' telemetry measured it
    (analysis/energy): the trained GPU's watts × the GPUs, plus the CPU packages from RAPL and
    an allowance for the rest of the host, or the whole host allowance when RAPL was not
    readable. Else default_power_watts's estimate from the power limits."""
    load = energy.load_power(run)
    n, _ = _devices(run)
    cuda = str(run.config.get("device_resolved") or "cpu") == "cuda"
    if load is None or (cuda and load["gpu_W"] is None):
        watts, how = default_power_watts(run)
        return watts, f"estimated, the run measured no power under load: {how}"
    if load["cpu_W"] is not None:
        host_w = load["cpu_W"] + HOST_BASE_W
        host_how = (f"CPU packages {load['cpu_W']:,.0f} W measured (RAPL) + an allowance of "
                    f"{HOST_BASE_W:.0f} W for memory, fans, NICs and drives (not measured)")
    else:
        host_w, host_how = _host_allowance(run)
        host_how += " (the CPU was not measurable)"
    gpu_w = load["gpu_W"] * n if cuda else 0.0
    gpu_how = f"{load['gpu_W']:,.0f} W per GPU × {counted(n, 'GPU')} + " if cuda else ""
    return gpu_w + host_w, (f"measured under load by {', '.join(load['probes'])}: {gpu_how}"
                            f"{host_how}. Per probe: {load['basis']}")


def default_power_watts(run: RunResult) -> tuple[float, str]:
    """The machine's power under training load estimated from the GPUs' power limits
    (training runs close to them) plus a host allowance. (watts, how it was estimated)."""
    host_w, host_how = _host_allowance(run)
    cuda = str(run.config.get("device_resolved") or "cpu") == "cuda"
    gpus = run_gpus(run.environment) if cuda else []
    if not gpus:
        return host_w, f"no GPUs: {host_how}"
    limits, unknown = [], 0
    for g in gpus:
        w = g.get("power_limit") or g.get("power_limit_default")
        if w:
            limits.append(float(w))
        else:
            unknown += 1
            limits.append(UNKNOWN_GPU_W)
    gpu_w = sum(limits)
    how = (f"{counted(len(gpus), 'GPU power limit')} "
           f"{'of' if len(gpus) == 1 else 'summing to'} {gpu_w:,.0f} W")
    if unknown:
        how += (f" ({unknown} not recorded, counted at {UNKNOWN_GPU_W:.0f} W, the H100/H200 "
                "SXM limit)")
    return gpu_w + host_w, f"{how} + {host_how}"
