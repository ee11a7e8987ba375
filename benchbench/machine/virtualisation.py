"""What this code runs inside: bare metal or a VM, a container, a gVisor sandbox, shared GPUs.

detect() only reads files under `root` (never writes, never runs a command), so a test can
hand it a recorded tree. Every verdict comes with the evidence it rests on, because a wrong
"bare metal" hides a noisy neighbour: the report should let a reader check it. gpu_sharing()
only queries NVML through a module passed in, and each field it cannot read is None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# DMI strings that name a hypervisor product, checked in this order (the first hit names it).
# From systemd's src/basic/virt.c dmi_vendor_table, which is what systemd-detect-virt uses.
# Cloud vendors are separate below: a cloud's bare-metal instances keep the cloud's DMI.
_DMI_HYPERVISORS: tuple[tuple[str, str], ...] = (
    ("VMware", "VMware"),
    ("VMW", "VMware"),
    ("innotek GmbH", "VirtualBox"),
    ("VirtualBox", "VirtualBox"),
    ("Xen", "Xen"),
    ("KVM", "KVM"),
    ("OpenStack", "KVM"),  # OpenStack Nova writes this; its guests run on KVM
    ("KubeVirt", "KVM"),
    ("QEMU", "QEMU"),
    ("Bochs", "Bochs"),
    ("Parallels", "Parallels"),
    ("BHYVE", "bhyve"),
    ("Apple Virtualization", "Apple Virtualization"),
)
_DMI_CLOUDS: tuple[tuple[str, str], ...] = (
    ("Amazon EC2", "Amazon EC2 (Nitro)"),  # Xen-era EC2 guests say "Xen" instead
    ("Google", "Google Compute Engine"),
)
_DMI_FIELDS = ("sys_vendor", "product_name", "bios_vendor", "board_vendor")

# Paravirtual clocksources exist only when the kernel found that hypervisor's interface.
_CLOCKSOURCES = (("kvm-clock", "KVM"), ("hyperv_clocksource", "Microsoft Hyper-V"),
                 ("xen", "Xen"))

# gVisor fakes its uname version with this fixed string (pkg/sentry/syscalls/linux/linux64.go,
# _LINUX_VERSION) and boots "/vmlinuz-4.4.0-gvisor" on its fake /proc/cmdline.
_GVISOR_VERSION = "#1 SMP Sun Jan 10 15:06:54 PST 2016"

# /proc/1/cgroup path fragments, most specific first: a Kubernetes pod whose runtime is docker
# or containerd shows both, and the orchestrator is the more useful answer.
_CGROUP_RUNTIMES = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                    ("containerd", "containerd"), ("lxc", "lxc"))

# nvml.h nvmlGpuVirtualizationMode_t
_VIRT_MODES = {
    0: "none (bare metal or passthrough)",
    1: "passthrough",
    2: "vGPU guest",
    3: "vGPU host",
    4: "vSGA host",
}
_NVML_ERROR_NOT_FOUND = 6  # nvml.h: an empty MIG slot answers this; it is not a failure


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text(errors="replace")
    except (OSError, ValueError):  # absent, unreadable, or a directory in a fake tree
        return None


def _cpu_hypervisor_flag(cpuinfo: str | None) -> bool | None:
    """True/False from the x86 `flags` lines; None when there are none (ARM has `Features`,
    which carries no such flag, and a missing /proc/cpuinfo says nothing)."""
    flags = [line.split(":", 1)[1].split() for line in (cpuinfo or "").splitlines()
             if line.startswith("flags") and ":" in line]
    if not flags:
        return None
    return any("hypervisor" in f for f in flags)


def _dmi(root: Path) -> dict[str, str]:
    out = {}
    for name in _DMI_FIELDS:
        text = _read(root, f"sys/class/dmi/id/{name}")
        if text and text.strip():
            out[name] = text.strip()
    return out


def _match(dmi: Mapping[str, str], table: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """(hypervisor, evidence) for the first table entry found in any DMI field."""
    for needle, name in table:
        for field in _DMI_FIELDS:
            if needle.lower() in dmi.get(field, "").lower():
                return name, f"DMI {field} {dmi[field]}"
    return None


def _hyperv(dmi: Mapping[str, str]) -> tuple[str, str] | None:
    # A Surface laptop also says "Microsoft Corporation"; only Hyper-V guests add this product.
    if ("microsoft" in dmi.get("sys_vendor", "").lower()
            and "virtual machine" in dmi.get("product_name", "").lower()):
        return "Microsoft Hyper-V", f"DMI product_name {dmi['product_name']}"
    return None


def _clocksource(root: Path) -> tuple[str, str] | None:
    text = _read(root, "sys/devices/system/clocksource/clocksource0/available_clocksource")
    for needle, name in _CLOCKSOURCES:
        if text and any(s.startswith(needle) for s in text.split()):
            return name, f"clocksource {needle}"
    return None


def _container(root: Path, environ: Mapping[str, str] | None) -> tuple[str | None, list[str]]:
    evidence = []
    found = None
    if environ and environ.get("KUBERNETES_SERVICE_HOST"):
        found = "kubernetes"
        evidence.append("env KUBERNETES_SERVICE_HOST")
    cgroup = _read(root, "proc/1/cgroup") or ""
    for needle, runtime in _CGROUP_RUNTIMES:
        if needle in cgroup:
            found = found or runtime
            evidence.append(f"/proc/1/cgroup mentions {needle}")
            break
    for rel, runtime in ((".dockerenv", "docker"), ("run/.containerenv", "podman")):
        if (root / rel).exists():
            found = found or runtime
            evidence.append(f"/{rel} exists")
    # systemd-nspawn, LXC and podman write the manager's name here for systemd inside.
    manager = (_read(root, "run/systemd/container") or "").strip()
    if manager:
        known = {"docker": "docker", "podman": "podman", "lxc": "lxc", "lxc-libvirt": "lxc"}
        found = found or known.get(manager, "container (unknown runtime)")
        evidence.append(f"/run/systemd/container says {manager}")
    # Limit: with cgroup namespaces (cgroup v2 default) /proc/1/cgroup reads "0::/" inside
    # every container, and /proc/1/environ's container= needs privileges, so a runtime that
    # leaves no marker file (plain runc, crun) goes unseen here.
    return found, evidence


def _sandbox(root: Path) -> tuple[str | None, list[str]]:
    """gVisor only. Its /proc is its own: the cmdline and version strings are fakes that a
    real kernel never shows. The cgroup test is the weakest: it only fires where the runtime
    names its cgroup after runsc. A 9p root is NOT used as a sign: Kata Containers and other
    VM sandboxes mount the root that way too."""
    cmdline = _read(root, "proc/cmdline") or ""
    if "gvisor" in cmdline.lower():
        return "gVisor", ["/proc/cmdline names a gvisor kernel"]
    version = _read(root, "proc/version") or ""
    if "gvisor" in version.lower() or _GVISOR_VERSION in version:
        return "gVisor", ["/proc/version is gVisor's fixed fake"]
    for rel in ("proc/self/cgroup", "proc/1/cgroup"):
        if "runsc" in (_read(root, rel) or ""):
            return "gVisor", [f"/{rel} mentions runsc"]
    return None, []


def detect(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{"kind": "bare metal" | "vm" | "unknown", "hypervisor": str | None,
    "container": str | None, "sandbox": "gVisor" | None, "evidence": [str, ...],
    "reason": str | None}; reason completes "skipped, because …" when kind is "unknown"."""
    root = Path(root)
    evidence: list[str] = []
    flag = _cpu_hypervisor_flag(_read(root, "proc/cpuinfo"))
    if flag is not None:
        evidence.append("cpuinfo flag hypervisor" if flag else "cpuinfo has no hypervisor flag")
    dmi = _dmi(root)
    xen_type = (_read(root, "sys/hypervisor/type") or "").strip()

    named = _hyperv(dmi) or _match(dmi, _DMI_HYPERVISORS)
    cloud = _match(dmi, _DMI_CLOUDS)
    clock = _clocksource(root)
    if named and named[0] == "QEMU" and clock and clock[0] == "KVM":
        named = ("KVM", f"{named[1]} with {clock[1]}")  # QEMU with KVM acceleration, not TCG
    # A cloud's metal instance keeps the cloud's DMI but has no hypervisor: its product says so.
    metal = "metal" in dmi.get("product_name", "").lower()

    kind, hypervisor = "unknown", None
    if flag:
        kind = "vm"
        hit = cloud or named or ((xen_type.capitalize(), f"/sys/hypervisor/type {xen_type}")
                                 if xen_type else None) or clock
        hypervisor = hit[0] if hit else None
        evidence += [hit[1]] if hit else []
    elif xen_type == "xen":
        # Xen PV guests and dom0 run on Xen without the flag; dom0 is the host but still shares
        # the CPUs with the guests, so the benchmark sees a VM's conditions.
        kind, hypervisor = "vm", "Xen"
        evidence.append("/sys/hypervisor/type xen")
    elif named:
        # The flag can be hidden (e.g. QEMU's -cpu host,-hypervisor); the DMI still names it.
        kind, hypervisor = "vm", named[0]
        evidence.append(named[1] + ("" if flag is None else " (hypervisor flag hidden)"))
    elif flag is False:
        kind = "bare metal"
        if cloud:
            evidence.append(f"{cloud[1]} without the hypervisor flag: a metal instance")
    elif cloud and not metal:
        kind, hypervisor = "vm", cloud[0]  # no x86 flags (ARM): trust the cloud's DMI
        evidence.append(cloud[1])
    elif cloud:
        kind = "bare metal"
        evidence.append(f"DMI product_name {dmi['product_name']}")
    elif clock:
        kind, hypervisor = "vm", clock[0]
        evidence.append(clock[1])

    # Inside gVisor the files above are gVisor's own rendering of the host's, so kind and
    # hypervisor describe the host only as far as gVisor passes its CPU flags through.
    container, c_evidence = _container(root, environ)
    sandbox, s_evidence = _sandbox(root)
    reason = None
    if kind == "unknown":
        reason = ("neither /proc/cpuinfo's x86 flags, the DMI strings, /sys/hypervisor nor a "
                  "paravirtual clocksource said whether a hypervisor is present")
    return {"kind": kind, "hypervisor": hypervisor, "container": container, "sandbox": sandbox,
            "evidence": evidence + c_evidence + s_evidence, "reason": reason}


