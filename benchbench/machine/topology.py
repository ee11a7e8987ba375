"""How the GPUs are joined: NVLink, NVSwitch or PCIe per pair, and each path's spec rate.

Read-only NVML queries, like environment.py: nothing here calls a setter. `nvml` is the pynvml
module or a recorded stand-in. Any query may fail (NotSupported, NoPermission, a function an old
pynvml lacks): the answer becomes None, never an exception. Rates are per direction in B/s.
"""

from __future__ import annotations

import re
from typing import Any

from benchbench.core.peaks import pcie_rate
from benchbench.machine.nvml import as_text, best_effort, pcie_link

G = 1e9

# nvmlDeviceGetNvLinkVersion answers an nvmlNvlinkVersion_t code, not the generation: an A100
# answers 5 (NVLink 3.1). NVML API reference, enum nvmlNvlinkVersion_t; hwloc issue #658.
_NVLINK_VERSION = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0",
                   8: "6.0"}

# Per-link, per-direction NVLink rate by generation, from NVIDIA's per-GPU totals (which count
# both directions): P100 datasheet 160 GB/s over 4 links; V100 datasheet 300 GB/s over 6 links;
# A100 datasheet 600 GB/s over 12 links; H100/H200 datasheets 900 GB/s over 18 links; NVIDIA
# NVLink page, Blackwell: 18 links of 100 GB/s = 1.8 TB/s. NVLink 6 is left out: not verified.
_NVLINK_LINK_RATE = {"1": 20 * G, "2": 25 * G, "3": 25 * G, "4": 25 * G, "5": 50 * G}

# GA102 boards report the same NVLink 3.x code as the A100 but run their 4 links slower: the
# RTX A6000 datasheet gives 112.5 GB/s bidirectional for the 4-link bridge (14.0625 GB/s per link
# and direction); the RTX 3090, A5000, A4500 and A40 use the same GA102 link.
_GA102_NVLINK = re.compile(r"RTX 3090|RTX A6000|RTX A5000|RTX A4500|\bA40\b", re.IGNORECASE)
_GA102_LINK_RATE = 112.5 * G / 2 / 4

# Per-link, per-direction rate by GPU architecture (compute capability major), from the same
# datasheet totals: Pascal NVLink 1, Volta NVLink 2, Ampere NVLink 3 and Hopper NVLink 4 run
# 20, 25, 25 and 25 GB/s a link and direction, Blackwell's NVLink 5 50. The architecture is the
# first authority: NVML's version code has been seen to read one generation off (a Hopper
# reading 5.0 would double its links to 900 GB/s a direction, and every all-reduce would then
# look half as efficient as it is).
_ARCH_LINK_RATE = {6: 20 * G, 7: 25 * G, 8: 25 * G, 9: 25 * G, 10: 50 * G}

# nvmlGpuTopologyLevel_t (NVML_TOPOLOGY_*): the closest common ancestor of two GPUs.
_PCIE_LEVEL = {0: "same board", 10: "single PCIe switch", 20: "multiple PCIe switches",
               30: "host bridge", 40: "NUMA node (CPU)",
               50: "across CPU sockets (SMP interconnect)"}
_PCIE_PHRASE = {0: "on the same board", 10: "through a single PCIe switch",
                20: "through multiple PCIe switches", 30: "through the host bridge",
                40: "through the CPU (same NUMA node)", 50: "across CPU sockets"}

# nvmlGpuP2PStatus_t (NVML_P2P_STATUS_*).
_P2P_STATUS = {0: "ok", 1: "chipset not supported", 2: "GPU not supported",
               3: "IOH topology not supported", 4: "disabled by regkey", 5: "not supported",
               6: "unknown"}

_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
_REMOTE_GPU, _REMOTE_SWITCH = 0, 2  # NVML_NVLINK_DEVICE_TYPE_*; 1 is an IBM POWER9 NPU


def _const(nvml: Any, name: str, default: int) -> int:
    value = getattr(nvml, name, default)
    # pynvml spells NVML_P2P_CAPS_INDEX_READ = 0, (a one-element tuple) that ctypes rejects.
    return value[0] if isinstance(value, tuple) else value


def _bus_id(raw: Any) -> str | None:
    """One spelling for a PCI bus id: NVML gives an 8-digit domain, sysfs and NCCL 4."""
    text = as_text(raw)
    if not text:
        return None
    text = text.strip("\x00 ").lower()
    m = re.fullmatch(r"(?:([0-9a-f]+):)?([0-9a-f]+):([0-9a-f]+)\.([0-7])", text)
    if not m:
        return text
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def nvlink_version(code: int | None) -> str | None:
    """The NVLink generation ("4.0") for NVML's version code (6), None if unknown."""
    return _NVLINK_VERSION.get(code) if code is not None else None


