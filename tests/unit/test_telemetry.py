"""Live telemetry: throttle decoding, downsampling, flags, the sampler on replayed psutil and
NVML answers, its stop latency, and the runner storing one series per probe that ran."""

import json
import re
import threading
import time
from types import SimpleNamespace

import pytest
from fake_nvml import GPUS, FakeNvml, NVMLError_NotSupported

from benchbench.core import results
from benchbench.core.config import RunConfig
from benchbench.engine.catalog import default_registry
from benchbench.engine.isolation import Cancelled, Outcome
from benchbench.engine.runner import EXIT_INTERRUPTED, EXIT_OK, Runner
from benchbench.machine import telemetry
from benchbench.machine.telemetry import Guarded, LiveSampler, ProbeTelemetry
from benchbench.machine.telemetry_series import (
    cpu_flags,
    decode_clock_events,
    downsample,
    downsample_factor,
    throttle_flags,
)

GiB = 1 << 30


# --- fakes -----------------------------------------------------------------------------------

def _at(tape, i):
    return tape[min(i, len(tape) - 1)]  # past its end, a tape repeats its last answer


class ReplayPsutil:
    """psutil's answers replayed in order, one per call; the sampler's first call primes."""

    def __init__(self, cpu=([0, 0], [50, 100]), disks=({"vda": 0},), used=4 * GiB):
        self.cpu, self.disks, self.used = list(cpu), list(disks), used
        self.n = {"cpu": 0, "disk": 0}

    def cpu_percent(self, percpu=False):
        assert percpu
        self.n["cpu"] += 1
        return _at(self.cpu, self.n["cpu"] - 1)

    def disk_io_counters(self, perdisk=False):
        assert perdisk
        self.n["disk"] += 1
        return {name: SimpleNamespace(read_bytes=b)
                for name, b in _at(self.disks, self.n["disk"] - 1).items()}

    def virtual_memory(self):
        return SimpleNamespace(total=64 * GiB, available=64 * GiB - self.used)


class BrokenPsutil:
    def __getattr__(self, name):
        def fail(*a, **kw):
            raise OSError("/proc is not mounted")
        return fail


def reading(util=90, mem_util=40, sm=1980, mem=2619, power=650_000, temp=60, mask=0x0):
    """One GPU's answers for one sample; an exception in a field is raised by that query."""
    return dict(util=util, mem_util=mem_util, sm=sm, mem=mem, power=power, temp=temp, mask=mask)


