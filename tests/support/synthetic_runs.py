"""Hand-built runs for history, fleet and export: the headline measurements with chosen values
per round, and an environment with a chosen driver, kernel, host and identity. No GPU needed.

`base` scales every figure; `rounds` is each figure's values per round as factors of it.
"""

from __future__ import annotations

import statistics
import zlib
from typing import Any

from benchbench.core.peaks import pcie_rate
from benchbench.core.results import Measurement, ProbeResult, RunResult

GiB = 2**30
# (probe, resource, metric, key, unit, statistic, the figure at factor 1)
CPU_FIGURES = [
    ("matmul", "cpu_compute", "peak_flops", {"device": "cpu", "dtype": "fp32"}, "FLOP/s", "max",
     2e11),
    ("matmul", "cpu_compute", "peak_flops", {"device": "cpu", "dtype": "bf16"}, "FLOP/s", "max",
     4e11),
    ("memory_bandwidth", "host_memory", "copy_bandwidth", {"memory": "host",
     "size_bytes": 268435456}, "B/s", "median", 3.6e10),
    ("resnet50", "cpu_compute", "throughput", {"device": "cpu", "precision": "fp32",
     "image_size": 64, "batch_size": 8}, "samples/s", "total_over_time", 40.0),
    ("transformer", "cpu_compute", "throughput", {"device": "cpu", "precision": "fp32",
     "preset": "small", "seq_len": 128, "batch_size": 4}, "tokens/s", "total_over_time", 3600.0),
    ("dataloader", "cpu_dataloading", "best_throughput", {"batch_size": 64, "image_size": 224},
     "samples/s", "max", 520.0),
    ("storage", "storage", "read_bandwidth", {"job": "seq1m", "bs": 1048576, "engine": "io_uring",
     "iodepth": 32, "numjobs": 1}, "B/s", "total_over_time", 1.25e9),
]


def measurement(metric: str, key: dict[str, Any], rounds: list[float], unit: str,
                statistic: str = "total_over_time", context: dict[str, Any] | None = None
                ) -> Measurement:
    value = max(rounds) if statistic == "max" else statistics.median(rounds)
    return Measurement(metric=metric, key=dict(key), value=value, unit=unit,
                       statistic=statistic, samples=list(rounds), higher_is_better=True,
                       context={"round_values": list(rounds), "rounds": len(rounds),
                                **(context or {})})


def environment(host: str = "vm", cpu: str = "AMD EPYC", driver: str | None = None,
                kernel: str = "6.8.0", torch: str = "2.5.0", gpus: list[dict[str, Any]] = (),
                serial: str | None = None, recorded: bool = True) -> dict[str, Any]:
    env: dict[str, Any] = {
        "host": {"hostname": host, "cpu_model": cpu, "cores_usable": 8, "cores_physical": 8,
                 "memory_total": 64 * GiB, "kernel": kernel},
        "versions": {"python": "3.11.7", "torch": torch, "benchbench": "0.1.0"},
        "driver": driver, "cuda_driver": None, "gpus": [dict(g) for g in gpus],
        "torch": {"torch": torch, "cudnn": "9.1.0", "nccl": "2.21.5",
                  "cuda_device_count": len(gpus)}}
    if recorded:
        env["identity"] = {"hostname": host,
                           "dmi": {"sys_vendor": "Vendor", "product_name": "Box",
                                   "product_serial": serial, "bios_version": "1.0",
                                   "bios_date": "01/01/2026"},
                           "dmi_unreadable": {} if serial else {
                               "product_serial": "permission denied (root only)"},
                           "gpu_uuids": [g["uuid"] for g in gpus if g.get("uuid")]}
    return env


