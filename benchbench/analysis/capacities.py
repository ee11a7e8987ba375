"""Each resource's capacity in the workload's samples per second for the whole machine.

Pure functions over a RunResult (no torch). A capacity is "measured" (with how it was derived,
numbers included), "unknown" (a probe it needs was skipped or failed: it says which), or "not
applicable" (it says why). Nothing is guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from benchbench.core import interruption
from benchbench.core.gpus import gpu_count
from benchbench.core.names import counted, loader_name
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.stats import rel_spread

# torchvision's resnet50: 25,557,032 parameters. DDP all-reduces fp32 gradients, AMP included
# (the parameters stay fp32; autocast only changes the activations' dtype).
RESNET50_PARAMS = 25_557_032
GRAD_BYTES = 4
# The loaders ship normalised float32 CHW tensors (torchvision ToTensor+Normalize, DALI FLOAT).
FLOAT_PIXEL_BYTES = 4
# Token data: uint16 ids in a memory-mapped file on disk (as nanoGPT stores them), int64 inputs
# and targets (16 B per token) to the device.
TOKEN_FILE_BYTES = 2
TOKEN_SHIP_BYTES = 16


@dataclass
class Capacity:
    resource: str
    value: float | None  # samples/s (images/s or tokens/s) for the whole machine
    status: str  # "measured", "unknown" or "not applicable"
    how: str  # how the figure was derived, with its inputs
    missing: str | None = None  # why it is unknown or not applicable
    source: str | None = None  # the probe and measurement it came from: "resnet50 throughput"
    spread: float | None = None  # its samples' robust spread, relative (rel_spread)
    # Why the figure is a floor, not the capacity ("DALI (CPU) not measured: the time budget
    # ran out before it"): a configuration that did not run might have been faster.
    at_least: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def unknown(resource: str, missing: str) -> Capacity:
    return Capacity(resource, None, "unknown", "", missing)


def not_applicable(resource: str, why: str) -> Capacity:
    return Capacity(resource, None, "not applicable", "", why)


def ok_probe(run: RunResult, name: str) -> ProbeResult | None:
    pr = run.probe(name)
    return pr if pr is not None and pr.status == "ok" and pr.measurements else None


def why_missing(run: RunResult, name: str) -> str:
    pr = run.probe(name)
    if pr is None:
        cut = interruption.of(run)
        return f"the {name} probe did not run" + (
            f": the run was interrupted by {cut.signal} before it"
            if cut is not None and name in cut.not_run else "")
    if pr.status == "ok":
        return f"the {name} probe measured nothing usable for this"
    return interruption.outcome(run, pr)


def metric(pr: ProbeResult | None, name: str, **key: Any) -> list[Measurement]:
    if pr is None:
        return []
    return [m for m in pr.measurements if m.metric == name
            and all(m.key.get(k) == v for k, v in key.items())]


@dataclass
class Setting:
    """The configuration the capacities are judged at: the one `pipeline` ran, else the best
    precision the training probe measured; for ResNet50, at the image size the loader was
    measured at (the compute figure is scaled to it when it was measured at another)."""

    workload: str
    device: str  # "cuda" or "cpu"
    devices: int  # GPUs on this machine, or 1 for a CPU
    precision: str | None
    image_size: int  # the size the capacities are compared at
    batch: int | None  # per device
    compute_m: Measurement | None  # the single-device throughput the compute capacity uses
    mean_file_bytes: float  # of the real training set
    unit: str
    compute_probe: str | None = None  # the probe compute_m came from
    compute_image: int | None = None  # the size compute_m was measured at

    @property
    def compute_scale(self) -> float:
        """ResNet50's work grows with the pixels of an image: a step measured at 64 px is
        (224/64)^2 = 12x cheaper than one at 224 px. 1 when the sizes agree."""
        if self.workload != "resnet50" or not self.compute_image or \
                self.compute_image == self.image_size:
            return 1.0
        return (self.compute_image / self.image_size) ** 2

    @property
    def per_device(self) -> float | None:
        return self.compute_m.value * self.compute_scale if self.compute_m else None


def setting(run: RunResult, workload: str, mean_file_bytes: float) -> Setting:
    device = str(run.config.get("device_resolved") or "cpu")
    devices = max(1, gpu_count(run.environment)) if device == "cuda" else 1
    pipe = next(iter(metric(ok_probe(run, "pipeline"), "total_throughput")), None)
    probe = "resnet50" if workload == "resnet50" else "transformer"
    candidates = metric(ok_probe(run, probe), "throughput")
    chosen, source = None, probe
    if pipe is not None:
        same = [m for m in candidates if m.key.get("precision") == pipe.key["precision"]]
        sized = [m for m in same if m.key.get("image_size") == pipe.key.get("image_size")]
        chosen = max(sized or same, key=lambda m: m.value, default=None)
        if chosen is None and workload == "resnet50":
            chosen = next(iter(metric(ok_probe(run, "pipeline"), "compute_throughput")), None)
            source = "pipeline"
    if chosen is None:
        chosen, source = max(candidates, key=lambda m: m.value, default=None), probe
    measured_at = (chosen.key if chosen else pipe.key if pipe else {}).get("image_size")
    loader = max(metric(ok_probe(run, "dataloader"), "best_throughput"), key=lambda m: m.value,
                 default=None)
    judged = (loader.key.get("image_size") if loader and workload == "resnet50" else None) \
        or measured_at or 224
    batch = chosen.context.get("batch") or chosen.key.get("batch_size") if chosen else None
    return Setting(workload, device, devices, chosen.key.get("precision") if chosen else None,
                   int(judged), batch, chosen, mean_file_bytes,
                   "images/s" if workload == "resnet50" else "tokens/s",
                   compute_probe=source if chosen else None,
                   compute_image=int(measured_at) if measured_at else None)


def compute(run: RunResult, s: Setting) -> Capacity:
    resource = "gpu_compute" if s.device == "cuda" else "cpu_compute"
    m = s.compute_m
    probe = "resnet50" if s.workload == "resnet50" else "transformer"
    if m is None or s.per_device is None:
        return unknown(resource, why_missing(run, probe))
    where = counted(s.devices, "GPU") if s.device == "cuda" else "the CPU"
    detail = (f"{m.key.get('image_size')} px, batch {s.batch}" if s.workload == "resnet50"
              else f"{m.key.get('preset')}, {m.key.get('seq_len')} tokens, batch {s.batch}")
    if s.compute_probe == "pipeline":
        what = (f"the pipeline probe's synthetic-data step stands in for {probe}, because "
                f"{why_missing(run, probe)}: {s.precision} at {m.value:,.1f} {s.unit}")
        source = "pipeline compute_throughput"
    else:
        what = f"{probe} {s.precision} at {m.value:,.1f} {s.unit}"
        source = f"{probe} throughput"
    how = f"{what} per device on synthetic data ({detail})"
    if s.compute_scale != 1.0:
        how += (f", scaled to {s.image_size} px by pixel count (×{s.compute_scale:.3g}: "
                f"ResNet50's work grows with the pixels), the size the loader was measured at,"
                f" = {s.per_device:,.1f} {s.unit}")
    return Capacity(resource, s.per_device * s.devices, "measured", f"{how} × {where}",
                    source=source, spread=rel_spread(m.samples))


def data_loading(run: RunResult, s: Setting) -> Capacity:
    if s.workload != "resnet50":
        return not_applicable("cpu_dataloading", "token batches are slices of a memory-mapped "
                                                 "file: no decoding on the CPU")
    best = max(metric(ok_probe(run, "dataloader"), "best_throughput"), key=lambda m: m.value,
               default=None)
    if best is None:
        return unknown("cpu_dataloading", why_missing(run, "dataloader"))
    rounds = loader_alone(run, best.context.get("loader"), best.context.get("workers"))
    missed = best.context.get("not_measured") or {}
    floor = "; ".join(f"{loader_name(k)} not measured: {why}" for k, why in missed.items())
    return Capacity("cpu_dataloading", best.value, "measured",
                    f"the best loader, {best.context.get('loader')} with "
                    f"{best.context.get('workers')} workers, decodes and augments "
                    f"{best.value:,.0f} images/s at {best.key.get('image_size')} px from the "
                    "page cache" + (f"; at least this, since {floor}" if floor else ""),
                    source="dataloader best_throughput",
                    spread=rel_spread(rounds.samples) if rounds else None,
                    at_least=floor or None)


def loader_alone(run: RunResult, loader: Any, workers: Any) -> Measurement | None:
    """The dataloader probe's throughput for this loader and worker count (a sample per
    round of its workers)."""
    return next(iter(metric(ok_probe(run, "dataloader"), "throughput", loader=loader,
                            workers=workers)), None)


def cores_to_feed(run: RunResult, compute: float | None) -> tuple[float, Measurement] | None:
    """(cores, the per-core measurement): how many of the best loader's cores, at the rate
    per core this run measured, decode `compute` images/s; None where it was not measured."""
    per_core = max(metric(ok_probe(run, "dataloader"), "throughput_per_core"),
                   key=lambda m: m.value, default=None)
    if per_core is None or not compute or per_core.value <= 0:
        return None
    return compute / per_core.value, per_core


def _fits_in_ram(run: RunResult, dataset_bytes: float) -> tuple[bool, float | None]:
    host = run.environment.get("host") or {}
    ram = host.get("memory_available") or host.get("memory_total")
    return (ram is not None and dataset_bytes <= ram), ram


def storage(run: RunResult, s: Setting) -> Capacity:
    pr = ok_probe(run, "storage")
    if pr is None:
        return unknown("storage", why_missing(run, "storage"))
    if s.workload != "resnet50":
        seq = max(metric(pr, "read_bandwidth", job="seq1m"), key=lambda m: m.value, default=None)
        if seq is None:
            return unknown("storage", "the storage probe measured no sequential read")
        return Capacity("storage", seq.value / TOKEN_FILE_BYTES, "measured",
                        f"sequential 1 MiB reads at {seq.value / 1e9:.3g} GB/s ÷ "
                        f"{TOKEN_FILE_BYTES} B per token",
                        source="storage read_bandwidth (seq1m)")
    parts = []
    cold = next(iter(metric(pr, "dataset_read_rate", access="cold")), None)
    if cold is not None:
        parts.append((cold.value, f"the dataset reads {cold.value:,.0f} files/s cold",
                      "storage dataset_read_rate"))
    rand = max(metric(pr, "read_bandwidth", job="rand128k"), key=lambda m: m.value, default=None)
    if rand is not None:
        per_s = rand.value / s.mean_file_bytes
        parts.append((per_s, f"random 128 KiB reads (iodepth {rand.key.get('iodepth')} × "
                             f"{rand.key.get('numjobs')} jobs) at {rand.value / 1e9:.3g} GB/s "
                             f"÷ {s.mean_file_bytes:,.0f} B per image = {per_s:,.0f} images/s",
                      "storage read_bandwidth (rand128k)"))
    if not parts:
        return unknown("storage", "the storage probe measured neither the dataset's cold read "
                                  "rate nor random 128 KiB reads")
    value, _, source = min(parts)
    lead = "the lower of: " if len(parts) > 1 else ""
    return Capacity("storage", value, "measured", lead + "; ".join(t for _, t, _ in parts),
                    source=source)


def host_memory(run: RunResult, s: Setting) -> Capacity:
    """The page cache, once the whole training set sits in RAM after the first epoch."""
    bw = max(metric(ok_probe(run, "memory_bandwidth"), "copy_bandwidth", memory="host"),
             key=lambda m: m.value, default=None)
    if bw is None:
        return unknown("host_memory", why_missing(run, "memory_bandwidth"))
    # A copy moves each byte twice (read + write); serving a cached file reads it once.
    per_s = bw.value / 2 / s.mean_file_bytes
    return Capacity("host_memory", per_s, "measured",
                    f"host memory copies {bw.value / 1e9:.3g} GB/s (read + write), so the page "
                    f"cache serves about {per_s:,.0f} images/s of {s.mean_file_bytes:,.0f} B",
                    source="memory_bandwidth copy_bandwidth (host)")


def host_device_link(run: RunResult, s: Setting) -> Capacity:
    if s.device != "cuda":
        return not_applicable("host_device_link", "the CPU trains in host memory: no device "
                                                  "link to cross")
    pr = ok_probe(run, "host_device_copy")
    if pr is None:
        return unknown("host_device_link", why_missing(run, "host_device_copy"))
    agg = max(metric(pr, "aggregate_bandwidth", direction="h2d", memory="pinned"),
              key=lambda m: m.value, default=None)
    per = metric(pr, "peak_bandwidth", direction="h2d", memory="pinned")
    if agg is not None:
        rate = agg.value
        how = f"pinned H2D to all {s.devices} GPUs at once {agg.value / 1e9:.3g} GB/s"
    elif per:
        low = min(per, key=lambda m: m.value)
        rate = low.value * s.devices
        how = (f"pinned H2D {low.value / 1e9:.3g} GB/s on the slowest GPU × {s.devices} "
               "(all at once was not measured)")
    else:
        return unknown("host_device_link", "host_device_copy measured no pinned H2D copy")
    if s.workload == "resnet50":
        per_sample = FLOAT_PIXEL_BYTES * 3 * s.image_size**2
        what = f"{per_sample:,} B per float32 {s.image_size} px image"
    else:
        per_sample, what = TOKEN_SHIP_BYTES, f"{TOKEN_SHIP_BYTES} B per token"
    return Capacity("host_device_link", rate / per_sample, "measured", f"{how} ÷ {what}",
                    source="host_device_copy " + ("aggregate_bandwidth" if agg is not None
                                                  else "peak_bandwidth") + " (h2d, pinned)")


def interconnect(run: RunResult, s: Setting, compute_cap: Capacity) -> Capacity:
    ar = ok_probe(run, "allreduce")
    n = int(ar.params.get("world_size") or 1) if ar and s.device == "cuda" else s.devices
    if n <= 1:
        return not_applicable("interconnect", "one device: no gradients to exchange")
    if compute_cap.value is None or s.per_device is None or not s.batch:
        return unknown("interconnect", "the compute capacity is unknown")
    peak = next(iter(metric(ar, "peak_busbw")), None)
    if peak is None:
        return unknown("interconnect", why_missing(run, "allreduce"))
    params = RESNET50_PARAMS if s.workload == "resnet50" else int(
        (s.compute_m.context.get("n_params") if s.compute_m else 0) or 0)
    if not params:
        return unknown("interconnect", "the model's parameter count was not recorded")
    per_step = s.batch * (1 if s.workload == "resnet50" else int(
        s.compute_m.key.get("seq_len") or 1) if s.compute_m else 1)
    grad = params * GRAD_BYTES
    t_step = per_step / s.per_device
    t_comm = grad * 2 * (n - 1) / (n * peak.value)
    value = compute_cap.value * t_step / (t_step + t_comm)
    how = (f"compute × T / (T + G·2(n−1)/(n·busbw)) with T, the step's time, "
           f"{t_step * 1e3:.3g} ms, G {grad / 1e6:.1f} MB of fp32 gradients, n {n}, "
           f"busbw {peak.value / 1e9:.3g} GB/s: the all-reduce takes "
           f"{t_comm * 1e3:.3g} ms a step if none of it overlaps the backward pass")
    return Capacity("interconnect", value, "measured", how, source="allreduce peak_busbw")


@dataclass(frozen=True)
class CoresNeeded:
    """The cores that decode what this machine's GPUs train ResNet50 at."""

    cores: float  # at the rate per core this run measured
    per_core: Measurement  # the dataloader probe's best throughput_per_core
    compute: Capacity  # the GPUs' ResNet50 rate
    loader: Capacity  # what the machine's cores decoded, the best loader alone


def gpu_cores_needed(run: RunResult) -> CoresNeeded | None:
    """CoresNeeded on a GPU run that measured both the loader and ResNet50; None on a CPU run
    or where either is missing."""
    if str(run.config.get("device_resolved") or "cpu") != "cuda":
        return None
    s = setting(run, "resnet50", 1.0)
    c = compute(run, s)
    need = cores_to_feed(run, c.value)
    return CoresNeeded(need[0], need[1], c, data_loading(run, s)) if need is not None else None