class TelemetryNvml(FakeNvml):
    """The recorded H100 pair, answering the sampler's queries from a tape: tape[tick][gpu]."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, tape, block=None, **kw):
        super().__init__(**kw)
        self.tape, self.tick, self.block = tape, 0, block

    def _now(self, h, key):
        value = _at(self.tape, self.tick)[self.gpus.index(h)][key]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._now(h, "util"), memory=self._now(h, "mem_util"))

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self._now(h, "sm" if kind == self.NVML_CLOCK_SM else "mem")

    def nvmlDeviceGetPowerUsage(self, h):
        if self.block is not None:
            self.block.wait()  # a driver call that hangs
        return self._now(h, "power")

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._now(h, "temp")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._now(h, "mask")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._now(h, "mask")


def run_samples(sampler, clock, n, nvml=None):
    sampler.open()
    for k in range(n):
        clock.advance(0.1)
        if nvml is not None:
            nvml.tick = k
        sampler.sample()
    sampler.close()
    return sampler.result()


# --- decoding, downsampling, flags -----------------------------------------------------------

def test_clock_event_bitmasks_decode_to_real_reasons_only():
    assert decode_clock_events(0x0) == []
    assert decode_clock_events(0x1) == []  # GpuIdle: nothing to run
    assert decode_clock_events(0x1 | 0x2 | 0x100) == []  # configured clocks are no throttling
    assert decode_clock_events(0x4) == ["power cap"]
    assert decode_clock_events(0x1 | 0x4 | 0x20) == ["power cap", "sw thermal slowdown"]
    assert decode_clock_events(0x8) == ["hw slowdown"]
    assert decode_clock_events(0x8 | 0x40) == ["hw thermal slowdown"]  # the specific one
    assert decode_clock_events(0x8 | 0x80) == ["hw power brake"]
    assert decode_clock_events(0x10 | 0x200) == ["sync boost", "board limit"]
    assert decode_clock_events(0x800) == ["reason 0x800"]  # newer than this table: kept


def test_downsample_means_buckets_and_unions_flags():
    assert downsample(list(range(10)), 3) == [1, 4, 7, 9]
    assert downsample([None, None, 2, None, None, None], 3) == [2, None]
    assert downsample([[0.0, 1.0], [1.0, 0.0], None], 3) == [[0.5, 0.5]]
    assert downsample([[], ["hw slowdown"], ["power cap"], [], None, []], 3, flags=True) == [
        ["power cap", "hw slowdown"], []]
    assert downsample([None, None], 2, flags=True) == [None]
    assert downsample([1, 2, 3], 1) == [1, 2, 3]


@pytest.mark.parametrize("n", [0, 1, 299, 300, 301, 599, 600, 601, 1000, 9001])
def test_downsampled_length_stays_within_bounds(n):
    factor = downsample_factor(n, 300)
    out = downsample(list(range(n)), factor)
    assert len(out) <= 300
    assert len(out) == (n + factor - 1) // factor
    assert factor == 1 if n <= 300 else len(out) > 150  # no needless coarsening


def _gpu(util, sm, throttle):
    return {"util": util, "sm_clock_Hz": sm, "throttle": throttle}


def test_throttle_and_clock_drop_flags_carry_their_numbers():
    n = 40
    throttle = [[] for _ in range(n)]
    for i in range(14):
        throttle[i] = ["power cap"]  # 35%
    throttle[20] = throttle[21] = ["hw thermal slowdown"]  # 5%: just enough
    throttle[30] = ["sync boost"]  # 2.5%: a blip
    throttle[31] = None  # unreadable once: not counted either way
    sm = [1980e6] * n
    util = [0.9] * n
    for i in (5, 6, 7, 8):
        sm[i] = 1227.6e6  # 62% of 1980 MHz while busy
    sm[39], util[39] = 345e6, 0.0  # idle and clocked down on purpose: not a drop
    flags = throttle_flags({"gpus": {"0": _gpu(util, sm, throttle)}})
    assert flags == [
        "GPU 0 power-capped during 36% of the probe",  # 14 of the 39 readable samples
        "GPU 0 clocks limited by hw thermal slowdown during 5% of the probe",
        "GPU 0 SM clock fell to 62% of its busy median of 1980 MHz in this probe, and stayed "
        "under 90% of it in 10% of the busy samples",
    ]


def test_no_flags_for_an_idle_gpu_a_steady_one_or_a_cpu_box():
    idle = _gpu([0.0] * 10, [345e6] * 9 + [1980e6], [[]] * 10)
    steady = _gpu([0.95] * 10, [1980e6] * 9 + [1900e6], [[]] * 10)
    assert throttle_flags({"gpus": {"0": idle, "1": steady}}) == []
    cpu_box = {"t": [0.1, 0.2], "cpu_util": [0.2, 0.3], "gpus": {}}
    assert throttle_flags(cpu_box) == []
    assert throttle_flags({}) == []


def test_cpu_pegged_is_flagged_only_for_probes_not_meant_to_load_it():
    probe = {"cpu_util": [0.97, 0.99], "cpu_util_per_core": [[0.96, 0.98], [1.0, 0.98]]}
    assert cpu_flags(probe, "gpu_compute") == [
        "CPU utilisation averaged 98% over all 2 cores during this probe"]
    assert cpu_flags(probe, "cpu_compute") == []
    assert cpu_flags({"cpu_util": [0.9, 0.95]}, "gpu_compute") == []
    assert cpu_flags({}, "storage") == []


# --- the sampler on replayed answers ---------------------------------------------------------

def _h100_tape():
    no_temp = NVMLError_NotSupported("Not Supported")
    idle = dict(util=0, mem_util=0, sm=345, mem=405, power=75_000, temp=no_temp, mask=0x1)
    return [
        [reading(mask=0x4), idle],
        [reading(mask=0x1), {**idle, "power": NVMLError_NotSupported("Not Supported")}],
        [reading(mask=0x8 | 0x40), idle],
    ]


def test_sampler_records_the_documented_shape(clock):
    ps = ReplayPsutil(
        cpu=[[0, 0], [50, 100], [20, 40], [100, 100]],
        # a partition and a device-mapper volume stacked on the disk also read: not counted
        disks=[{"nvme0n1": k * 10**6 + 1000, "nvme0n1p1": k * 10**6, "dm-0": k * 10**6}
               for k in range(4)])
    nvml = TelemetryNvml(_h100_tape())
    sampler = LiveSampler(ps, nvml, clock=clock, whole_disk=lambda name: name == "nvme0n1")
    got = run_samples(sampler, clock, 3, nvml)
    idle = {"util": [0.0] * 3, "mem_util": [0.0] * 3, "sm_clock_Hz": [345_000_000] * 3,
            "mem_clock_Hz": [405_000_000] * 3, "power_W": [75.0, None, 75.0],
            "throttle": [[], [], []]}  # no temp_degC: the query is unsupported on this GPU
    assert got.series == {
        "t": [0.1, 0.2, 0.3],
        "cpu_util": [0.75, 0.3, 1.0],
        "cpu_util_per_core": [[0.5, 1.0], [0.2, 0.4], [1.0, 1.0]],
        "disk_read_Bps": [10_000_000] * 3,
        "host_memory_used_B": [4 * GiB] * 3,
        "gpus": {
            "0": {"util": [0.9] * 3, "mem_util": [0.4] * 3,
                  "sm_clock_Hz": [1_980_000_000] * 3, "mem_clock_Hz": [2_619_000_000] * 3,
                  "power_W": [650.0] * 3, "temp_degC": [60.0] * 3,
                  "throttle": [["power cap"], [], ["hw thermal slowdown"]]},
            "1": idle,
        },
        "downsampled_by": 1,
        "samples": 3,
        "t0_monotonic": 100.0,  # where `t` starts on the sampler's clock
    }
    assert got.source == {"cpu": "psutil", "gpu": "NVML", "disks": ["nvme0n1"]}
    assert got.flags == ["GPU 0 power-capped during 33% of the probe",
                         "GPU 0 clocks limited by hw thermal slowdown during 33% of the probe"]
    assert got.interval_s == 0.1
    json.dumps(got.series)  # it goes into results.json as it is
    assert nvml.calls == ["shutdown"]
    # only queries: no setter, and the event query is the one this pynvml has
    assert all(n.startswith(("nvmlInit", "nvmlShutdown", "nvmlDeviceGet", "NVML_"))
               for n in nvml.looked_up)
    assert "nvmlDeviceGetCurrentClocksEventReasons" in nvml.looked_up


def test_older_pynvml_is_asked_for_throttle_reasons(clock):
    nvml = TelemetryNvml(_h100_tape(), missing=("nvmlDeviceGetCurrentClocksEventReasons",))
    got = run_samples(LiveSampler(ReplayPsutil(), nvml, clock=clock), clock, 1, nvml)
    assert got.series["gpus"]["0"]["throttle"] == [["power cap"]]


def test_a_long_probe_is_downsampled_but_flagged_from_every_sample(clock):
    # power-capped in 30 of 1000 samples (3%, below the flag), one per bucket of 4 samples
    tape = [[reading(power=700_000 if k % 33 == 0 and k < 990 else 600_000,
                     mask=0x4 if k % 33 == 0 and k < 990 else 0x0)] for k in range(1000)]
    nvml = TelemetryNvml(tape, gpus=GPUS[:1])
    got = run_samples(LiveSampler(ReplayPsutil(), nvml, clock=clock), clock, 1000, nvml)
    s = got.series
    assert (s["samples"], s["downsampled_by"], len(s["t"])) == (1000, 4, 250)
    g = s["gpus"]["0"]
    assert len(g["power_W"]) == len(g["throttle"]) == len(s["cpu_util_per_core"]) == 250
    assert s["t"][:2] == [0.25, 0.65]  # the bucket's mean time
    assert g["power_W"][0] == 625.0  # mean of 700, 600, 600, 600
    assert g["throttle"][0] == ["power cap"]  # the bucket's union keeps the event visible
    assert sum(bool(x) for x in g["throttle"]) == 30
    assert got.flags == []  # 3% of the raw samples, though 12% of the stored points


def test_failed_nvml_init_skips_the_gpu_part_only(clock):
    nvml = TelemetryNvml([], fail_init=RuntimeError("NVML Shared Library Not Found"))
    got = run_samples(LiveSampler(ReplayPsutil(), nvml, clock=clock), clock, 2)
    assert got.source["gpu"] == "skipped, because NVML is unavailable: NVML Shared Library " \
                                "Not Found"
    assert got.source["cpu"] == "psutil"
    assert got.series["gpus"] == {}
    assert got.series["cpu_util"] == [0.75, 0.75]
    assert nvml.calls == []  # nothing to shut down
    assert got.flags == []


def test_without_pynvml_the_default_sampler_says_why(monkeypatch):
    monkeypatch.setattr(telemetry.importlib.util, "find_spec", lambda name: None)
    sampler = telemetry.default_sampler()
    assert sampler.nvml is None
    assert sampler.source["gpu"] == "skipped, because nvidia-ml-py is not installed"


def test_failing_psutil_calls_drop_their_series(clock):
    clock.now = 0.0  # a clock may start at zero: times still count from the start
    got = run_samples(LiveSampler(BrokenPsutil(), None, clock=clock), clock, 2)
    assert got.series == {"t": [0.1, 0.2], "gpus": {}, "downsampled_by": 1, "samples": 2,
                          "t0_monotonic": 0.0}


def test_whole_disks_are_those_sysfs_lists(tmp_path):
    for name in ("nvme0n1", "sda", "dm-0", "loop0", "md0"):
        (tmp_path / name).mkdir()
    assert telemetry.is_whole_disk("nvme0n1", tmp_path)
    assert telemetry.is_whole_disk("sda", tmp_path)
    assert not telemetry.is_whole_disk("nvme0n1p1", tmp_path)  # a partition
    assert not telemetry.is_whole_disk("dm-0", tmp_path)  # stacked on a disk
    assert not telemetry.is_whole_disk("loop0", tmp_path)
    assert not telemetry.is_whole_disk("md0", tmp_path)


# --- the thread ------------------------------------------------------------------------------

def test_sampler_thread_samples_and_stops_promptly():
    nvml = TelemetryNvml([[reading(), reading()]])
    sampler = LiveSampler(ReplayPsutil(), nvml)
    sampler.start()
    time.sleep(0.45)
    t0 = time.perf_counter()
    got = sampler.stop()
    assert time.perf_counter() - t0 < 0.2
    assert 2 <= got.series["samples"] <= 6
    assert all(0 < t < 1 for t in got.series["t"])
    assert got.series["gpus"]["0"]["power_W"][0] == 650.0
    sampler._thread.join(2)
    assert not sampler._thread.is_alive() and nvml.calls == ["shutdown"]


def test_a_hung_driver_call_does_not_hold_up_stop():
    release = threading.Event()
    nvml = TelemetryNvml([[reading(), reading()]], block=release)
    sampler = LiveSampler(ReplayPsutil(), nvml)
    sampler.start()
    time.sleep(0.25)  # the first sample is now stuck in nvmlDeviceGetPowerUsage
    t0 = time.perf_counter()
    got = sampler.stop()
    assert time.perf_counter() - t0 < telemetry.STOP_WAIT_S + 0.1
    assert got.series["samples"] == 0 and got.source["gpu"] == "NVML"
    release.set()
    sampler._thread.join(2)
    assert not sampler._thread.is_alive() and nvml.calls == ["shutdown"]


def test_guarded_turns_any_sampler_failure_into_a_reason():
    def broken_factory():
        raise ImportError("no psutil")

    g = Guarded(broken_factory)
    g.start()
    got = g.stop()
    assert got.series is None
    assert got.source["cpu"] == "skipped, because the sampler failed: ImportError: no psutil"

    class StopFails:
        def start(self):
            pass

        def stop(self):
            raise RuntimeError("boom")

    g = Guarded(StopFails)
    g.start()
    assert g.stop().source["gpu"] == "skipped, because the sampler failed: RuntimeError: boom"


# --- the runner ------------------------------------------------------------------------------

MEAS = {"metric": "flops", "key": {"device": "cpu", "dtype": "fp32", "size": 64},
        "value": 1e9, "unit": "FLOP/s", "statistic": "median", "samples": [1e9, 1e9, 1e9],
        "higher_is_better": True, "context": {}}
OK = Outcome(True, value={"status": "ok", "reason": None, "resource": None, "params": {},
                          "measurements": [MEAS]})


class LoggingIsolator:
    def __init__(self, log, answer=OK, seconds=0.0):
        self.log, self.answer, self.seconds = log, answer, seconds

    def call(self, target, job, **kw):
        self.log.append(f"call {job.name}")
        time.sleep(self.seconds)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


SERIES = {"t": [0.1], "cpu_util": [0.99], "cpu_util_per_core": [[0.99]], "gpus": {},
          "downsampled_by": 1, "samples": 1}


class StubSampler:
    def __init__(self, log):
        self.log = log

    def start(self):
        self.log.append("start")

    def stop(self):
        self.log.append("stop")
        return ProbeTelemetry(dict(SERIES), {"cpu": "psutil", "gpu": "skipped, because test"},
                              ["GPU 0 power-capped during 50% of the probe"])


def make(tmp_path, isolator, factory, only=("matmul", "host_device_copy"), rounds=1):
    return Runner(default_registry(), RunConfig(only=only, rounds=rounds), tmp_path, ["run"],
                  {"cuda_available": False, "no_gpu_reason": "no GPU here"}, {}, isolator,
                  telemetry=factory)


def test_runner_samples_around_each_probe_that_runs(tmp_path):
    log = []
    runner = make(tmp_path, LoggingIsolator(log), lambda: StubSampler(log))
    assert runner.execute() == EXIT_OK
    assert log == ["start", "call matmul", "stop"]  # host_device_copy is skipped: no sampler
    tel = results.load(tmp_path).extra["telemetry"]
    assert tel == {"interval_s": 0.1, "probes": {"matmul": SERIES},
                   "flags": {"matmul": ["GPU 0 power-capped during 50% of the probe"]},
                   "source": {"cpu": "psutil", "gpu": "skipped, because test"}}


def test_a_later_round_adds_its_flags_and_its_series_beside_the_first(tmp_path):
    """The telemetry spans the whole run: a later round's series is kept under "rounds"
    (the plot draws it at its time), while "probes" keeps one entry a probe."""
    log = []
    runner = make(tmp_path, LoggingIsolator(log), lambda: StubSampler(log), only=("matmul",),
                  rounds=2)
    assert runner.execute() == EXIT_OK
    assert log == ["start", "call matmul", "stop"] * 2
    tel = results.load(tmp_path).extra["telemetry"]
    assert tel["probes"] == {"matmul": SERIES}
    assert tel["rounds"] == {"matmul (round 2)": SERIES}
    assert tel["flags"]["matmul"] == ["GPU 0 power-capped during 50% of the probe",
                                      "round 2: GPU 0 power-capped during 50% of the probe"]


def test_runner_with_the_live_sampler_on_replayed_sources(tmp_path):
    # an empty tree for /proc/stat: this VM's own steal (another tenant's 2.8% once) is no
    # replayed source, and flagged the probe
    runner = make(tmp_path, LoggingIsolator([], seconds=0.35),
                  lambda: LiveSampler(ReplayPsutil(), None, no_gpu_reason="a CPU box",
                                      root=tmp_path / "no-proc"),
                  only=("matmul",))
    assert runner.execute() == EXIT_OK
    tel = results.load(tmp_path).extra["telemetry"]
    probe = tel["probes"]["matmul"]
    assert probe["samples"] >= 1 and probe["cpu_util"][0] == 0.75
    assert probe["gpus"] == {}
    assert tel["source"]["gpu"] == "skipped, because a CPU box"
    assert tel["flags"] == {}


def test_a_broken_sampler_never_costs_the_probe(tmp_path):
    def factory():
        raise RuntimeError("no /proc")

    runner = make(tmp_path, LoggingIsolator([]), factory, only=("matmul",))
    assert runner.execute() == EXIT_OK
    saved = results.load(tmp_path)
    assert saved.probe("matmul").status == "ok"
    assert saved.extra["telemetry"]["probes"] == {}
    assert saved.extra["telemetry"]["source"]["cpu"] == (
        "skipped, because the sampler failed: RuntimeError: no /proc")


def test_an_interrupted_probe_keeps_what_was_sampled(tmp_path):
    log = []

    class Interrupting(LoggingIsolator):
        def call(self, target, job, **kw):
            runner.stop.signal_name = "SIGINT"  # Ctrl-C while the probe runs
            return super().call(target, job, **kw)

    runner = make(tmp_path, Interrupting(log, answer=Cancelled()),
                  lambda: StubSampler(log), only=("matmul",))
    assert runner.execute() == EXIT_INTERRUPTED
    assert log == ["start", "call matmul", "stop"]
    assert "matmul" in results.load(tmp_path).extra["telemetry"]["probes"]


def test_an_h100_holding_its_sustained_clock_after_the_boost_is_not_flagged():
    """Against the 1980 MHz boost peak every sample at the sustained ~1755 MHz read as a drop;
    against the busy median only a real fall does."""
    from h100_like import stability_run

    _, tel = stability_run([], cause="neighbour")
    flags = throttle_flags(tel)
    assert not any("SM clock fell" in f for f in flags), flags
    assert any(f.startswith("GPU 0 power-capped during 9") for f in flags)  # a fact, kept
    _, braked = stability_run(list(range(100, 230)), cause="brake")  # 13 s of 60 braked
    (fell,) = [f for f in throttle_flags(braked) if "SM clock fell" in f]
    # 22% of the samples braked to 1200 MHz: the median of the busy ones stays near 1755.
    assert re.match(r"GPU 0 SM clock fell to 6\d% of its busy median of 17[2-6]\d MHz in this "
                    r"probe, and stayed under 90% of it in 22% of the busy samples", fell), fell
