"""Live telemetry while a probe runs: CPU, disk, host memory and each GPU, sampled at ~10 Hz.

A background thread in the runner's parent process (which never imports torch) reads psutil
and, where NVML works, each GPU's utilisation, clocks, power, temperature and clock-event
(throttle) reasons. NVML is only queried, never set, and nvidia-smi is never run. Before a
probe's samples go into results.json they are downsampled to at most MAX_POINTS per series.
At the probe's start and end it also reads /proc/stat (CPU steal), the RAPL counters and each
GPU's NVML energy counter (telemetry_energy). Throttling, clock drops and steal above 2% are
flagged next to the probe, because they make its numbers wrong. The pure work on the series
(decoding, downsampling, the flags) is in telemetry_series.

Units are SI: s, Hz, W, degC, B, B/s, and ratios from 0 to 1 for utilisation. The shape of
run.extra["telemetry"], which the renderers read:

    {"interval_s": 0.1,
     "probes": {name: {"t": [...], "cpu_util": [...], "cpu_util_per_core": [[...], ...],
                       "disk_read_Bps": [...], "host_memory_used_B": [...],
                       "cpu_power_W": [...] (RAPL, the CPU packages, where readable),
                       "gpus": {"0": {"util", "mem_util", "sm_clock_Hz", "mem_clock_Hz",
                                      "power_W", "temp_degC", "throttle": [[names], ...]}},
                       "downsampled_by": 3, "samples": 123,
                       "steal_fraction": 0.041 or None, "steal_reason": None or "…",
                       "energy": {...}}},  # its shape: telemetry_energy's docstring
     "flags": {name: ["GPU 0 power-capped during 35% of the probe", ...]},
     "source": {"cpu": "psutil", "gpu": "NVML" or "skipped, because ...", "disks": [...]}}

GPUs are keyed by the run's cuda:N index (CUDA_VISIBLE_DEVICES may hide some of the machine's
GPUs; the hidden ones are not sampled), or by NVML's index where the run saw no GPU.

A series whose every reading failed is left out; a reading that failed once is null. Energy
and steal are the first round's, like the series.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchbench.core.timing import Clock
from benchbench.machine.energy import RaplZone, rapl_joules, read_rapl
from benchbench.machine.nvml import best_effort, handle_by_uuid
from benchbench.machine.steal import flag as steal_flag
from benchbench.machine.telemetry_energy import Mark, take_mark, usage
from benchbench.machine.telemetry_series import (
    MAX_POINTS,
    cpu_flags,
    decode_clock_events,
    downsample,
    downsample_factor,
    round_series,
    throttle_flags,
)

INTERVAL_S = 0.1
# stop() waits this long for a sample in flight (a slow NVML call), then returns without it.
STOP_WAIT_S = 0.2

# Block devices whose reads also land on another device (stacked) or on RAM: summing them
# would count a read twice.
_STACKED = ("loop", "dm-", "md", "zram", "ram")

# Decimal places kept per series in results.json (0 keeps a whole number).
_DIGITS = {"t": 3, "cpu_util": 3, "cpu_util_per_core": 2, "disk_read_Bps": 0,
           "host_memory_used_B": 0, "cpu_power_W": 2, "util": 3, "mem_util": 3, "sm_clock_Hz": 0,
           "mem_clock_Hz": 0, "power_W": 2, "temp_degC": 1}
_GPU_FIELDS = ("util", "mem_util", "sm_clock_Hz", "mem_clock_Hz", "power_W", "temp_degC",
               "throttle")


# --- the sampler -----------------------------------------------------------------------------

@dataclass
class ProbeTelemetry:
    """What one sampler saw during one probe, ready for store()."""

    series: dict[str, Any] | None  # downsampled; None when nothing could be sampled
    source: dict[str, Any]
    flags: list[str] = field(default_factory=list)  # from the raw samples
    interval_s: float = INTERVAL_S
    usage: dict[str, Any] | None = None  # steal_fraction, steal_reason, energy


class Sampler(Protocol):
    """Samples from start() to stop(); the runner builds a fresh one for every probe."""

    def start(self) -> None: ...
    def stop(self) -> ProbeTelemetry: ...


def is_whole_disk(name: str, sys_block: Path = Path("/sys/block")) -> bool:
    """A physical disk, not a partition (sysfs lists only whole disks under /sys/block) and
    not a device stacked on another one."""
    if name.startswith(_STACKED):
        return False
    return (sys_block / name).exists() if sys_block.is_dir() else True


class LiveSampler:
    """Samples psutil (`cpu`) and NVML (`nvml`, may be None) in a thread between start() and
    stop(). open(), sample() and close() are the same steps without the thread, for tests.

    The injected clock stamps the samples and gives the disk rates; the thread's pacing needs
    real time and uses time.monotonic."""

    def __init__(self, cpu: Any, nvml: Any = None, *, no_gpu_reason: str | None = None,
                 clock: Clock = time.monotonic, interval_s: float = INTERVAL_S,
                 max_points: int = MAX_POINTS,
                 whole_disk: Callable[[str], bool] = is_whole_disk,
                 uuids: list[str] | None = None, root: Path = Path("/")) -> None:
        self.cpu, self.nvml = cpu, nvml
        self.root = root  # where /proc/stat and /sys/class/powercap are read: a test's tree
        self._marks: list[Mark | None] = [None, None]  # the counters at start and at end
        # The run's GPUs in cuda:N order (CUDA_VISIBLE_DEVICES may hide some): only those are
        # sampled, each under its N. None samples every GPU NVML lists, under NVML's index.
        self.uuids = uuids
        self.clock, self.interval_s, self.max_points = clock, interval_s, max_points
        self.whole_disk = whole_disk
        self.source: dict[str, Any] = {
            "cpu": "psutil" if cpu is not None else "skipped, because psutil is unavailable",
            "gpu": ("skipped, because NVML was still starting when the probe ended"
                    if nvml is not None else f"skipped, because {no_gpu_reason or 'no NVML'}"),
        }
        self.records: list[dict[str, Any]] = []
        self._handles: dict[str, Any] = {}
        self._disks: dict[str, bool] = {}
        self._t0: float | None = None
        self._last: tuple[float, int | None] = (0.0, None)
        # RAPL at the last sample, for the CPU packages' power; None once it proved unreadable.
        self._rapl: tuple[float, dict[str, RaplZone]] | None = None
        self._rapl_readable = True
        self._nvml_open = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._loop_done = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: str | None = None

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> None:
        self._t0 = self.clock()
        # Daemonic: a sampler stuck in a driver call must never keep the process alive.
        self._thread = threading.Thread(target=self._run, name="benchbench-telemetry",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> ProbeTelemetry:
        self._stopping.set()
        if self._thread is not None:
            self._loop_done.wait(STOP_WAIT_S)  # NVML shutdown happens after, in the thread
        return self.result()

    def _run(self) -> None:
        try:
            self.open()
            due = time.monotonic()
            while True:
                due += self.interval_s
                now = time.monotonic()
                if due <= now:  # fell behind (a slow driver call): skip the missed ticks
                    due = now + self.interval_s
                if self._stopping.wait(due - now):
                    break
                self.sample()
        except Exception as exc:  # a bug here must cost the telemetry, never the probe
            self._failure = f"{type(exc).__name__}: {exc}"
        finally:
            self._mark(1)
            self._loop_done.set()
            self.close()

    # -- the steps ----------------------------------------------------------------------------

    def open(self) -> None:
        if self._t0 is None:
            self._t0 = self.clock()
        if self.cpu is not None:
            # cpu_percent measures from one call to the next: this call starts the first span.
            best_effort(lambda: self.cpu.cpu_percent(percpu=True))
            self._last = (self.clock(), best_effort(self._disk_read_total))
            self.source["disks"] = sorted(n for n, ok in self._disks.items() if ok)
        if self.nvml is not None:
            self._open_nvml()
        self._mark(0)

    def _mark(self, which: int) -> None:
        """The counters at the start (0) or the end (1), once each, while NVML is open."""
        if self._marks[which] is None and (which == 0 or self._marks[0] is not None):
            self._marks[which] = best_effort(lambda: take_mark(
                self.clock(), self.root, self.nvml, dict(self._handles)))

    def _open_nvml(self) -> None:
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            self.source["gpu"] = f"skipped, because NVML is unavailable: {exc}"
            return
        with self._lock:
            self._nvml_open = True
        self._sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        self._mem = getattr(nvml, "NVML_CLOCK_MEM", 2)
        self._temp = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        # newer pynvml calls them clocks event reasons; older ones know only throttle reasons
        self._events = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                        or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        count = best_effort(nvml.nvmlDeviceGetCount)
        if self.uuids is not None:
            for i, uuid in enumerate(self.uuids):
                h = handle_by_uuid(nvml, uuid)
                if h is not None:
                    self._handles[str(i)] = h
        else:
            for i in range(count or 0):
                h = best_effort(lambda i=i: nvml.nvmlDeviceGetHandleByIndex(i))
                if h is not None:
                    self._handles[str(i)] = h
        self.source["gpu"] = ("NVML" if self._handles else
                              "skipped, because NVML reports no GPU" if count == 0 else
                              "skipped, because NVML could not list the GPUs")

    def close(self) -> None:
        self._mark(1)
        with self._lock:
            if self._nvml_open:
                self._nvml_open = False
                best_effort(self.nvml.nvmlShutdown)

    def _disk_read_total(self) -> int | None:
        per_disk = self.cpu.disk_io_counters(perdisk=True) or {}
        for name in per_disk:
            if name not in self._disks:
                self._disks[name] = self.whole_disk(name)
        got = [c.read_bytes for n, c in per_disk.items() if self._disks[n]]
        return sum(got) if got else None

    def sample(self) -> None:
        """One reading of every source; a failing reading is None, never an exception."""
        t = self.clock()
        rec: dict[str, Any] = {"t": t - (t if self._t0 is None else self._t0)}
        if self.cpu is not None:
            cores = best_effort(lambda: [p / 100 for p in self.cpu.cpu_percent(percpu=True)])
            rec["cpu_util_per_core"] = cores
            rec["cpu_util"] = sum(cores) / len(cores) if cores else None
            read = best_effort(self._disk_read_total)
            last_t, last_read = self._last
            rec["disk_read_Bps"] = (
                (read - last_read) / (t - last_t)
                if read is not None and last_read is not None and t > last_t
                and read >= last_read else None)
            self._last = (t, read)
            vm = best_effort(self.cpu.virtual_memory)
            # total - available, not psutil's `used`: page cache that can be dropped is free.
            rec["host_memory_used_B"] = vm.total - vm.available if vm is not None else None
        rec["cpu_power_W"] = self._cpu_power(t)
        rec["gpus"] = {i: self._gpu_sample(h) for i, h in list(self._handles.items())}
        self.records.append(rec)

    def _cpu_power(self, t: float) -> float | None:
        """The CPU packages' mean W since the last sample, from RAPL; None where it cannot
        be read (then it is not tried again) and on the first sample."""
        if not self._rapl_readable:
            return None
        zones = best_effort(lambda: read_rapl(self.root))
        if zones is None:
            self._rapl_readable = False
            return None
        last, self._rapl = self._rapl, (t, zones)
        if last is None or t <= last[0]:
            return None
        joules = rapl_joules(last[1], zones)
        return None if joules is None else joules / (t - last[0])

    def _gpu_sample(self, h: Any) -> dict[str, Any]:
        nvml = self.nvml
        rates = best_effort(lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        sm = best_effort(lambda: nvml.nvmlDeviceGetClockInfo(h, self._sm))
        mem = best_effort(lambda: nvml.nvmlDeviceGetClockInfo(h, self._mem))
        power = best_effort(lambda: nvml.nvmlDeviceGetPowerUsage(h))
        temp = best_effort(lambda: nvml.nvmlDeviceGetTemperature(h, self._temp))
        events = self._events
        mask = best_effort(lambda: events(h)) if events else None
        return {
            "util": None if rates is None else rates.gpu / 100,
            "mem_util": None if rates is None else rates.memory / 100,
            "sm_clock_Hz": None if sm is None else sm * 1e6,  # NVML answers in MHz
            "mem_clock_Hz": None if mem is None else mem * 1e6,
            "power_W": None if power is None else power / 1000,  # NVML answers in mW
            "temp_degC": None if temp is None else float(temp),
            "throttle": None if mask is None else decode_clock_events(mask),
        }

    # -- the result ---------------------------------------------------------------------------

    def raw_series(self) -> dict[str, Any]:
        """Every sample, column by column, in the stored shape (downsampled_by 1)."""
        recs = list(self.records)  # the thread may still append: work on a copy
        out: dict[str, Any] = {"t": [r["t"] for r in recs]}
        for key in ("cpu_util", "cpu_util_per_core", "disk_read_Bps", "host_memory_used_B",
                    "cpu_power_W"):
            column = [r.get(key) for r in recs]
            if any(v is not None for v in column):
                out[key] = column
        gpus: dict[str, Any] = {}
        for i in sorted({i for r in recs for i in r["gpus"]}, key=int):
            cols = {f: [r["gpus"].get(i, {}).get(f) for r in recs] for f in _GPU_FIELDS}
            cols = {f: c for f, c in cols.items() if any(v is not None for v in c)}
            if cols:
                gpus[i] = cols
        out["gpus"] = gpus
        out["downsampled_by"], out["samples"] = 1, len(recs)
        return out

    def result(self) -> ProbeTelemetry:
        raw = self.raw_series()
        factor = downsample_factor(raw["samples"], self.max_points)

        def shrink(key: str, values: list[Any]) -> list[Any]:
            if key == "throttle":
                return downsample(values, factor, flags=True)
            return round_series(downsample(values, factor), _DIGITS[key])

        series: dict[str, Any] = {k: shrink(k, v) for k, v in raw.items()
                                  if isinstance(v, list)}
        series["gpus"] = {i: {f: shrink(f, c) for f, c in cols.items()}
                          for i, cols in raw["gpus"].items()}
        series["downsampled_by"], series["samples"] = factor, raw["samples"]
        # Where `t` starts on the clock (time.monotonic unless injected): a probe that stamps
        # its own samples on that clock lines them up with these (analysis/stability.py).
        series["t0_monotonic"] = self._t0
        source = dict(self.source)
        if self._failure:
            source["error"] = f"sampling stopped early: {self._failure}"
        used = best_effort(lambda: usage(self._marks[0], self._marks[1], raw,
                                         str(self.source.get("gpu"))))
        return ProbeTelemetry(series, source, throttle_flags(raw), self.interval_s, used)


def default_sampler(uuids: list[str] | None = None) -> LiveSampler:
    """The real sampler: psutil always, NVML where nvidia-ml-py is installed, for the GPUs
    with these UUIDs (the run's, in cuda:N order) or every GPU. Both libraries are imported
    here, so importing this module (as the runner does) needs neither."""
    import psutil

    if importlib.util.find_spec("pynvml") is None:
        return LiveSampler(psutil, None, no_gpu_reason="nvidia-ml-py is not installed")
    import pynvml

    return LiveSampler(psutil, pynvml, uuids=uuids)


# --- the runner's side -----------------------------------------------------------------------

def _skipped(why: str) -> ProbeTelemetry:
    reason = f"skipped, because the sampler failed: {why}"
    return ProbeTelemetry(None, {"cpu": reason, "gpu": reason})


class Guarded:
    """Builds and runs one probe's sampler so that no error of its reaches the runner."""

    def __init__(self, factory: Callable[[], Sampler]) -> None:
        self.factory = factory
        self.sampler: Sampler | None = None
        self.error: str | None = None

    def start(self) -> None:
        try:
            self.sampler = self.factory()
            self.sampler.start()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> ProbeTelemetry:
        if self.sampler is None or self.error:
            return _skipped(self.error or "it was never started")
        try:
            return self.sampler.stop()
        except Exception as exc:
            return _skipped(f"{type(exc).__name__}: {exc}")


def store(extra: dict[str, Any], name: str, got: ProbeTelemetry,
          resource: str | None = None, round_no: int = 1) -> None:
    """Put one probe's telemetry and flags into run.extra["telemetry"]. The run-wide source
    is the first probe's; a probe whose source differs carries its own. A later round adds
    its flags (marked with the round), and its series goes under "rounds" as "NAME (round N)",
    so that the run's telemetry spans every round while "probes" keeps one entry a probe (the
    energy and fleet analyses read the first round's there)."""
    try:
        tel = extra.setdefault("telemetry", {"interval_s": got.interval_s, "probes": {},
                                             "flags": {}, "source": got.source})
        flags = list(got.flags)
        if got.series is not None:
            series = got.series
            if got.source != tel["source"]:
                series = {**series, "source": got.source}
            if round_no == 1:
                tel["probes"][name] = {**series, **(got.usage or {})}
            else:
                tel.setdefault("rounds", {})[f"{name} (round {round_no})"] = series
            flags += cpu_flags(series, resource)
        stolen = steal_flag(name, (got.usage or {}).get("steal_fraction"))
        if stolen:
            flags.append(stolen)
        if round_no > 1:
            flags = [f"round {round_no}: {f}" for f in flags]
        if flags:
            tel["flags"][name] = [*tel["flags"].get(name, []), *flags]
    except Exception as exc:  # telemetry is an extra: it never costs a probe its result
        extra.setdefault("telemetry", {}).setdefault("source", {})["error"] = (
            f"storing {name}'s telemetry failed: {type(exc).__name__}: {exc}")
