"""The configuration doctor: each rule on recorded NVML answers and sysfs trees, the driver
table, the measured-need storage rule, scenarios, the CLI, and proof that nothing sets a thing."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import h100_like
import pytest
from fake_nvml import GPUS, FakeNvml, _gpu

from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.doctor import checks as doctor
from benchbench.doctor.checks import run_checks
from benchbench.doctor.gpu_rules import throttle_kind
from benchbench.doctor.rules import Check, version_tuple
from benchbench.machine import environment, network
from benchbench.machine.telemetry_series import throttle_flags
from benchbench.reports import doctor as doctor_report

GiB, GB = 1 << 30, 1e9
ROOT = Path(__file__).parents[2]
FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
SYSFS = Path(__file__).parents[1] / "support" / "fixtures" / "sysfs"  # see its README.md
SETTERS = ("nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear")


def env_of(nvml=None, **over):
    """A snapshot as environment.snapshot() writes it, its GPUs from recorded NVML answers."""
    info, reason = environment.gpu_snapshot(nvml or FakeNvml())
    env = {"host": {"memory_total": 512 * GiB, "cores_usable": 64, "cores_physical": 64,
                    "cores_logical": 128},
           "driver": info.get("driver"), "cuda_driver": info.get("cuda_driver"),
           "gpus": info["gpus"], "gpus_reason": reason,
           "torch": {"torch": "2.5.1+cu124", "torch_cuda": "12.4"},
           "storage": {"path": "/data", "mountpoint": "/data", "device": "/dev/nvme0n1",
                       "total": 4e12, "rotational": False},
           "network": {"interfaces": [{"name": "eth0", "rate": 100e9 / 8}], "unknown_speed": [],
                       "infiniband": []}}
    for k, v in over.items():
        env[k] = {**env[k], **v} if isinstance(v, dict) and isinstance(env.get(k), dict) else v
    return env


def one(checks, name):
    return next(c for c in checks if c.name == name)


def check(env, name, run=None, scenario=None):
    return one(run_checks(env, run, scenario), name)


def m(metric, key, value, unit, context=None):
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic="median",
        samples=[value],
        higher_is_better=True,
        context=context or {},
    )


def run_of(env, probes=(), **extra):
    return RunResult(tool={"name": "benchbench"}, started_at="t", environment=env, config={},
                     argv=[], probes=list(probes), extra=extra)


def healthy(**changes):
    return _gpu(**{"pm": 1, "gen": (5, 5), "ecc": (1, 1), **changes})


# --- environment: the new facts ---------------------------------------------------------------

def test_snapshot_reads_health_facts_and_never_a_setter():
    sick = healthy(clock_events=0x1 | 0x4 | 0x40 | 0x800, ecc_errors=(2, 5), power_default=700000,
                   power=500000, retired_pages=([1, 2], [3]), retired_pending=1,
                   remapped_rows=(1, 2, 1, 0))
    nvml = FakeNvml(gpus=[GPUS[0], sick])
    g0, g1 = environment.gpu_snapshot(nvml)[0]["gpus"]
    assert g0["clock_event_reasons"] == ["gpu_idle"]
    assert (g0["ecc_uncorrected_volatile"], g0["ecc_uncorrected_aggregate"]) == (0, 0)
    assert g0["retired_pages_double_bit"] is None and g0["retired_pages_pending"] is None
    assert g0["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False,
                                   "failure": False}
    assert g0["power_limit_default"] == 700.0
    assert g1["clock_event_reasons"] == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown",
                                         "bit_0x800"]
    assert (g1["ecc_uncorrected_volatile"], g1["ecc_uncorrected_aggregate"]) == (2, 5)
    assert (g1["retired_pages_single_bit"], g1["retired_pages_double_bit"]) == (2, 1)
    assert g1["retired_pages_pending"] is True and g1["remapped_rows"]["pending"] is True
    assert (g1["power_limit"], g1["power_limit_default"]) == (500.0, 700.0)
    assert not [n for n in nvml.looked_up if n.startswith(SETTERS)]


def test_old_pynvml_throttle_name_and_unsupported_answers():
    nvml = FakeNvml(missing=("nvmlDeviceGetCurrentClocksEventReasons",))
    assert environment.gpu_snapshot(nvml)[0]["gpus"][0]["clock_event_reasons"] == ["gpu_idle"]
    geforce = _gpu(clock_events=None, ecc_errors=None, remapped_rows=None, ecc=None)
    g = environment.gpu_snapshot(FakeNvml(gpus=[geforce]))[0]["gpus"][0]
    assert g["clock_event_reasons"] is None and g["remapped_rows"] is None
    assert g["ecc_uncorrected_volatile"] is None


def test_network_snapshot_from_a_sysfs_tree(tmp_path):
    net = network.network_snapshot(SYSFS)
    assert net["interfaces"] == [{"name": "eth0", "rate": 100e9 / 8, "operstate": "up"}]
    assert net["unknown_speed"] == ["ens2", "eth1"]
    assert net["infiniband"] == [
        {"device": "mlx5_0", "port": 1, "rate": 400e9 / 8, "rate_text": "400 Gb/sec (4X NDR)",
         "state": "ACTIVE", "link_layer": "InfiniBand"},
        {"device": "mlx5_1", "port": 1, "rate": 200e9 / 8, "rate_text": "200 Gb/sec (4X HDR)",
         "state": "DOWN", "link_layer": "Ethernet"}]
    assert network.network_snapshot(tmp_path / "empty") == {
        "interfaces": [], "unknown_speed": [], "infiniband": []}
    assert "network" in environment.snapshot(tmp_path, None)


# --- host rules -------------------------------------------------------------------------------

@pytest.mark.parametrize("ram, status, note", [
    (512 * GiB, "pass", None), (400 * GiB, "pass", "3× preferred"), (200 * GiB, "warn", None)])
def test_ram_against_gpu_memory(ram, status, note):
    c = check(env_of(host={"memory_total": ram}), "RAM vs GPU memory")  # 2 × 79.6 GiB H100
    assert c.status == status and c.source == "buyer's guide rule"
    assert (note or "") in (c.detail or "")
    assert (c.fix is not None) == (status == "warn")


def test_rules_without_gpus_are_skipped_with_the_reason():
    env = env_of(FakeNvml(fail_init=RuntimeError("Driver Not Loaded")))
    checks = run_checks(env)
    for name in ("RAM vs GPU memory", "persistence mode", "PCIe link", "clock throttling",
                 "ECC and memory errors", "other GPU processes", "driver and CUDA (guide)",
                 "driver for torch's CUDA"):
        c = one(checks, name)
        assert c.status == "skipped" and "Driver Not Loaded" in c.detail, name
        assert c.label.startswith("skipped, because no GPU is visible")


def test_checks_skipped_for_want_of_a_gpu_are_one_line():
    """report.md, report.html and `doctor` share this table: eight rows repeating the same
    reason become one line; --json (the Check list) keeps every row."""
    env = env_of(FakeNvml(fail_init=RuntimeError("Driver Not Loaded")))
    checks = run_checks(env)
    lines = doctor_report.table(checks)
    text = "\n".join(lines)
    assert text.count("Driver Not Loaded") == 1
    (line,) = [ln for ln in lines if ln.startswith("No GPU visible:")]
    assert line.startswith("No GPU visible: 8 GPU checks skipped (RAM vs GPU memory, ")
    assert "because NVML unavailable: Driver Not Loaded" in line
    assert "| CPU cores |" in text  # the other checks keep their rows
    assert sum(c.status == "skipped" for c in checks) >= 8  # still counted


@pytest.mark.parametrize("usable, physical, n_gpus, status, needle", [
    (32, 32, 2, "pass", None), (12, 12, 1, "pass", "16–32 preferred"),
    (12, 12, 4, "warn", "≥ 16 for 4 GPUs"), (4, 4, 0, "warn", "per-GPU rule is not applied"),
    (6, 64, 1, "warn", "leaves 6 of 64 physical cores"), (64, 32, 8, "pass", "32 cores usable")])
def test_cpu_cores(usable, physical, n_gpus, status, needle):
    env = env_of(host={"cores_usable": usable, "cores_physical": physical})
    env["gpus"] = [_snap_gpu(i) for i in range(n_gpus)]
    c = check(env, "CPU cores")
    assert c.status == status
    assert needle is None or needle in f"{c.measured} {c.threshold} {c.detail}"
    assert "rule of thumb" in c.source if n_gpus else "rule of thumb" not in c.source


def _snap_gpu(i):
    return {**environment.gpu_snapshot(FakeNvml())[0]["gpus"][0], "index": i}


# --- storage: the measured need wins over the guide's 3 GB/s ----------------------------------

def _storage_run(env, bw, img_s=None, mean=114_660, status="ok"):
    probes = [
        ProbeResult(
            name="storage",
            status=status,
            resource="storage",
            reason=None if status == "ok" else "no space",
            measurements=[
                m(
                    "read_bandwidth",
                    {"job": "seq1m", "bs": 1 << 20},
                    bw,
                    "B/s",
                    {"path": "/data", "device": "/dev/nvme0n1", "engine": "libaio"},
                )
            ]
            if status == "ok"
            else [],
        )
    ]
    if img_s:
        probes.append(
            ProbeResult(
                name="resnet50",
                status="ok",
                resource="gpu_compute",
                measurements=[
                    m("throughput", {"device": "cuda:0", "precision": p}, v, "samples/s")
                    for p, v in (("amp_bf16", img_s), ("fp32", img_s / 3))
                ],
            )
        )
    return run_of(env, probes, dataset={"mean_file_size": mean})


def test_storage_without_a_run_is_skipped_with_the_command():
    c = check(env_of(), "storage read bandwidth")
    assert c.status == "skipped" and "benchbench run --only storage" in c.detail


def test_storage_below_the_guide_passes_when_it_meets_the_measured_need():
    env = env_of(gpus=[_snap_gpu(0)])  # one H200-class GPU at 3,000 img/s
    c = check(env, "storage read bandwidth", _storage_run(env, 1.0e9, img_s=3000))
    assert c.status == "pass" and c.source.startswith("measured")
    assert "344 MB/s" in c.threshold and "below the guide's 3 GB/s" in c.detail
    run = _storage_run(env, 1.0e9, img_s=3000)
    run.probes[0].measurements.append(m("dataset_read_bandwidth", {"access": "cold"}, 0.5e9,
                                        "B/s"))
    assert "read cold at 500 MB/s" in check(env, "storage read bandwidth", run).detail


@pytest.mark.parametrize("bw, img_s, n_gpus, status", [
    (0.2e9, 3000, 1, "fail"),  # cannot feed one GPU
    (2.0e9, 3000, 8, "fail"),  # 8 GPUs × 3,000 img/s × 115 kB = 2.75 GB/s
    (3.5e9, 3000, 8, "pass"),
    (2.0e9, None, 1, "warn"),  # no training throughput: the guide's rule, a warning
    (4.0e9, None, 1, "pass")])
def test_storage_rule(bw, img_s, n_gpus, status):
    env = env_of(gpus=[_snap_gpu(i) for i in range(n_gpus)])
    c = check(env, "storage read bandwidth", _storage_run(env, bw, img_s=img_s))
    assert c.status == status
    assert (c.source == "buyer's guide rule") == (img_s is None)


def test_storage_probe_that_did_not_run_is_skipped():
    env = env_of()
    c = check(env, "storage read bandwidth", _storage_run(env, 0, status="failed"))
    assert c.status == "skipped" and "failed: no space" in c.detail
    assert check(env, "storage read bandwidth", run_of(env)).detail == \
        "the run has no storage probe"


# --- driver and CUDA --------------------------------------------------------------------------

@pytest.mark.parametrize("driver, cuda, status", [
    ("550.54.15", "12.4", "pass"), ("535.54.03", "12.2", "pass"), ("525.60.13", "12.0", "warn"),
    ("470.82.01", "11.4", "warn")])
def test_driver_guide_rule(driver, cuda, status):
    c = check(env_of(driver=driver, cuda_driver=cuda), "driver and CUDA (guide)")
    assert c.status == status and c.source == "buyer's guide rule"


@pytest.mark.parametrize("driver, torch_cuda, status", [
    ("550.54.15", "12.4", "pass"), ("550.54.14", "12.4", "pass"),
    ("535.104.05", "12.4", "warn"),  # minor-version compatibility
    ("525.60.13", "12.8", "warn"), ("520.61.05", "12.1", "fail"),  # below 12.x's floor
    ("570.26", "12.8", "pass"), ("560.35.03", "12.7", "pass"),  # 12.7: 12.6's row applies
    ("550.54.15", "13.0", "fail"), ("580.65.06", "13.0", "pass"), ("575.51.03", "12.9", "pass"),
    ("520.61.05", "11.8", "pass"), ("470.82.01", "11.8", "warn")])
def test_driver_for_torchs_cuda(driver, torch_cuda, status):
    c = check(env_of(driver=driver, torch={"torch_cuda": torch_cuda}), "driver for torch's CUDA")
    assert c.status == status, c
    assert "Table 3" in c.source
    if status == "warn":
        assert "minor-version compatibility" in c.detail
    if torch_cuda == "13.0" and status == "fail":
        assert "R580+" in c.detail and "580.65.06" in c.threshold


def test_driver_for_torch_unknowns_are_skipped():
    assert "not built with CUDA" in check(env_of(torch={"torch": "2.5.1+cpu", "torch_cuda": None}),
                                          "driver for torch's CUDA").detail
    assert "no torch facts" in check(env_of(torch=None), "driver for torch's CUDA").detail
    assert "not in the table" in check(env_of(torch={"torch_cuda": "14.0"}),
                                       "driver for torch's CUDA").detail
    assert version_tuple("570.26") == (570, 26, 0) < version_tuple("570.26.1")


# --- GPU state --------------------------------------------------------------------------------

def test_persistence_mode_is_reported_never_set():
    c = check(env_of(), "persistence mode")  # the recorded node: GPU 1 has it off
    assert c.status == "warn" and c.measured == "off on GPU 1"
    assert "sudo nvidia-smi -pm 1" in c.fix and "nvidia-persistenced" in c.fix
    assert check(env_of(FakeNvml(gpus=[healthy()])), "persistence mode").status == "pass"
    torch_only = env_of(gpus=[{"index": 0, "name": "NVIDIA L4", "memory_total": 24 * GB}],
                        gpus_reason="NVML unavailable; GPU facts from torch.cuda instead")
    assert check(torch_only, "persistence mode").status == "skipped"


def _copy_run(env, gen):
    ctx = {"pcie_gen_current": gen, "pcie_width_current": 16, "pcie_gen_max": 5,
           "pcie_width_max": 16}
    return run_of(
        env,
        [
            ProbeResult(
                name="host_device_copy",
                status="ok",
                resource="host_device_link",
                measurements=[
                    m(
                        "peak_bandwidth",
                        {"device": f"cuda:{i}", "direction": "h2d", "memory": "pinned"},
                        50e9,
                        "B/s",
                        ctx,
                    )
                    for i in (0, 1)
                ],
            )
        ],
    )


def test_pcie_link_idle_warns_and_under_load_decides():
    env = env_of()  # GPU 1 sits at Gen1 of Gen5 at idle
    idle = check(env, "PCIe link")
    assert idle.status == "warn" and "at idle" in idle.measured and "train down" in idle.detail
    assert check(env, "PCIe link", _copy_run(env, 5)).status == "pass"
    loaded = check(env, "PCIe link", _copy_run(env, 4))
    assert loaded.status == "fail" and "Gen4 x16 of Gen5 x16 under load" in loaded.measured
    assert check(env_of(FakeNvml(gpus=[healthy()])), "PCIe link").status == "pass"


@pytest.mark.parametrize("events, status", [(0x1, "pass"), (0x1 | 0x2 | 0x10 | 0x100, "pass"),
                                            (0x4, "pass"), (0x4 | 0x40, "fail"), (0x8, "fail"),
                                            (0x80, "fail"), (0x20, "fail")])
def test_throttling_at_the_snapshot(events, status):
    c = check(env_of(FakeNvml(gpus=[healthy(clock_events=events)])), "clock throttling")
    assert c.status == status and "at the snapshot" in c.source
    assert (c.fix is not None) == (status == "fail")
    assert ("sw_power_cap" in (c.detail or "")) == bool(events & 0x4)


@pytest.mark.parametrize("flags, status", [
    ({}, "pass"), ({"matmul": ["CPU utilisation averaged 97% over all 8 cores"]}, "pass"),
    ({"resnet50": ["GPU 0 power-capped during 35% of the probe"]}, "pass"),
    ({"resnet50": ["GPU 0 power-capped during 97% of the probe",
                   "GPU 0 SM clock fell to 70% of its busy median of 1755 MHz in this probe"]},
     "warn"),
    ({"matmul": ["GPU 0 SM clock fell to 80% of its busy median of 1750 MHz"]}, "warn"),
    ({"matmul": ["GPU 1 clocks limited by hw thermal slowdown during 12% of the probe"]}, "fail"),
    ({"matmul": ["GPU 1 clocks limited by sync boost during 50% of the probe"]}, "pass")])
def test_throttling_from_the_runs_telemetry(flags, status):
    env = env_of(FakeNvml(gpus=[healthy()]))
    run = run_of(env, telemetry={"flags": flags, "source": {"gpu": "NVML"}})
    c = check(env, "clock throttling", run)
    assert c.status == status and c.source.startswith("measured")
    assert all(f"{p}: {f}" in (c.detail if throttle_kind(f) == "held" else c.measured)
               for p, fs in flags.items() for f in fs if throttle_kind(f))


def test_h100_at_its_power_limit_passes_and_says_so():
    """An H100-like GPU under dense bf16 load: the power cap in 97% of the samples, the clock
    steady at ~1755 MHz after its boost (tests/support/h100_like.py, through the telemetry's
    own flag code). Before, every compute probe of a healthy H100 made this check warn."""
    _, telemetry = h100_like.stability_run([])
    flags = {"matmul": throttle_flags(telemetry)}
    assert flags["matmul"] == ["GPU 0 power-capped during 97% of the probe"]
    env = env_of(FakeNvml(gpus=[healthy()]))
    c = check(env, "clock throttling",
              run_of(env, telemetry={"flags": flags, "source": {"gpu": "NVML"}}))
    assert c.status == "pass" and c.measured == "none; at its power limit in 1 reading"
    assert "matmul: GPU 0 power-capped during 97% of the probe" in c.detail
    braked = {"matmul": throttle_flags(h100_like.stability_run(list(range(0, 600, 7)),
                                                                "brake")[1])}
    c = check(env, "clock throttling",
              run_of(env, telemetry={"flags": braked, "source": {"gpu": "NVML"}}))
    assert c.status == "fail" and "power brake" in c.measured


def test_throttling_lowered_power_limit_and_unknowns():
    c = check(env_of(FakeNvml(gpus=[healthy(power=500000, power_default=700000)])),
              "clock throttling")
    assert c.status == "warn" and "`sudo nvidia-smi -i 0 -pl 700`" in c.fix
    assert throttle_kind("gpu_idle") is throttle_kind("applications_clocks_setting") is None
    no_gpu = env_of(FakeNvml(fail_init=RuntimeError("x")))
    c = check(no_gpu, "clock throttling", run_of(no_gpu))
    assert c.status == "skipped" and "telemetry sampled no GPU" in c.detail


@pytest.mark.parametrize("changes, status, needle", [
    ({}, "pass", "no uncorrected errors"),
    ({"ecc_errors": (3, 3)}, "fail", "3 uncorrected ECC errors since the driver loaded"),
    ({"remapped_rows": (0, 1, 1, 0)}, "fail", "row remap is pending"),
    ({"remapped_rows": (0, 0, 0, 1)}, "fail", "row remap failed"),
    ({"ecc_errors": (0, 4)}, "warn", "4 uncorrected ECC errors in its lifetime"),
    ({"retired_pages": ([1], [2, 3]), "retired_pending": 0, "remapped_rows": None}, "warn",
     "3 retired pages"),
    ({"retired_pages": ([], []), "retired_pending": 1, "remapped_rows": None}, "fail",
     "page retirement is pending"),
    ({"ecc": (0, 0), "ecc_errors": None}, "warn", "ECC is off")])
def test_ecc_and_memory_errors(changes, status, needle):
    c = check(env_of(FakeNvml(gpus=[healthy(**changes)])), "ECC and memory errors")
    assert c.status == status and needle in c.measured
    if status == "fail":
        assert "nvidia-smi -r" in c.fix and "never resets" in c.fix


def test_ecc_on_geforce_is_skipped():
    geforce = _gpu(name="NVIDIA GeForce RTX 4090", ecc=None, ecc_errors=None, remapped_rows=None)
    c = check(env_of(FakeNvml(gpus=[geforce])), "ECC and memory errors")
    assert c.status == "skipped" and "GeForce" in c.detail


def test_other_processes():
    env = env_of()  # pid 4242 holds 1 GiB on GPU 1
    live = check(env, "other GPU processes")
    assert live.status == "warn" and live.measured == "GPU 1: pid 4242 (1 GiB)"
    assert check(env, "other GPU processes", run_of(env)).status == "fail"
    assert check(env_of(FakeNvml(gpus=[healthy()])), "other GPU processes").status == "pass"


# --- network and scenarios --------------------------------------------------------------------

def test_network_rule():
    net = network.network_snapshot(SYSFS)
    c = check(env_of(network=net), "network (multi-node)")
    assert c.status == "pass" and "mlx5_0/1 400 Gb/s" in c.measured
    slow = {"interfaces": [{"name": "eth0", "rate": 25e9 / 8}], "infiniband": []}
    c = check(env_of(network=slow), "network (multi-node)")
    assert c.status == "warn" and "multi-node" in c.detail and c.source == "buyer's guide rule"
    c = check(env_of(network={"interfaces": [], "unknown_speed": ["eth0"], "infiniband": []}),
              "network (multi-node)")
    assert c.status == "skipped" and "eth0" in c.detail
    assert check(env_of(network=None), "network (multi-node)").status == "skipped"


def _statuses(env, scenario, run=None):
    return {c.name.split(": ")[1]: c.status for c in run_checks(env, run, scenario)
            if c.name.startswith(scenario + ":")}


def test_scenarios_by_capability():
    env = env_of()  # 2 × H100 80 GB, 512 GiB RAM, 4 TB NVMe, 100 GbE, no RDMA
    assert set(_statuses(env, "cv").values()) == {"pass"}
    nlp = _statuses(env, "nlp-finetune")
    assert nlp == {"GPU memory": "warn", "GPU bf16 compute": "pass", "RAM": "pass",
                   "storage": "pass", "network": "warn"}  # 160 of 320 GB; no InfiniBand/RoCE
    assert _statuses(env_of(network=network.network_snapshot(SYSFS)),
                     "nlp-finetune")["network"] == "pass"
    big = env_of(FakeNvml(gpus=[healthy()] * 8), host={"memory_total": 2048 * GiB},
                 storage={"total": 30e12},
                 network={"interfaces": [], "infiniband": [
                     {"device": f"mlx5_{i}", "port": 1, "rate": 400e9 / 8, "state": "ACTIVE"}
                     for i in range(8)]})
    assert set(_statuses(big, "multimodal-pretrain").values()) == {"pass"}
    small = env_of(FakeNvml(gpus=[_gpu(name="NVIDIA L4", mem=23_034 << 20)]),
                   host={"memory_total": 15.5 * GiB}, storage={"rotational": True})
    assert _statuses(small, "inference") == {"GPU memory": "pass", "GPU fp16 compute": "pass",
                                             "RAM": "pass", "storage": "warn", "network": "pass"}
    assert _statuses(small, "cv")["GPU bf16 compute"] == "warn"  # L4 121 < RTX 4090 165 TFLOP/s


def test_scenario_unknown_gpu_uses_the_measured_peak_or_skips():
    env = env_of(FakeNvml(gpus=[_gpu(name="NVIDIA Mystery X")]))
    c = check(env, "cv: GPU bf16 compute", None, "cv")
    assert c.status == "skipped" and "NVIDIA Mystery X" in c.detail
    run = run_of(
        env,
        [
            ProbeResult(
                name="matmul",
                status="ok",
                resource="gpu_compute",
                measurements=[
                    m("peak_flops", {"device": "cuda:0", "dtype": "bf16"}, 400e12, "FLOP/s")
                ],
            )
        ],
    )
    c = check(env, "cv: GPU bf16 compute", run, "cv")
    assert c.status == "pass" and "measured matmul peak" in c.measured
    with pytest.raises(ValueError, match="choose from cv"):
        run_checks(env, None, "llm")


# --- the whole, the report section and the CLI -------------------------------------------------

def test_fixture_run_checks_and_report_section():
    from benchbench.core import results

    run = results.load(FIXTURE)
    checks = run_checks(run.environment, run, "cv")
    assert not doctor.failed(checks)
    assert all(c.detail for c in checks if c.status == "skipped")
    lines = doctor_report.section(checks)
    assert lines[0] == "## Configuration doctor"
    assert "| check | status | measured | threshold | source | fix |" in lines
    with pytest.raises(ValueError):
        Check("x", "ok", "", "", "")


def bb(*args):
    return subprocess.run([sys.executable, "-m", "benchbench", *args], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)


def test_cli_doctor_here_and_json():
    out = bb("doctor")
    assert out.returncode in (0, 1), out.stderr
    assert "| check | status |" in out.stdout and "nothing was changed" in out.stdout
    js = bb("doctor", "--json", "--scenario", "inference")
    data = json.loads(js.stdout)
    assert js.returncode == (1 if data["summary"]["fail"] else 0)
    assert {c["status"] for c in data["checks"]} <= set(doctor.STATUSES)
    assert any(c["name"] == "inference: RAM" for c in data["checks"])
    gpu_rows = [c for c in data["checks"] if (c["detail"] or "").startswith("no GPU is visible")]
    if gpu_rows:  # a machine without a GPU: the table says it once, the JSON keeps every row
        assert len(gpu_rows) >= 8 and out.stdout.count("No GPU visible:") == 1


def test_cli_doctor_on_a_saved_run_and_bad_input(tmp_path):
    out = bb("doctor", str(FIXTURE))
    assert out.returncode == 0 and "the run in" in out.stdout
    corrupt = tmp_path / "results.json"
    corrupt.write_text('{"schema_version": 1, "probes": [')
    for args, needle in [((str(tmp_path / "missing.json"),), "no such file"),
                         ((str(tmp_path),), "corrupt JSON"),
                         (("--scenario", "llm"), "invalid choice")]:
        bad = bb("doctor", *args)
        assert bad.returncode == 2 and needle in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and not bad.stdout


def test_doctor_imports_without_torch_or_nvml():
    code = ("import sys\nsys.modules['torch'] = sys.modules['pynvml'] = None\n"
            "from benchbench.doctor import checks as doctor\nfrom benchbench.core import results\n"
            "from benchbench.reports import doctor as r\n"
            f"run = results.load({str(FIXTURE)!r})\n"
            "print(len(r.section(doctor.run_checks(run.environment, run, 'cv'))) > 3)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


# --- read-only: no setter, no nvidia-smi that changes a thing ------------------------------------

_CHANGING = re.compile(r"nvidia-smi\b.*\s-(pm|pl|lgc|ac|r|c|mig|e)\b")
_RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen", "execv",
            "execvp", "execl", "execlp", "spawnv", "getoutput", "getstatusoutput"}


def nvidia_smi_invocations(source: str) -> list[str]:
    """nvidia-smi commands the code would run: arguments of subprocess/os calls and argv lists.
    A string that is only printed as advice is neither."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in _RUNNERS:
                text = " ".join(c.value for a in node.args for c in ast.walk(a)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str))
                if "nvidia-smi" in text:
                    found.append(text)
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("nvidia-smi"):
                found.append(" ".join(str(getattr(e, "value", "?")) for e in node.elts))
    return found


