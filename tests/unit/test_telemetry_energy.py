"""Steal and energy per probe: the sampler's counters at start and end on recorded /proc/stat
and powercap trees and replayed NVML energy counters, the power-integration fallback, the
reasons when nothing can be read, and store() putting them beside the series with the flag."""

from pathlib import Path

import pytest
from fake_nvml import FakeNvml, NVMLError_NotSupported, _gpu
from machines import build

from benchbench.machine import telemetry_energy
from benchbench.machine.telemetry import LiveSampler, ProbeTelemetry, store

PROC_STAT = Path(__file__).parents[1] / "support" / "fixtures" / "proc_stat"
PC = "sys/class/powercap/intel-rapl:0"
# A VM whose neighbours took CPU time: 10 fields, steal 40 -> 80 of 940 jiffies passing.
STAT = ("cpu  1000 10 500 8000 100 0 50 40 300 0\n", "cpu  1500 10 600 8300 100 0 50 80 700 0\n")


class PowerNvml(FakeNvml):
    """The recorded H100 pair, with a power reading per sample from each GPU's "power_mW"."""

    def nvmlDeviceGetPowerUsage(self, h):
        if h.get("power_mW") is None:
            raise NVMLError_NotSupported("Not Supported")
        return h["power_mW"]


def host(root, stat, energy_uj=None):
    files = {"proc/stat": stat}
    if energy_uj is not None:
        files.update({f"{PC}/name": "package-0\n", f"{PC}/energy_uj": f"{energy_uj}\n",
                      f"{PC}/max_energy_range_uj": "262143328850\n"})
    return build(root, files)


def sample_probe(tmp_path, clock, nvml, n=3, rapl=(5_000_000, 35_000_000), stat=STAT):
    """open(), n samples 0.1 s apart, the host's counters move, close(): as the thread does."""
    root = host(tmp_path, stat[0], rapl and rapl[0])
    sampler = LiveSampler(None, nvml, clock=clock, root=root)
    sampler.open()
    for _ in range(n):
        clock.advance(0.1)
        sampler.sample()
    host(tmp_path, stat[1], rapl and rapl[1])
    sampler.close()
    return sampler.result()


def test_counters_give_joules_steal_and_the_seconds(tmp_path, clock):
    nvml = FakeNvml(gpus=[_gpu(energy_mJ=[1_000_000, 1_195_000]),
                          _gpu(uuid="GPU-b", energy_mJ=[50_000, 72_500])])
    got = sample_probe(tmp_path, clock, nvml)
    assert got.usage["steal_fraction"] == pytest.approx(40 / 940, abs=1e-5)
    assert got.usage["steal_reason"] is None
    assert got.usage["energy"] == {
        "gpu_J": {"0": 195.0, "1": 22.5}, "gpu_seconds": {"0": 0.3, "1": 0.3},
        "gpu_source": "NVML energy counter", "cpu_J": 30.0, "cpu_source": "RAPL",
        "seconds": 0.3}
    assert nvml.energy_reads == {"GPU-11111111-2222-3333-4444-555555555555": 2, "GPU-b": 2}
    assert all(n.startswith(("nvmlInit", "nvmlShutdown", "nvmlDeviceGet", "NVML_"))
               for n in nvml.looked_up)


def test_without_the_counter_the_power_samples_are_integrated(tmp_path, clock):
    # GPU 0 has no counter (before Volta) but reads 300 W; GPU 1 has neither
    nvml = PowerNvml(gpus=[_gpu(power_mW=300_000), _gpu(uuid="GPU-b")])
    got = sample_probe(tmp_path, clock, nvml, n=4, rapl=None)
    energy = got.usage["energy"]
    # 4 samples, 0.1 s apart: 0.3 s covered at 300 W (the first 0.1 s had no sample yet)
    assert energy["gpu_J"] == {"0": pytest.approx(90.0)}
    assert energy["gpu_seconds"] == {"0": pytest.approx(0.3)}
    assert energy["gpu_source"] == ("power samples integrated; GPU 1 not measured (no "
                                    "counter, no power reading)")
    assert energy["cpu_J"] is None
    assert energy["cpu_source"].startswith("not measurable here: /sys/class/powercap has no "
                                           "RAPL zone")


def test_mixed_sources_name_each_gpu():
    start = telemetry_energy.Mark(0.0, None, None, "no RAPL", {"0": 1_000, "1": None})
    end = telemetry_energy.Mark(2.0, None, None, "no RAPL", {"0": 401_000, "1": None})
    raw = {"t": [0.0, 1.0, 2.0], "gpus": {"1": {"power_W": [100.0, 100.0, None]}}}
    got = telemetry_energy.usage(start, end, raw, "NVML")["energy"]
    assert got["gpu_J"] == {"0": 400.0, "1": 100.0}
    assert got["gpu_seconds"] == {"0": 2.0, "1": 1.0}
    assert got["gpu_source"] == ("NVML energy counter for GPU 0; power samples integrated "
                                 "for GPU 1")


