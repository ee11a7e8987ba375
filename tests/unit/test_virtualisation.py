"""Virtualisation detection on recorded /proc, DMI and /sys trees (bare metal, clouds, KVM,
containers, gVisor), and GPU sharing (vGPU, MIG) on replayed NVML answers."""

import os
from types import SimpleNamespace

import pytest
from machines import HOST_CGROUP_V2, MACHINES, build

from benchbench.machine.virtualisation import detect, gpu_sharing


@pytest.mark.parametrize("machine, kind, hypervisor", [
    ("aws_nitro_vm", "vm", "Amazon EC2 (Nitro)"),
    ("aws_metal", "bare metal", None),
    ("aws_graviton_vm", "vm", "Amazon EC2 (Nitro)"),
    ("aws_graviton_metal", "bare metal", None),
    ("aws_xen_era", "vm", "Xen"),
    ("gce", "vm", "Google Compute Engine"),
    ("azure", "vm", "Microsoft Hyper-V"),
    ("surface_laptop", "bare metal", None),
    ("vmware", "vm", "VMware"),
    ("virtualbox", "vm", "VirtualBox"),  # VirtualBox's KVM paravirt clock must not win
    ("qemu_kvm", "vm", "KVM"),
    ("qemu_tcg", "vm", "QEMU"),
    ("qemu_flag_hidden", "vm", "QEMU"),
    ("xen_pv", "vm", "Xen"),
    ("wsl2", "vm", "Microsoft Hyper-V"),
    ("dgx_host", "bare metal", None),
    ("arm_no_dmi", "unknown", None),
    ("sandbox", "vm", "KVM"),
])
def test_kind_and_hypervisor(tmp_path, machine, kind, hypervisor):
    got = detect(build(tmp_path, MACHINES[machine]))
    assert (got["kind"], got["hypervisor"]) == (kind, hypervisor)
    assert (got["reason"] is None) == (kind != "unknown")
    assert got["evidence"] or kind == "unknown", "every verdict says what it rests on"


def test_evidence_names_what_was_read(tmp_path):
    got = detect(build(tmp_path, MACHINES["qemu_kvm"]))
    assert got["evidence"][0] == "cpuinfo flag hypervisor"
    assert "DMI sys_vendor QEMU with clocksource kvm-clock" in got["evidence"]
    metal = detect(build(tmp_path / "m", MACHINES["aws_metal"]))
    assert "cpuinfo has no hypervisor flag" in metal["evidence"]
    assert any("metal instance" in e for e in metal["evidence"])
    hidden = detect(build(tmp_path / "h", MACHINES["qemu_flag_hidden"]))
    assert any("hypervisor flag hidden" in e for e in hidden["evidence"])


def test_empty_root_is_unknown_with_a_reason(tmp_path):
    got = detect(tmp_path)
    assert got == {"kind": "unknown", "hypervisor": None, "container": None, "sandbox": None,
                   "evidence": [], "reason": got["reason"]}
    assert "hypervisor" in got["reason"]


def test_unreadable_files_are_skipped_not_raised(tmp_path):
    # A directory where a file should be makes open() fail even as root.
    (tmp_path / "proc" / "cpuinfo").mkdir(parents=True)
    (tmp_path / "sys/class/dmi/id/sys_vendor").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").mkdir(parents=True)
    assert detect(tmp_path)["kind"] == "unknown"


@pytest.mark.parametrize("files, environ, container", [
    ({".dockerenv": ""}, None, "docker"),
    ({"run/.containerenv": "engine=\"podman-4.9.3\"\n"}, None, "podman"),
    ({"proc/1/cgroup": "12:memory:/kubepods/burstable/pod5f1c/3b9e\n"}, None, "kubernetes"),
    # A pod on a docker runtime: the orchestrator is the more useful answer.
    ({".dockerenv": "", "proc/1/cgroup": "4:cpu:/kubepods/besteffort/podab/docker-1f.scope\n"},
     None, "kubernetes"),
    ({"proc/1/cgroup": "0::/\n"}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "kubernetes"),
    ({"proc/1/cgroup": "11:devices:/lxc/web01\n"}, None, "lxc"),
    ({"proc/1/cgroup": "0::/system.slice/containerd.service/k8s.io/9a\n"}, None, "containerd"),
    ({"proc/1/cgroup": "1:name=systemd:/machine.slice/libpod-7c1e.scope\n"}, None, "podman"),
    ({"run/systemd/container": "systemd-nspawn\n"}, None, "container (unknown runtime)"),
    ({"run/systemd/container": "lxc\n"}, None, "lxc"),
    ({"proc/1/cgroup": HOST_CGROUP_V2}, {"PATH": "/usr/bin"}, None),
    ({"proc/1/cgroup": "0::/\n"}, None, None),  # cgroup namespace: no marker, not guessed
])
def test_container(tmp_path, files, environ, container):
    got = detect(build(tmp_path, files), environ=environ)
    assert got["container"] == container
    if container:
        assert any(e.startswith(("/", "env")) for e in got["evidence"])