def test_the_scanner_tells_a_command_from_advice():
    assert nvidia_smi_invocations('import subprocess\nsubprocess.run(["nvidia-smi", "-pm", "1"])')
    assert nvidia_smi_invocations('import os\nos.system("sudo nvidia-smi -pl 300")')
    assert not nvidia_smi_invocations('fix = "`sudo nvidia-smi -pm 1`"\nprint(fix)')


@pytest.mark.parametrize("path", ["benchbench/doctor/checks.py", "benchbench/doctor/rules.py",
                                  "benchbench/machine/environment.py",
                                  "benchbench/reports/doctor.py"])
def test_nothing_changes_a_setting(path):
    source = (ROOT / path).read_text()
    assert not re.search(r"nvmlDevice(Set|Reset|Clear)", source)
    assert not [c for c in nvidia_smi_invocations(source) if _CHANGING.search(c)]


# --- scenarios answered by the run's own memory_fit and inference ------------------------------

def _simulated_run(profile, *names, gpus=1):
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    p = simulate.PROFILES[profile]
    probes = [ProbeResult(name=n, status="ok", resource="gpu_compute",
                          measurements=simulate.simulate_probe(p, n, False, 60.0).measurements)
              for n in names]
    env = env_of(FakeNvml(gpus=[healthy() for _ in range(gpus)]))
    return RunResult(tool={}, started_at="", environment=env, config={}, argv=[],
                     probes=probes)


