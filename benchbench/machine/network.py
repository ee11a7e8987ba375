"""Network facts from sysfs, read-only: Ethernet NIC speeds and InfiniBand port rates.

Functions take a sysfs root so that tests point them at recorded trees.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # a NIC whose link is down refuses to report its speed (EINVAL)
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def net_interfaces(sys_root: Path = Path("/sys")) -> dict[str, Any]:
    """Physical NICs and their link rate from /sys/class/net/*/speed (Mb/s). Loopback and
    virtual devices (no `device` link: bridges, veths, bonds) are left out; a NIC whose speed
    is unknown (-1, or unreadable while the link is down) is named in 'unknown_speed'."""
    found: list[dict[str, Any]] = []
    unknown: list[str] = []
    for nic in sorted((sys_root / "class" / "net").glob("*")):
        if nic.name == "lo" or not (nic / "device").exists():
            continue
        speed = _int(_read(nic / "speed"))
        if speed is None or speed <= 0:
            unknown.append(nic.name)
            continue
        found.append({"name": nic.name, "rate": speed * 1e6 / 8,
                      "operstate": _read(nic / "operstate")})
    return {"interfaces": found, "unknown_speed": unknown}


def infiniband_ports(sys_root: Path = Path("/sys")) -> list[dict[str, Any]]:
    """RDMA ports from /sys/class/infiniband/*/ports/*: rate ("400 Gb/sec (4X NDR)"), state
    ("4: ACTIVE") and link layer (InfiniBand, or Ethernet for RoCE)."""
    ports = []
    for port in sorted((sys_root / "class" / "infiniband").glob("*/ports/*")):
        text = _read(port / "rate")
        m = re.match(r"\s*([\d.]+)\s*Gb/sec", text or "")
        state = _read(port / "state")
        ports.append({"device": port.parent.parent.name, "port": _int(port.name),
                      "rate": float(m.group(1)) * 1e9 / 8 if m else None, "rate_text": text,
                      "state": state.partition(":")[2].strip() if state else None,
                      "link_layer": _read(port / "link_layer")})
    return ports


def network_snapshot(sys_root: Path = Path("/sys")) -> dict[str, Any]:
    return {**net_interfaces(sys_root), "infiniband": infiniband_ports(sys_root)}