def cpu_run(started: str, base: float = 1.0, rounds: tuple[float, ...] = (0.99, 1.01),
            factors: dict[str, float] | None = None, env: dict[str, Any] | None = None,
            label: str | None = None, steal: dict[str, float] | None = None) -> RunResult:
    """A CPU run of the headline figures; `factors` scales one probe's figures (by probe);
    `steal`: the CPU steal each probe's telemetry read (by probe), none without it."""
    probes: dict[str, ProbeResult] = {}
    for probe, resource, metric, key, unit, statistic, figure in CPU_FIGURES:
        f = base * (factors or {}).get(probe, 1.0) * figure
        m = measurement(metric, key, [f * r for r in rounds], unit, statistic)
        probes.setdefault(probe, ProbeResult(name=probe, status="ok", resource=resource)
                          ).measurements.append(m)
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at=started,
                     finished_at=started,
                     environment=env if env is not None else environment(), label=label,
                     config={"device_resolved": "cpu", "quick": True}, argv=[],
                     probes=list(probes.values()),
                     extra={"telemetry": {"interval_s": 0.1, "flags": {}, "probes": {
                         probe: {"steal_fraction": x} for probe, x in steal.items()}}}
                     if steal is not None else {})


H100 = "NVIDIA H100 80GB HBM3"


def gpu_record(host: str, i: int, **extra: Any) -> dict[str, Any]:
    """An NVML GPU record as the snapshot keeps it (a healthy H100 unless told)."""
    return {"index": i, "torch_index": i, "name": H100,
            "uuid": f"GPU-{zlib.crc32(host.encode()):08x}-{i:04d}", "memory_total": 80 * GiB,
            "pcie_gen_current": 1, "pcie_width_current": 16, "pcie_gen_max": 5,
            "pcie_width_max": 16, "persistence_mode": True,
            "ecc_current": True, "ecc_uncorrected_volatile": 0, "power_limit": 700.0,
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                              "failure": False},
            "other_processes": [], **extra}


def gpu_node(host: str, gpus: int = 8, factor: float = 1.0,
             per_gpu: dict[int, float] | None = None,
             pcie: dict[int, tuple[int, int]] | None = None,
             sm_clock: dict[int, float] | None = None,
             records: dict[int, dict[str, Any]] | None = None,
             driver: str = "550.54.15", name: str = H100,
             started: str = "2026-11-30T02:00:00+00:00",
             sample_clock: dict[int, float] | None = None) -> RunResult:
    """One node of a GPU fleet: per-GPU matmul peaks and host-to-device peaks (with the link
    read under load), ResNet50 on cuda:0, and the matmul probe's telemetry per GPU. A GPU's
    figures scale with `factor` × per_gpu[i]; a slower link scales its copy bandwidth by its
    rate (Gen4 x8 to a quarter of Gen5 x16's).
    `sample_clock` (by GPU, Hz): the matmul's samples carry that SM clock each, at its best
    size's measurement behind the peak (analysis/clocks.py); none without it."""
    per_gpu, pcie, sm_clock, records = per_gpu or {}, pcie or {}, sm_clock or {}, records or {}
    matmul, copies = [], []
    for i in range(gpus):
        f = factor * per_gpu.get(i, 1.0)
        gen, width = pcie.get(i, (5, 16))
        link = pcie_rate(gen, width) / pcie_rate(5, 16)  # within what the link can carry
        for dtype, peak in (("bf16", 7.9e14), ("fp16", 7.9e14)):
            key = {"device": f"cuda:{i}", "dtype": dtype}
            matmul.append(measurement("peak_flops", key, [peak * f * 0.99, peak * f],
                                      "FLOP/s", "max", {"best_size": 8192}))
            if sample_clock is not None and i in sample_clock:
                hz = sample_clock[i]
                matmul.append(measurement("flops", {**key, "size": 8192},
                                          [peak * f * 0.99, peak * f, peak * f * 1.01],
                                          "FLOP/s", "median",
                                          {"sm_clock_Hz": [hz * 0.99, hz, hz * 1.01],
                                           "calls_per_sample": 15}))
        copies.append(measurement(
            "peak_bandwidth", {"device": f"cuda:{i}", "direction": "h2d", "memory": "pinned"},
            [5.3e10 * link * 0.99, 5.3e10 * link], "B/s", "max",
            {"pcie_gen_current": gen, "pcie_width_current": width, "pcie_gen_max": 5,
             "pcie_width_max": 16}))
    resnet = measurement("throughput", {"device": "cuda:0", "precision": "amp_bf16",
                                        "image_size": 224, "batch_size": 256},
                         [3000 * factor * per_gpu.get(0, 1.0) * r for r in (0.99, 1.01)],
                         "samples/s")
    gpu_tel = {str(i): {"util": [0.99] * 5, "sm_clock_Hz": [sm_clock.get(i, 1.98e9)] * 5,
                        "throttle": [["sw_power_cap"] if i in sm_clock else []] * 5}
               for i in range(gpus)}
    recs = [{**gpu_record(host, i), "name": name, **records.get(i, {})}
            for i in range(gpus)]
    run = RunResult(
        tool={"name": "benchbench", "version": "0.1.0"}, started_at=started, finished_at=started,
        environment=environment(host=host, cpu="Intel Xeon Platinum 8480+", driver=driver,
                                gpus=recs),
        config={"device_resolved": "cuda", "quick": False}, argv=[],
        probes=[ProbeResult(name="matmul", status="ok", resource="gpu_compute",
                            measurements=matmul),
                ProbeResult(name="host_device_copy", status="ok", resource="host_device_link",
                            measurements=copies),
                ProbeResult(name="resnet50", status="ok", resource="gpu_compute",
                            measurements=[resnet])],
        extra={"telemetry": {"interval_s": 0.1, "flags": {},
                             "probes": {"matmul": {"gpus": gpu_tel, "steal_fraction": 0.0}}}})
    return run