def test_nlp_finetune_is_answered_by_the_measured_fit():
    from benchbench.doctor.checks import scenario_checks

    on_h200 = {c.name: c for c in scenario_checks("nlp-finetune", *_env_run(
        _simulated_run("h200", "memory_fit")))}
    fit = on_h200["nlp-finetune: full fine-tune of a 7B model (measured)"]
    assert fit.status == "pass" and fit.measured.startswith("largest on one GPU: 9.0B")
    assert "nlp-finetune: GPU memory" not in on_h200  # the measurement answers, not the name
    # An 80 GB GPU fits 3B alone; over 8 of them ZeRO-3 fits 7B: derived, and said so.
    node = {c.name: c for c in scenario_checks("nlp-finetune", *_env_run(
        _simulated_run("8xh100", "memory_fit", gpus=8)))}
    fit = node["nlp-finetune: full fine-tune of a 7B model (measured)"]
    assert fit.status == "pass" and "with ZeRO-3 over its 8 GPUs up to" in fit.measured
    assert "derived from the measured bytes, not measured" in fit.measured
    # Without a memory_fit, the GPU-memory rule by name stands.
    plain = {c.name for c in scenario_checks("nlp-finetune", *_env_run(
        _simulated_run("h200", "matmul")))}
    assert "nlp-finetune: GPU memory" in plain