@pytest.mark.parametrize("files, sandbox", [
    ({"proc/cmdline": "BOOT_IMAGE=/vmlinuz-4.4.0-gvisor quiet\n"}, "gVisor"),
    ({"proc/version": "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n"}, "gVisor"),
    ({"proc/version": "Linux version 4.19.0-gvisor #1 SMP Sun Jan 10 15:06:54 PST 2016\n"},
     "gVisor"),
    ({"proc/self/cgroup": "1:cpu:/runsc/sandbox-1\n"}, "gVisor"),
    ({"proc/version": MACHINES["sandbox"]["proc/version"],
      "proc/cmdline": "console=ttyS0 quiet\n"}, None),
    # A real Ubuntu 4.4.0 kernel is not gVisor.
    ({"proc/version": "Linux version 4.4.0-210-generic (buildd@lgw01-amd64-009) (gcc version "
                      "5.4.0) #242-Ubuntu SMP Fri Apr 16 09:57:56 UTC 2021\n"}, None),
])
def test_sandbox(tmp_path, files, sandbox):
    assert detect(build(tmp_path, files))["sandbox"] == sandbox


def test_detect_only_reads(tmp_path):
    root = build(tmp_path, MACHINES["sandbox"])
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}
    detect(root, environ={"KUBERNETES_SERVICE_HOST": "x"})
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")} == before


def test_live_machine_types():
    got = detect(environ=os.environ)
    assert got["kind"] in ("bare metal", "vm", "unknown")
    assert got["hypervisor"] is None or isinstance(got["hypervisor"], str)
    assert got["container"] is None or isinstance(got["container"], str)
    assert got["sandbox"] in (None, "gVisor")
    assert all(isinstance(e, str) for e in got["evidence"])


# --- GPUs ------------------------------------------------------------------------------------

class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value  # pynvml keeps the NVML_ERROR_* code here


NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND = 3, 4, 6


class FakeNvml:
    """pynvml's four MIG/virtualisation calls, answering from a dict per handle; a value that
    is an exception is raised."""

    def __init__(self, gpus):
        self.gpus = gpus

    def _answer(self, handle, key):
        value = self.gpus[handle][key]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetVirtualizationMode(self, h):  # noqa: N802 - pynvml's names
        return self._answer(h, "virt")

    def nvmlDeviceGetMigMode(self, h):  # noqa: N802
        return self._answer(h, "mig")

    def nvmlDeviceGetMaxMigDeviceCount(self, h):  # noqa: N802
        return self._answer(h, "slots")

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):  # noqa: N802
        if i not in self._answer(h, "mig_devices"):
            raise NVMLError(NOT_FOUND)
        if self.gpus[h].get("mig_error"):
            raise self.gpus[h]["mig_error"]
        return SimpleNamespace(parent=h, index=i)


H100_BARE = dict(virt=0, mig=[0, 0], slots=7, mig_devices=[])
A100_MIG = dict(virt=1, mig=[1, 1], slots=7, mig_devices=[0, 1, 2])  # 3 x 2g.10gb, passthrough
VGPU_GUEST = dict(virt=2, mig=NVMLError(NOT_SUPPORTED), slots=NVMLError(NOT_SUPPORTED),
                  mig_devices=[])
RTX_4090 = dict(virt=NVMLError(NOT_SUPPORTED), mig=NVMLError(NOT_SUPPORTED),
                slots=NVMLError(NOT_SUPPORTED), mig_devices=[])


def test_gpu_sharing_maps_each_field():
    nvml = FakeNvml({"a": H100_BARE, "b": A100_MIG, "c": VGPU_GUEST, "d": RTX_4090,
                     "e": dict(virt=3, mig=(0, 1), slots=7, mig_devices=[]),
                     "f": dict(virt=4, mig=[0, 0], slots=0, mig_devices=[]),
                     "g": dict(virt=9, mig=[0, 0], slots=0, mig_devices=[])})
    got = gpu_sharing(nvml, ["a", "b", "c", "d", "e", "f", "g"])
    assert [g["index"] for g in got] == list(range(7))
    assert [g["virtualization_mode"] for g in got] == [
        "none (bare metal or passthrough)", "passthrough", "vGPU guest", None, "vGPU host",
        "vSGA host", "unknown mode 9"]
    assert got[0]["mig_mode"] == {"current": False, "pending": False}
    assert got[1]["mig_mode"] == {"current": True, "pending": True}
    assert got[4]["mig_mode"] == {"current": False, "pending": True}  # enabled at next reset
    assert got[2]["mig_mode"] is None and got[3]["mig_mode"] is None
    assert [g["mig_devices"] for g in got] == [0, 3, None, None, 0, 0, 0]


def test_mig_slot_errors_other_than_not_found_give_none():
    gpu = dict(A100_MIG, mig_error=NVMLError(NO_PERMISSION))
    assert gpu_sharing(FakeNvml({"x": gpu}), ["x"])[0]["mig_devices"] is None
    gpu = dict(A100_MIG, mig=NVMLError(NOT_SUPPORTED))  # mode unknown: the slots still count
    assert gpu_sharing(FakeNvml({"x": gpu}), ["x"])[0]["mig_devices"] == 3


def test_gpu_sharing_no_gpus():
    assert gpu_sharing(FakeNvml({}), []) == []


def test_live_gpu_sharing_types():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except Exception as e:  # no driver on a CPU-only machine
        pytest.skip(f"NVML unavailable: {e}")
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        for g in gpu_sharing(pynvml, handles):
            assert g["virtualization_mode"] is None or isinstance(g["virtualization_mode"], str)
            assert g["mig_devices"] is None or isinstance(g["mig_devices"], int)
    finally:
        pynvml.nvmlShutdown()
