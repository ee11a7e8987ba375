"""The Markdown renderer and the analysis it shows, on a recorded-shape multi-GPU run."""

from helpers import render_md

from benchbench.analysis import derive as analysis
from benchbench.core import units as fmt
from benchbench.core.results import Measurement, ProbeResult, RunResult


def m(metric, key, value, unit, samples=None, statistic="median", **context):
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic=statistic,
        samples=samples or [value] * 3,
        higher_is_better=True,
        context=context,
    )


def gpu_run() -> RunResult:
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total": 85520809984,
             "pcie_gen_current": 5, "pcie_width_current": 16, "pcie_gen_max": 5,
             "pcie_width_max": 16, "persistence_mode": False, "ecc_current": True,
             "power_limit": 700.0, "other_processes": []} for i in range(2)]
    matmul = ProbeResult(name="matmul", status="ok", resource="gpu_compute", measurements=[
        m("peak_flops", {"device": "cuda:0", "dtype": "bf16"}, 742e12, "FLOP/s", [700e12, 742e12],
          "max", best_size=8192),
        m("peak_flops", {"device": "cuda:1", "dtype": "bf16"}, 690e12, "FLOP/s", [650e12, 690e12],
          "max", best_size=8192),
    ])
    mem = ProbeResult(name="memory_bandwidth", status="ok", resource="gpu_memory", measurements=[
        m("copy_bandwidth", {"memory": "cuda:0", "size_bytes": 2 << 30}, 2.9e12, "B/s",
          [2.9e12, 2.2e12, 3.1e12, 2.5e12]),
        m("copy_bandwidth", {"memory": "host", "size_bytes": 1 << 30}, 80e9, "B/s"),
    ])
    h2d = ProbeResult(
        name="host_device_copy",
        status="ok",
        resource="host_device_link",
        measurements=[
            m(
                "copy_bandwidth",
                {"device": "cuda:0", "direction": "h2d", "memory": "pinned", "size_bytes": 1 << 30},
                55e9,
                "B/s",
                pcie_gen_current=5,
                pcie_width_current=16,
                pcie_gen_max=5,
                pcie_width_max=16,
            ),
            m(
                "copy_bandwidth",
                {"device": "cuda:1", "direction": "h2d", "memory": "pinned", "size_bytes": 1 << 30},
                25e9,
                "B/s",
                pcie_gen_current=4,
                pcie_width_current=16,
                pcie_gen_max=5,
                pcie_width_max=16,
            ),
        ],
    )
    skipped = ProbeResult(
        name="storage", status="skipped", resource="storage", reason="fio is not installed"
    )
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at="2026-11-30",
                     environment={"host": {"hostname": "gpu-node"}, "gpus": gpus},
                     config={"device_resolved": "cuda"}, argv=[],
                     probes=[matmul, mem, h2d, skipped])


def test_percent_of_datasheet_and_link():
    run = gpu_run()
    mm = run.probe("matmul").measurements[0]
    assert analysis.fraction_of_reference(run, "matmul", mm) == 742e12 / 989.5e12
    host = run.probe("memory_bandwidth").measurements[1]
    assert analysis.reference(run, "memory_bandwidth", host) is None  # no datasheet for DIMMs
    link = run.probe("host_device_copy").measurements[0]
    ref, what = analysis.reference(run, "host_device_copy", link)
    assert what == "PCIe Gen5 x16" and 0.85 < 55e9 / ref < 0.9
    slow = run.probe("host_device_copy").measurements[1]
    _, what = analysis.reference(run, "host_device_copy", slow)
    assert what == "PCIe Gen4 x16 (link capable of Gen5 x16)"


def test_gpu_spread_flags_five_percent():
    (row,) = analysis.gpu_spread(gpu_run(), "matmul", "peak_flops", "dtype")
    assert row["slowest_device"] == "cuda:1"
    assert row["warn"] and 0.06 < row["spread"] < 0.08


def test_render_shows_units_peaks_skips_and_warnings():
    text = render_md(gpu_run())
    assert "| GPU 0 | NVIDIA H100 80GB HBM3, 79.6 GiB, PCIe Gen5 x16 now" in text
    assert "**742 TFLOP/s**" in text and "75.0% of H100 SXM dense bf16" in text
    assert "**2.90 TB/s**" in text and "86.6% of H100 SXM memory" in text
    assert "slowest GPU cuda:1" in text and "⚠ 5% or more" in text
    assert "- Storage reads (`storage`): skipped, because fio is not installed" in text
    # the noisy GPU copy is flagged, the steady one is not
    noisy = text.split("## Noisy measurements")[1]
    assert "- Memory copy (`memory_bandwidth`): 1 of 2 settings noisy, CV 15.1%" in noisy
    assert "memory=host" not in noisy and "cuda:0" not in noisy  # one line, not the rows


def test_human_formatting():
    assert fmt.si(1.234e12, "FLOP/s") == "1.23 TFLOP/s"
    assert fmt.si(55e9, "B/s") == "55.0 GB/s"
    assert fmt.iec(256 << 20) == "256 MiB"
    assert fmt.iec(1536 << 20) == "1.50 GiB"
    assert fmt.seconds(0.0123) == "12.3 ms"
    assert fmt.value(0.42, "ratio") == "42.0%"


def test_a_key_shows_a_measured_float_short_and_whole_numbers_as_they_are():
    # a rate the inference server's search found is part of its latency's key
    assert fmt.key_value("rate", 32.928172898271896) == "32.93"
    assert fmt.key_value("rate", 8042.123456) == "8042"
    assert fmt.key_value("latency_bound_s", 0.13) == "0.13"
    assert fmt.key_value("lr", 1.5e-07) == "1.5e-07"
    assert fmt.key_value("batch_size", 64) == "64"
    assert fmt.key_value("scale", 2.0) == "2.0"
    assert fmt.key_value("size_bytes", 256 << 20) == "256 MiB"
    assert fmt.key_value("precision", "bf16") == "bf16"


def test_why_nvml_is_unavailable_is_said_once():
    """A CPU run's report gave "NVML Shared Library Not Found" three times: the GPUs row, the
    doctor's no-GPU line and the energy section. The row says it; the others point to it."""
    from pathlib import Path

    from benchbench.core import results

    run = results.load(Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json")
    error = "NVML Shared Library Not Found"
    run.environment["gpus"] = []
    run.environment["gpus_reason"] = (f"NVML unavailable: {error} (NVML ships with the NVIDIA "
                                      "driver as libnvidia-ml.so; benchbench reads it through "
                                      "nvidia-ml-py)")
    run.extra["telemetry"] = {"probes": {"matmul": {
        "t": [0.0, 0.1], "gpus": {}, "energy": {
            "gpu_J": {}, "gpu_seconds": {}, "cpu_J": None, "seconds": 0.1,
            "gpu_source": f"skipped, because NVML is unavailable: {error}",
            "cpu_source": "not measurable here: no RAPL"}}}, "flags": {}}
    text = render_md(run)
    assert text.count(error) == 1
    assert "| GPUs | none (NVML unavailable: NVML Shared Library Not Found (NVML ships" in text
    assert "because NVML unavailable (see GPUs under Environment)" in text  # the doctor
    assert ("Energy: not measured, because neither source could be read: GPU energy — NVML is "
            "unavailable (see GPUs under Environment); CPU energy — no RAPL.") in text