def nvlink_link_rate(version: str | None, gpu_name: str | None = None,
                     capability: str | None = None) -> float | None:
    """Per-direction rate of one NVLink in B/s: from the GPU's architecture (its compute
    capability, "9.0") where known, else from NVML's NVLink generation ("4.0")."""
    rate, _ = nvlink_rate_and_basis(version, gpu_name, capability)
    return rate


def nvlink_rate_and_basis(version: str | None, gpu_name: str | None = None,
                          capability: str | None = None) -> tuple[float | None, str | None]:
    """(per-link, per-direction rate in B/s, what it was derived from)."""
    major = int(str(capability).split(".")[0]) if capability and str(capability)[0].isdigit() \
        else None
    ga102 = bool(gpu_name and _GA102_NVLINK.search(gpu_name))
    if major is not None and (major in _ARCH_LINK_RATE or ga102):
        if ga102 or str(capability) == "8.6":
            return _GA102_LINK_RATE, f"GA102 NVLink bridge (compute capability {capability})"
        return _ARCH_LINK_RATE[major], f"GPU architecture (compute capability {capability})"
    if not version:
        return None, None
    if version.startswith("3") and ga102:
        return _GA102_LINK_RATE, f"NVML NVLink version {version} on a GA102 board"
    rate = _NVLINK_LINK_RATE.get(version.split(".")[0])
    return rate, (f"NVML NVLink version {version}" if rate else None)


def _is_not_supported(exc: Exception) -> bool:
    return (getattr(exc, "value", None) == _NOT_SUPPORTED
            or type(exc).__name__.endswith("NotSupported"))


def _remote_bus(nvml: Any, h: Any, link: int) -> str | None:
    for name in ("nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"):
        fn = getattr(nvml, name, None)
        bus = best_effort(lambda f=fn: _bus_id(f(h, link).busId)) if fn else None
        if bus:
            return bus
    return None


