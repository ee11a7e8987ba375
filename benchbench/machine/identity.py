"""Which machine this is: the host name, the DMI product and serial where the kernel lets a
user read them, and the UUIDs of every GPU NVML sees. `history` groups runs by it and `fleet`
refuses two runs of one machine as two nodes.

Read-only: files under `root` only, so a test can hand it a fake /sys tree. The DMI serial
(`product_serial`) is root-only on most kernels (mode 0400): it is then None, and the reason
says so, never a guess. The reading side, with its fallback for runs that predate this
record, is compare/identity.py.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

DMI_DIR = "sys/class/dmi/id"
# What names the machine (vendor, product, serial) and what a firmware update changes (the BIOS
# version and date, for the history's attribution). product_uuid and board_serial are root-only
# too and add nothing the product serial does not.
DMI_FIELDS = ("sys_vendor", "product_name", "product_serial", "bios_version", "bios_date")


def _read(path: Path) -> tuple[str | None, str | None]:
    """(the text, None) or (None, why not)."""
    try:
        return path.read_text(errors="replace").strip() or None, None
    except PermissionError:
        return None, "permission denied (root only)"
    except FileNotFoundError:
        return None, "not in /sys/class/dmi/id"
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return None, "not a file"
        return None, f"cannot read: {exc.strerror}"


def dmi(root: Path = Path("/")) -> tuple[dict[str, str | None], dict[str, str]]:
    """(each DMI field's text or None, why each None field is None)."""
    base = root / DMI_DIR
    if not base.is_dir():
        absent = "no DMI table (/sys/class/dmi/id is absent: a VM or board without SMBIOS)"
        return dict.fromkeys(DMI_FIELDS), dict.fromkeys(DMI_FIELDS, absent)
    values: dict[str, str | None] = {}
    reasons: dict[str, str] = {}
    for name in DMI_FIELDS:
        text, why = _read(base / name)
        values[name] = text
        if why is not None:
            reasons[name] = why
    return values, reasons


def identity(hostname: str | None, gpus: list[dict[str, Any]],
             root: Path = Path("/")) -> dict[str, Any]:
    """The identity record of results.json's environment: host name, DMI strings (with the
    reason for each one missing) and the UUIDs of the GPU records (NVML's: every GPU on the
    machine, whatever CUDA_VISIBLE_DEVICES hides)."""
    values, reasons = dmi(root)
    return {"hostname": hostname, "dmi": values, "dmi_unreadable": reasons,
            "gpu_uuids": [str(g["uuid"]) for g in gpus if g.get("uuid")]}