def test_inference_is_answered_by_the_measured_serving_rate():
    from benchbench.doctor.checks import scenario_checks

    got = {c.name: c for c in scenario_checks("inference", *_env_run(
        _simulated_run("h200", "inference")))}
    served = got["inference: ResNet50 served within MLPerf's p99 bound (measured)"]
    # Eager bf16 is not counted in TensorRT INT8 T4s: refused, both sides named.
    assert served.status == "pass" and "not compared with MLPerf's T4 (" in served.measured
    assert "bf16 here, INT8 there; PyTorch eager here, TensorRT there" in served.measured
    assert "inference: GPU fp16 compute" not in got


def test_a_serving_rate_whose_search_ran_out_of_time_is_a_lower_bound():
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    # 10 s at 20,000 requests a rate: the simulated server's search stopped before any rate
    # missed the bound: the machine serves at least that. Its T4 comparison is the offline
    # rate's, not the floor's.
    sim = simulate.simulate_probe(simulate.H200, "inference", False, 10.0,
                                  overrides={"loadgen": False, "requests": 20000})
    served = _served_check(sim.measurements)
    rate = next(m for m in sim.measurements if m.metric == "server_throughput").value
    assert served.status == "pass"
    assert served.measured.startswith(f"at least {rate:,.0f} images/s within the bound (224 "
                                      "px, bf16, PyTorch eager")
    assert "simulated server, LoadGen not installed); not compared with MLPerf's T4" in \
        served.measured
    assert "a lower bound: the search's time budget ran out" in served.measured


