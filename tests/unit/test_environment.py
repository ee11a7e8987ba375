from fake_nvml import FakeNvml

from benchbench.machine import environment


def test_gpu_snapshot_replays_recorded_nvml():
    nvml = FakeNvml()
    info, reason = environment.gpu_snapshot(nvml)
    assert reason is None
    assert info["driver"] == "550.54.15" and info["cuda_driver"] == "12.4"
    g0, g1 = info["gpus"]
    assert g0["name"] == "NVIDIA H100 80GB HBM3"
    assert g0["pci_bus_id"] == "00000000:18:00.0"  # bytes decoded
    assert g0["capability"] == "9.0"
    assert (g0["pcie_gen_current"], g0["pcie_gen_max"], g0["pcie_width_max"]) == (5, 5, 16)
    assert g0["persistence_mode"] is True and g0["ecc_current"] is True
    assert g0["sm_clock_max"] == 1980e6  # Hz, not MHz
    assert g0["power_limit"] == 700.0  # W, not mW
    assert g0["numa_node"] == 0
    assert g0["cpu_affinity"] == list(range(16))
    assert g0["other_processes"] == []
    # idle link trained down, ECC query unsupported, a foreign process holding memory
    assert g1["pcie_gen_current"] == 1
    assert g1["ecc_current"] is None and g1["persistence_mode"] is False
    assert g1["cpu_affinity"] == list(range(16, 32))
    assert g1["other_processes"] == [{"pid": 4242, "memory_used": 1 << 30}]
    assert nvml.calls == ["shutdown"]


def test_gpu_snapshot_without_nvml_gives_reason():
    info, reason = environment.gpu_snapshot(
        FakeNvml(fail_init=RuntimeError("NVML Shared Library Not Found")))
    assert info == {"gpus": []}
    assert reason.startswith("NVML unavailable: NVML Shared Library Not Found (")
    assert "libnvidia-ml.so" in reason and "nvidia-ml-py" in reason  # the install hint


def test_snapshot_falls_back_to_torch_gpus(monkeypatch):
    monkeypatch.setattr(environment, "gpu_snapshot",
                        lambda **kw: ({"gpus": []}, "NVML unavailable"))
    facts = {"cuda_available": True, "gpus": [{"index": 0, "name": "NVIDIA L4"}]}
    env = environment.snapshot(".", facts)
    assert env["gpus"] == facts["gpus"]
    assert "torch.cuda" in env["gpus_reason"]


def test_snapshot_on_this_machine(tmp_path):
    env = environment.snapshot(tmp_path, {"cuda_available": False, "gpus": []})
    host = env["host"]
    assert host["cores_usable"] >= 1 and host["memory_total"] > 0
    assert env["storage"]["path"] == str(tmp_path.resolve())
    assert env["storage"]["fstype"]


def test_cgroup_limits(tmp_path):
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert environment.cgroup_cpu_limit(tmp_path) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert environment.cgroup_cpu_limit(tmp_path) == 1.5
    assert environment.usable_cores(tmp_path) <= 2
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert environment.cgroup_cpu_limit(v1) is None


def test_llc_sums_unique_last_level_caches(tmp_path):
    for cpu, shared in [(0, "0-1"), (1, "0-1"), (2, "2-3"), (3, "2-3")]:
        for idx, (level, size, sh) in enumerate([(2, "512K", str(cpu)), (3, "32768K", shared)]):
            d = tmp_path / f"cpu{cpu}" / "cache" / f"index{idx}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "size").write_text(f"{size}\n")
            (d / "shared_cpu_list").write_text(f"{sh}\n")
    assert environment.llc_bytes(tmp_path) == 2 * 32 * 1024**2


def test_cudnn_version_format():
    assert environment.cudnn_version(8902) == "8.9.2"
    assert environment.cudnn_version(90100) == "9.1.0"
    assert environment.cudnn_version(None) is None


def test_gpu_snapshot_records_how_each_gpu_is_shared():
    from fake_nvml import _gpu

    nvml = FakeNvml(gpus=[
        _gpu(),  # the recorded H100 outside MIG
        _gpu(virt_mode=1, mig_mode=(1, 1), mig_devices=[0, 1, 2]),  # passthrough, 3 slices
        _gpu(virt_mode=2, mig_mode=None, mig_slots=None),  # a vGPU guest: MIG unsupported
    ])
    a, b, c = environment.gpu_snapshot(nvml)[0]["gpus"]
    assert (a["virtualization_mode"], a["mig_mode"], a["mig_devices"]) == (
        "none (bare metal or passthrough)", {"current": False, "pending": False}, 0)
    assert (b["virtualization_mode"], b["mig_mode"], b["mig_devices"]) == (
        "passthrough", {"current": True, "pending": True}, 3)
    assert (c["virtualization_mode"], c["mig_mode"], c["mig_devices"]) == (
        "vGPU guest", None, None)
    assert "index" in a and a["index"] == 0  # the sharing record's own index is not merged


def test_snapshot_records_the_virtualisation(tmp_path):
    env = environment.snapshot(tmp_path, {"cuda_available": False, "gpus": []})
    virt = env["virtualisation"]
    assert virt["kind"] in ("bare metal", "vm", "unknown")
    assert (virt["reason"] is None) == (virt["kind"] != "unknown")
    assert all(isinstance(e, str) for e in virt["evidence"])


def test_package_versions_name_the_installed_dali_wheel_and_its_version(monkeypatch):
    installed = {"nvidia-dali-cuda120": "1.52", "nvidia-dali-cuda110": "1.30"}
    monkeypatch.setattr(environment, "_version", lambda name: installed.get(name))
    v = environment.package_versions()
    assert (v["nvidia_dali_wheel"], v["nvidia_dali"]) == ("nvidia-dali-cuda120", "1.52")
    monkeypatch.setattr(environment, "_version", lambda name: None)
    v = environment.package_versions()
    assert v["nvidia_dali_wheel"] is None and v["nvidia_dali"] is None


def test_torch_facts_unpickle_without_importing_torch():
    """The facts travel from the worker to the run's own process, which does not import torch:
    a torch type in them (torch.__version__ is a TorchVersion) would import it there, ~3 s of
    a quick run on 2 cores."""
    import pickle
    import subprocess
    import sys

    facts = environment.torch_facts()
    assert type(facts["torch"]) is str
    code = ("import pickle, sys; pickle.loads(sys.stdin.buffer.read()); "
            "print('torch' in sys.modules)")
    got = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(facts),
                         capture_output=True, check=True)
    assert got.stdout.strip() == b"False"