def _nvlinks(nvml: Any, h: Any, own: dict[str, int]) -> dict[str, Any]:
    """Active links of one GPU and where each goes; every field None when NVML cannot say."""
    unknown = {"nvlink_version": None, "nvlink_version_code": None, "nvlinks_active": None,
               "nvlink_peers": None, "nvswitch_links": None}
    state = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
    if state is None:  # a pynvml too old to have the NVLink queries
        return unknown
    enabled = _const(nvml, "NVML_FEATURE_ENABLED", 1)
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    code, active, switch = None, 0, 0
    peers: dict[str, int] = {}
    for link in range(_const(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            is_active = state(h, link)
        except Exception as exc:  # past the GPU's last link, or no NVLink at all
            if link == 0 and not _is_not_supported(exc):
                return unknown  # NoPermission or the like: absence is not proven
            break
        if is_active != enabled:
            continue
        active += 1
        if code is None:
            code = best_effort(lambda lk=link: nvml.nvmlDeviceGetNvLinkVersion(h, lk))
        kind = best_effort(lambda lk=link: remote_type(h, lk)) if remote_type else None
        bus = _remote_bus(nvml, h, link)
        if bus in own and kind in (None, _REMOTE_GPU):
            peer = str(own[bus])  # str keys: JSON object keys come back as str anyway
            peers[peer] = peers.get(peer, 0) + 1
        elif kind == _REMOTE_SWITCH or (kind is None and bus not in own):
            # PyTorch's NVLinkDetector counts switch links the same way; without a device type,
            # a link whose far end is none of the GPUs goes to an NVSwitch.
            switch += 1
    return {"nvlink_version": nvlink_version(code), "nvlink_version_code": code,
            "nvlinks_active": active, "nvlink_peers": peers, "nvswitch_links": switch}


def _p2p(nvml: Any, a: Any, b: Any, index: str, default: int) -> str | None:
    fn = getattr(nvml, "nvmlDeviceGetP2PStatus", None)
    status = best_effort(lambda: fn(a, b, _const(nvml, index, default))) if fn else None
    return None if status is None else _P2P_STATUS.get(status, f"status {status}")


def _pcie(nvml: Any, a: Any, b: Any, la: dict[str, Any], lb: dict[str, Any]
          ) -> tuple[str | None, str, float | None]:
    fn = getattr(nvml, "nvmlDeviceGetTopologyCommonAncestor", None)
    level = best_effort(lambda: fn(a, b)) if fn else None
    gens = [la["pcie_gen_max"], lb["pcie_gen_max"]]
    widths = [la["pcie_width_max"], lb["pcie_width_max"]]
    gen = min(gens) if None not in gens else None  # the slower end sets the pace
    width = min(widths) if None not in widths else None
    name = "PCIe" + (f" Gen{gen}" if gen else "") + (f" x{width}" if width else "")
    if level in _PCIE_PHRASE:
        name += " " + _PCIE_PHRASE[level]
    return (_PCIE_LEVEL.get(level) if level is not None else None), name, pcie_rate(gen, width)


def _pair(nvml: Any, i: int, j: int, handles: list[Any], gpus: list[dict[str, Any]],
          local: list[dict[str, Any]]) -> dict[str, Any]:
    ga, gb = gpus[i], gpus[j]
    a, b = handles[i], handles[j]
    p2p_read = _p2p(nvml, a, b, "NVML_P2P_CAPS_INDEX_READ", 0)
    p2p_nvlink = _p2p(nvml, a, b, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
    pcie_level, pcie_name, pcie_bw = _pcie(nvml, a, b, local[i], local[j])
    direct = None
    if ga["nvlink_peers"] is not None or gb["nvlink_peers"] is not None:
        direct = max((ga["nvlink_peers"] or {}).get(str(j), 0),
                     (gb["nvlink_peers"] or {}).get(str(i), 0))
    # Both ends on a switch is not enough: an NVSwitch partition can keep them apart, and then
    # NVML says NVLink P2P is not supported. None: the links could not be read.
    switch_links = [ga["nvswitch_links"], gb["nvswitch_links"]]
    via_switch = (None if None in switch_links
                  else all(switch_links) and p2p_nvlink in (None, "ok"))
    rates = [local[i]["link_rate"], local[j]["link_rate"]]
    rate = min(rates) if None not in rates else None
    if direct:
        path, bw = f"NVLink ×{direct}", direct * rate if rate else None
    elif via_switch:
        n = min(ga["nvswitch_links"], gb["nvswitch_links"])
        path, bw = f"NVLink ×{n} via NVSwitch", n * rate if rate else None
    elif p2p_nvlink == "ok":  # links unreadable (old pynvml), yet NVML says P2P runs over NVLink
        path, bw = "NVLink (link count unknown)", None
    elif direct is None and p2p_nvlink is None:
        path, bw = "unknown (NVLink not readable)", None
    else:
        path, bw = pcie_name, pcie_bw
    return {"a": i, "b": j, "nvlinks": direct, "via_nvswitch": via_switch,
            "p2p_read": p2p_read, "p2p_nvlink": p2p_nvlink, "pcie_path": pcie_level,
            "path": path, "per_direction": bw}


def gpu_topology(nvml: Any, handles: list[Any]) -> dict[str, Any]:
    """{"gpus": per GPU NVLink facts, "pairs": one entry per pair i<j}. JSON-able."""
    own = {}
    for i, h in enumerate(handles):
        bus = best_effort(lambda h=h: _bus_id(nvml.nvmlDeviceGetPciInfo(h).busId))
        if bus:
            own[bus] = i
    gpus, local = [], []  # local: what the pairs need but the GPU records already hold
    for i, h in enumerate(handles):
        links = _nvlinks(nvml, h, own)
        name = as_text(best_effort(lambda h=h: nvml.nvmlDeviceGetName(h)))
        cc = best_effort(lambda h=h: nvml.nvmlDeviceGetCudaComputeCapability(h))
        capability = f"{cc[0]}.{cc[1]}" if cc else None
        n = links["nvlinks_active"]
        rate, basis = nvlink_rate_and_basis(links["nvlink_version"], name, capability) \
            if n else (None, None)
        per_direction: float | None = 0.0 if n == 0 else n * rate if rate else None
        gpus.append({"index": i, **links, "nvlink_link_rate": rate, "nvlink_rate_basis": basis,
                     "nvlink_per_direction": per_direction})
        local.append({"link_rate": rate, **pcie_link(nvml, h)})
    pairs = [_pair(nvml, i, j, handles, gpus, local)
             for i in range(len(handles)) for j in range(i + 1, len(handles))]
    return {"gpus": gpus, "pairs": pairs}


def link_for(topology: dict[str, Any] | None, gpu_count: int) -> dict[str, Any] | None:
    """The link an all-reduce over the first `gpu_count` GPUs runs over: its slowest pair.

    {"a", "b", "path", "per_direction"}; per_direction is None when any pair's rate is unknown,
    since the slowest link then cannot be named. None for one GPU or a missing pair.
    """
    if not topology or gpu_count < 2:
        return None
    pairs = [p for p in topology.get("pairs", []) if p["a"] < gpu_count and p["b"] < gpu_count]
    if len(pairs) != gpu_count * (gpu_count - 1) // 2:
        return None
    unknown = [p for p in pairs if p["per_direction"] is None]
    slowest = unknown[0] if unknown else min(pairs, key=lambda p: p["per_direction"])
    return {k: slowest[k] for k in ("a", "b", "path", "per_direction")}