# --- GPUs ------------------------------------------------------------------------------------

def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NVML raises NotSupported, NoPermission, ... per query
        return None


def _mig_devices(nvml: Any, handle: Any, current: bool | None) -> int | None:
    if current is False:
        return 0  # MIG off: the slots are empty by definition
    slots = _call(nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    if slots is None:
        return None
    count = 0
    for index in range(int(slots)):
        try:
            nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except Exception as e:  # the module is passed in, so its error classes are not importable
            if getattr(e, "value", None) == _NVML_ERROR_NOT_FOUND:
                continue
            return None
        count += 1
    return count


def gpu_sharing(nvml: Any, handles: Sequence[Any]) -> list[dict[str, Any]]:
    """Per GPU, in handle order: {"index": int, "virtualization_mode": str | None,
    "mig_mode": {"current": bool | None, "pending": bool | None} | None,
    "mig_devices": int | None}. `nvml` is pynvml or anything with its function names."""
    out = []
    for index, handle in enumerate(handles):
        code = _call(nvml.nvmlDeviceGetVirtualizationMode, handle)
        mode = None if code is None else _VIRT_MODES.get(int(code), f"unknown mode {code}")
        mig = _call(lambda h=handle: tuple(nvml.nvmlDeviceGetMigMode(h)))  # pynvml: a list
        mig_mode = None
        if mig is not None and len(mig) == 2:
            mig_mode = {"current": bool(mig[0]), "pending": bool(mig[1])}
        current = mig_mode["current"] if mig_mode else None
        out.append({"index": index, "virtualization_mode": mode, "mig_mode": mig_mode,
                    "mig_devices": _mig_devices(nvml, handle, current)})
    return out
