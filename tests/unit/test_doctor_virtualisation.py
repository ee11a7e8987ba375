"""The doctor's virtualisation rule: a VM whose neighbours took CPU time, or a vGPU or MIG GPU,
warns with the buyer's guide; bare metal passes; an unknown kind, or a VM without a steal
measurement, is skipped with the reason."""

import pytest
from fake_nvml import FakeNvml, _gpu

from benchbench.core.results import RunResult
from benchbench.doctor.checks import run_checks
from benchbench.doctor.rules import GUIDE, PREFER_METAL, check_virtualisation
from benchbench.machine import environment

KVM = {"kind": "vm", "hypervisor": "KVM", "container": None, "sandbox": None,
       "evidence": ["cpuinfo flag hypervisor", "clocksource kvm-clock"], "reason": None}
METAL = {**KVM, "kind": "bare metal", "hypervisor": None,
         "evidence": ["cpuinfo has no hypervisor flag"]}
UNKNOWN = {**KVM, "kind": "unknown", "hypervisor": None, "evidence": [],
           "reason": "neither /proc/cpuinfo's x86 flags nor the DMI strings said"}


def env_of(virt, nvml=None):
    return {"virtualisation": virt,
            "gpus": environment.gpu_snapshot(nvml or FakeNvml())[0]["gpus"]}


def run_with(steal):
    """A run whose telemetry saw `steal` ({probe: fraction or None}) in each probe."""
    probes = {p: {"t": [], "gpus": {}, "steal_fraction": f,
                  "steal_reason": None if f is not None else "no steal column"}
              for p, f in steal.items()}
    return RunResult(tool={}, started_at="t", environment={}, config={}, argv=[],
                     extra={"telemetry": {"probes": probes, "flags": {}}})


def test_a_vm_whose_neighbours_took_cpu_time_warns_with_the_guide():
    c = check_virtualisation(env_of(KVM), run_with({"matmul": 0.004, "dataloader": 0.041}))
    assert c.status == "warn" and c.source == GUIDE
    assert c.fix == PREFER_METAL
    assert "prefer passthrough or bare-metal instances" in c.fix
    assert c.measured == "vm (KVM); CPU steal up to 4.1% (during dataloader)"
    assert c.detail == "another tenant took CPU time during dataloader (4.1%)"


def test_a_vm_with_little_steal_passes_and_says_so():
    c = check_virtualisation(env_of(KVM), run_with({"matmul": 0.02, "dataloader": 0.001}))
    assert c.status == "pass"  # 2% is the limit, not over it
    assert "no probe saw steal above 2%" in c.detail


@pytest.mark.parametrize("gpu, shown", [
    (dict(virt_mode=2, mig_mode=None, mig_slots=None), "GPU 1: vGPU guest"),
    (dict(virt_mode=1, mig_mode=(1, 1), mig_devices=[0, 1]), "GPU 1: MIG on"),
])
def test_a_shared_gpu_warns_even_on_bare_metal(gpu, shown):
    nvml = FakeNvml(gpus=[_gpu(), _gpu(uuid="GPU-b", **gpu)])
    c = check_virtualisation(env_of(METAL, nvml), None)
    assert c.status == "warn" and shown in c.measured
    assert "a GPU is shared (vGPU or MIG)" in c.detail


def test_bare_metal_passes():
    c = check_virtualisation(env_of(METAL), run_with({"matmul": 0.0}))
    assert (c.status, c.measured) == ("pass", "bare metal; CPU steal up to 0.0% (during matmul)")
    assert check_virtualisation(env_of(METAL), None).status == "pass"


def test_unknown_or_unmeasured_is_skipped_with_the_reason():
    c = check_virtualisation(env_of(UNKNOWN), None)
    assert c.status == "skipped" and "DMI strings said" in c.label
    c = check_virtualisation(env_of(KVM), None)
    assert c.status == "skipped" and "no run was given to measure CPU steal" in c.detail
    c = check_virtualisation(env_of(KVM), run_with({"matmul": None}))
    assert c.status == "skipped" and "no steal column" in c.detail
    c = check_virtualisation({"gpus": []}, None)
    assert c.status == "skipped" and "older benchbench" in c.detail


def test_run_checks_includes_it():
    names = [c.name for c in run_checks(env_of(KVM), run_with({"dataloader": 0.05}))]
    assert "virtualisation and neighbours" in names