def test_a_serving_rate_at_another_image_size_is_not_counted_in_t4s():
    """Like with like: MLPerf's T4 figure is at 224 px; a 64 px rate says why it is not
    compared rather than giving a T4 count."""
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", False, 60.0,
                                  overrides={"image_size": 64})
    served = _served_check(sim.measurements)
    assert "T4s at" not in served.measured and "(64 px," in served.measured
    assert ("measured at 64 px, MLPerf's T4 figure is at 224 px") in served.measured


def _served_check(measurements):
    """The inference scenario's measured serving check on a healthy GPU box's run."""
    from benchbench.doctor.checks import scenario_checks

    run = RunResult(tool={}, started_at="", environment=env_of(FakeNvml(gpus=[healthy()])),
                    config={}, argv=[], probes=[ProbeResult(
                        name="inference", status="ok", resource="gpu_compute",
                        measurements=measurements)])
    got = {c.name: c for c in scenario_checks("inference", *_env_run(run))}
    return got["inference: ResNet50 served within MLPerf's p99 bound (measured)"]


def _env_run(run):
    return run.environment, run


def _capped_matmul(low_reasons):
    """A matmul's stored telemetry: 20 busy samples at ~1,500 MHz under the power cap, two of
    them at 1,245 MHz carrying `low_reasons` (a dense GEMM at an H200's 700 W limit)."""
    clocks = [1.5e9] * 20
    reasons = [["power cap"]] * 20
    for i in (7, 13):
        clocks[i], reasons[i] = 1.245e9, low_reasons
    series = {"t": [0.1 * i for i in range(20)],
              "gpus": {"0": {"sm_clock_Hz": clocks, "util": [1.0] * 20, "throttle": reasons}}}
    return {"flags": {"matmul": throttle_flags(series)}, "source": {"gpu": "NVML"},
            "probes": {"matmul": series}}