def test_a_cpu_box_says_why_each_part_is_missing(tmp_path, clock):
    got = sample_probe(tmp_path, clock, None, rapl=None,
                       stat=("cpu  2255 34 2290 22625563 6290 127 456\n",) * 2)
    assert got.usage["steal_fraction"] is None
    assert "no steal column" in got.usage["steal_reason"]
    assert got.usage["energy"]["gpu_source"] == "skipped, because no NVML"
    assert got.usage["energy"]["gpu_J"] == {}


def test_recorded_firecracker_pair_reads_zero_steal(tmp_path, clock):
    stat = tuple((PROC_STAT / f"proc_stat_firecracker_{n}.txt").read_text()
                 for n in ("before", "after"))
    got = sample_probe(tmp_path, clock, None, rapl=None, stat=stat)
    assert got.usage["steal_fraction"] == 0.0


def test_no_end_reading_gives_reasons_not_numbers():
    start = telemetry_energy.Mark(0.0, None, None, None, {})
    got = telemetry_energy.usage(start, None, {"t": [], "gpus": {}}, "NVML")
    assert got["steal_fraction"] is None
    assert got["energy"]["gpu_source"] == ("skipped, because the sampler was still in a driver "
                                           "call when the probe ended")
    assert got["energy"]["cpu_source"].startswith("not measurable here: ")
    assert got["energy"]["seconds"] is None


def test_the_thread_reads_the_counters_at_start_and_stop(tmp_path):
    import time

    nvml = FakeNvml(gpus=[_gpu(energy_mJ=[0, 1_000, 2_000])])
    sampler = LiveSampler(None, nvml, interval_s=0.01, root=host(tmp_path, STAT[0]))
    sampler.start()
    time.sleep(0.05)
    got = sampler.stop()
    sampler._thread.join(2)
    assert got.usage["energy"]["gpu_J"] == {"0": 1.0}  # two readings: start and stop
    assert got.usage["energy"]["seconds"] > 0
    assert nvml.calls == ["shutdown"]


SERIES = {"t": [0.1], "gpus": {}, "downsampled_by": 1, "samples": 1}
USAGE = {"steal_fraction": 0.041, "steal_reason": None,
         "energy": {"gpu_J": {}, "gpu_seconds": {}, "gpu_source": "skipped, because no NVML",
                    "cpu_J": 12.0, "cpu_source": "RAPL", "seconds": 3.0}}


def test_store_puts_steal_and_energy_beside_the_series_and_flags_steal():
    extra = {}
    source = {"cpu": "psutil", "gpu": "skipped, because no NVML"}
    store(extra, "dataloader", ProbeTelemetry(dict(SERIES), source, [], usage=USAGE))
    tel = extra["telemetry"]
    assert tel["probes"]["dataloader"] == {**SERIES, **USAGE}
    assert tel["flags"]["dataloader"] == [
        "another tenant took 4.1% of this VM's CPU time while dataloader ran"]
    later = {**USAGE, "steal_fraction": 0.01, "energy": {**USAGE["energy"], "cpu_J": 99.0}}
    store(extra, "dataloader", ProbeTelemetry(dict(SERIES), source, [], usage=later), None, 2)
    assert tel["probes"]["dataloader"]["energy"]["cpu_J"] == 12.0  # the first round's
    assert len(tel["flags"]["dataloader"]) == 1  # 1% is under the flag
    store(extra, "dataloader", ProbeTelemetry(dict(SERIES), source, [], usage=USAGE), None, 3)
    assert tel["flags"]["dataloader"][-1] == (
        "round 3: another tenant took 4.1% of this VM's CPU time while dataloader ran")


def test_store_without_usage_keeps_the_series_as_it_was():
    extra = {}
    store(extra, "matmul", ProbeTelemetry(dict(SERIES), {"cpu": "psutil"}, []))
    assert extra["telemetry"]["probes"]["matmul"] == SERIES
    assert extra["telemetry"]["flags"] == {}


def test_the_series_carry_the_cpu_packages_power_from_rapl(tmp_path, clock):
    """One RAPL reading a sample: the W between two samples, so that energy over a probe's
    timed steps alone can be integrated (analysis/energy.py)."""
    root = host(tmp_path, STAT[0], 1_000_000)
    sampler = LiveSampler(None, None, clock=clock, root=root)
    sampler.open()
    for k in range(1, 5):
        clock.advance(0.1)
        host(tmp_path, STAT[0], 1_000_000 + k * 12_000_000)  # 12 J a tenth: 120 W
        sampler.sample()
    series = sampler.raw_series()
    assert series["cpu_power_W"][0] is None  # nothing to difference yet
    assert series["cpu_power_W"][1:] == [pytest.approx(120.0)] * 3
    # No RAPL here: the series is left out, and RAPL is not read again at every sample.
    bare = LiveSampler(None, None, clock=clock, root=build(tmp_path / "bare", {"proc/stat": ""}))
    bare.open()
    bare.sample()
    bare.sample()
    assert "cpu_power_W" not in bare.raw_series() and not bare._rapl_readable