# --- samples that carry their SM clock (analysis/clocks.py) ---------------------------------

def timed_measurement(metric: str, key: dict[str, Any], samples: list[float],
                      unit: str = "FLOP/s", statistic: str = "median", **context: Any
                      ) -> Measurement:
    return Measurement(metric=metric, key=key, value=sorted(samples)[len(samples) // 2],
                       unit=unit, statistic=statistic, samples=samples, higher_is_better=True,
                       context=context)


def clocked_env(max_hz: float = 1.98e9) -> dict[str, Any]:
    return {"gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-abc", "torch_index": 0,
                      "memory_total": 150 << 30, "sm_clock_max": max_hz, "power_limit": 700.0,
                      "persistence_mode": True, "ecc_current": True, "other_processes": []}]}


def clocked_matmul_run(fp16_clock: float = 1.35e9, max_hz: float = 1.98e9) -> RunResult:
    """A matmul probe on an H200 whose samples carry their SM clock (tests/unit/test_clocks.py):
    bf16 at ~1,485 MHz and fp16 at a lower clock, both 488 TFLOP/s per GHz: the same tensor
    cores per cycle, at different clocks."""
    per_ghz = 488e12
    bf16_hz: list[float | None] = [1.485e9, 1.48e9, 1.43e9, 1.5e9]
    fp16_hz = [fp16_clock, fp16_clock * 0.99, fp16_clock * 1.01]
    bf16 = [per_ghz * h / 1e9 for h in bf16_hz if h]
    ms = [
        timed_measurement("flops", {"device": "cuda:0", "dtype": "bf16", "size": 4096},
                          [0.97 * v for v in bf16], sm_clock_Hz=[*bf16_hz[:3], None]),
        timed_measurement("flops", {"device": "cuda:0", "dtype": "bf16", "size": 8192}, bf16,
                          sm_clock_Hz=bf16_hz),
        timed_measurement("peak_flops", {"device": "cuda:0", "dtype": "bf16"}, [700e12, 724e12],
                          statistic="max", best_size=8192, size=[4096, 8192]),
        timed_measurement("flops", {"device": "cuda:0", "dtype": "fp16", "size": 8192},
                          [per_ghz * h / 1e9 for h in fp16_hz], sm_clock_Hz=fp16_hz),
    ]
    probe = ProbeResult(name="matmul", status="ok", resource="gpu_compute", measurements=ms)
    return clocked_run(probe, max_hz)


def clocked_run(probe: ProbeResult, max_hz: float = 1.98e9) -> RunResult:
    return RunResult(tool={"name": "benchbench", "version": "test"},
                     started_at="2026-12-04T00:00:00+00:00", environment=clocked_env(max_hz),
                     config={"device": "cuda"}, argv=[], probes=[probe])