@pytest.mark.parametrize("low_reasons, status", [
    (["power cap"], "pass"),  # the cap moved the clock: it is held there by design
    ([], "warn"),  # a drop the cap does not explain
    (["power cap", "hw thermal slowdown"], "fail")])
def test_a_clock_drop_under_the_power_cap_at_the_default_limit_passes(low_reasons, status):
    tel = _capped_matmul(low_reasons)
    assert tel["flags"]["matmul"][-1].startswith("GPU 0 SM clock fell to 83% of its busy median")
    env = env_of(FakeNvml(gpus=[healthy()]))  # 700 W, its default
    c = check(env, "clock throttling", run_of(env, telemetry=tel))
    assert c.status == status, (c.measured, c.detail)
    if status == "pass":
        assert c.measured == "none; at its power limit in 2 readings"
        assert c.detail.startswith("held at its power limit, its default of 700 W: the software "
                                   "power cap, no fault alone")
        assert "in 10% of the busy samples, every such sample under the power cap" in c.detail
    else:
        assert "SM clock fell" in c.measured


def test_a_lowered_power_limit_warns_even_when_the_cap_explains_the_clock():
    env = env_of(FakeNvml(gpus=[healthy(power=500000, power_default=700000)]))
    c = check(env, "clock throttling", run_of(env, telemetry=_capped_matmul(["power cap"])))
    assert c.status == "warn"
    assert c.measured == "GPU 0 power limit 500 W, below its default 700 W"
    assert "its default of" not in c.detail  # held at a lowered limit, not at the default


def test_a_later_rounds_drop_is_read_from_its_own_series():
    tel = _capped_matmul(["power cap"])
    series = tel["probes"].pop("matmul")
    tel["rounds"] = {"matmul (round 2)": series}
    tel["flags"]["matmul"] = [f"round 2: {f}" for f in tel["flags"]["matmul"]]
    env = env_of(FakeNvml(gpus=[healthy()]))
    assert check(env, "clock throttling", run_of(env, telemetry=tel)).status == "pass"
    del tel["rounds"]  # no series to read: the drop cannot be put on the cap
    assert check(env, "clock throttling", run_of(env, telemetry=tel)).status == "warn"
