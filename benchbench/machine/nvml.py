"""NVML, read only: loading it, and the per-GPU queries that the environment snapshot, the
topology and the probes share. Every query is best effort: a field NVML does not support, or a
library too old to have it, reads as None. Nothing here changes a setting."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any


def best_effort(fn: Callable[..., Any]) -> Any:
    """Best effort: an unsupported or failing query gives None, never an exception."""
    try:
        return fn()
    except Exception:  # NVML raises NotSupported and friends per field; sysfs may be absent
        return None


def as_text(x: Any) -> Any:
    return x.decode() if isinstance(x, bytes) else x


def load_nvml() -> Any:
    import pynvml

    return pynvml


def handle_by_uuid(nvml: Any, uuid: str) -> Any:
    """The NVML handle of the GPU with this UUID (torch gives it without NVML's "GPU-"), or
    None."""
    full = uuid if str(uuid).upper().startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    return best_effort(lambda: nvml.nvmlDeviceGetHandleByUUID(full))


def _opened(uuid: str | None) -> tuple[Any, Any]:
    """(NVML, the handle of the GPU with this UUID), or (None, None) where NVML cannot read it
    (no library, no driver, no such UUID). It initialises NVML (counted by NVML itself, and
    left open for the process's reads)."""
    if not uuid:
        return None, None
    nvml = best_effort(load_nvml)
    if nvml is None or best_effort(lambda: nvml.nvmlInit() or True) is None:
        return None, None
    h = handle_by_uuid(nvml, uuid)
    return (nvml, h) if h is not None else (None, None)


def _reader(uuid: str | None, query: Callable[[Any, Any], Any], scale: float
            ) -> Callable[[], float | None] | None:
    """A function that answers `query(nvml, handle) * scale` now (None where a read fails), or
    None where NVML cannot read this GPU or the first read fails."""
    nvml, h = _opened(uuid)
    if h is None or best_effort(lambda: query(nvml, h)) is None:
        return None

    def read() -> float | None:
        got = best_effort(lambda: query(nvml, h))
        return None if got is None else float(got) * scale

    return read


def sm_clock_reader(uuid: str | None) -> Callable[[], float | None] | None:
    """A function that reads the GPU's SM clock now, in Hz (None where a read fails), or None
    where NVML cannot read this GPU. Read only."""
    return _reader(uuid, lambda nvml, h: nvml.nvmlDeviceGetClockInfo(
        h, getattr(nvml, "NVML_CLOCK_SM", 1)), 1e6)  # NVML answers in MHz


def energy_reader(uuid: str | None) -> Callable[[], float | None] | None:
    """A function that reads the GPU's total energy counter now, in J (None where a read
    fails), or None where NVML cannot read it: nvmlDeviceGetTotalEnergyConsumption, the mJ
    the board used since the driver loaded (Volta and later). Two reads give the energy of
    the work between them, whatever the power did. Read only."""
    return _reader(uuid, lambda nvml, h: nvml.nvmlDeviceGetTotalEnergyConsumption(h), 1e-3)


def cpu_affinity(nvml: Any, h: Any, ncpus: int) -> list[int] | None:
    words = max(1, math.ceil(ncpus / 64))
    mask = best_effort(lambda: nvml.nvmlDeviceGetCpuAffinity(h, words))
    if mask is None:
        return None
    return [w * 64 + b for w, word in enumerate(mask) for b in range(64) if word >> b & 1]


def numa_node(nvml: Any, h: Any, bus_id: str | None) -> int | None:
    node = best_effort(lambda: nvml.nvmlDeviceGetNumaNodeId(h))
    if node is None and bus_id:
        # NVML's bus id has an 8-digit domain; sysfs uses 4.
        sys_id = bus_id.lower()[-12:] if len(bus_id) > 12 else bus_id.lower()
        node = best_effort(
            lambda: int(Path(f"/sys/bus/pci/devices/{sys_id}/numa_node").read_text()))
    return node if node is None or node >= 0 else None


def pcie_link(nvml: Any, h: Any) -> dict[str, Any]:
    """Current and maximum PCIe generation and width. The current generation drops at idle,
    so a caller that wants the working link reads this while a copy is in flight."""
    return {
        "pcie_gen_current": best_effort(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_width_current": best_effort(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "pcie_gen_max": best_effort(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_width_max": best_effort(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
    }


# nvmlClocksEventReason* bits (nvml.h; "ClocksThrottleReason" before NVML 12.2). Which of them
# slow training is the doctor's call, not this module's.
CLOCK_EVENT_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                    0x100: "display_clock_setting"}


def clock_event_names(mask: int | None) -> list[str] | None:
    """The names of the bits set in an NVML clocks-event mask; an unnamed bit as 'bit_0x...'."""
    if mask is None:
        return None
    return [CLOCK_EVENT_BITS.get(1 << b, f"bit_{1 << b:#x}") for b in range(64) if mask >> b & 1]


def clock_events(nvml: Any, h: Any) -> list[str] | None:
    for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"):  # the older pynvml spelling
        fn = getattr(nvml, name, None)
        mask = best_effort(lambda f=fn: f(h)) if fn else None
        if mask is not None:
            return clock_event_names(mask)
    return None


def memory_errors(nvml: Any, h: Any) -> dict[str, Any]:
    """Uncorrected ECC counts, retired pages (before A100) and remapped rows (A100 and later).
    A GPU without ECC, or of the other generation, answers NotSupported: None."""
    unc = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile, aggregate = (getattr(nvml, "NVML_VOLATILE_ECC", 0),
                           getattr(nvml, "NVML_AGGREGATE_ECC", 1))
    sbe = getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    dbe = getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    pending = best_effort(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h))
    rows = best_effort(lambda: nvml.nvmlDeviceGetRemappedRows(h))
    return {
        "ecc_uncorrected_volatile": best_effort(
            lambda: nvml.nvmlDeviceGetTotalEccErrors(h, unc, volatile)),
        "ecc_uncorrected_aggregate": best_effort(
            lambda: nvml.nvmlDeviceGetTotalEccErrors(h, unc, aggregate)),
        "retired_pages_double_bit": best_effort(
            lambda: len(nvml.nvmlDeviceGetRetiredPages(h, dbe))),
        "retired_pages_single_bit": best_effort(
            lambda: len(nvml.nvmlDeviceGetRetiredPages(h, sbe))),
        "retired_pages_pending": None if pending is None else bool(pending),
        "remapped_rows": None if rows is None else {
            "correctable": rows[0], "uncorrectable": rows[1], "pending": bool(rows[2]),
            "failure": bool(rows[3])},
    }
