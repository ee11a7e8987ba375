"""Whether two runs are the same machine: the identity the environment snapshot records
(machine/identity.py), and for runs from before it was recorded, the host name and the GPU
UUIDs of the GPU records, with the CPU model.

The strongest fact both runs have decides: the DMI serial, else the GPU UUIDs (one shared GPU
is the same machine: a GPU swap keeps the others), else the host name with the CPU model (a
host name alone is weak: cloud VMs reuse names, so the CPU model must not differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.gpus import normal_uuid

# Serials that firmware vendors leave in place of one (dmidecode's and fwupd's lists): they
# name no machine, and many boards share them.
PLACEHOLDER_SERIALS = frozenset({
    "", "0", "00000000", "0123456789", "1234567890", "123456789", "default string", "none",
    "not applicable", "not specified", "n/a", "na", "oem", "o.e.m.", "system serial number",
    "to be filled by o.e.m.", "to be filled by oem", "unknown", "serial", "chassis serial number",
})


@dataclass(frozen=True)
class Identity:
    hostname: str | None
    serial: str | None  # "vendor product serial" when a real serial was readable
    gpu_uuids: frozenset[str]
    cpu_model: str | None
    recorded: bool  # False: an older run, its identity rebuilt from host name and GPU UUIDs

    @property
    def name(self) -> str:
        return self.hostname or (self.serial or "unknown machine")

    @property
    def basis(self) -> str:
        """What identifies it: the strongest fact it has."""
        return ("DMI serial" if self.serial else "GPU UUIDs" if self.gpu_uuids else
                "host name")


def _serial(dmi: dict[str, Any]) -> str | None:
    serial = str(dmi.get("product_serial") or "").strip()
    if serial.lower() in PLACEHOLDER_SERIALS:
        return None
    return " ".join(str(dmi.get(k) or "?") for k in ("sys_vendor", "product_name")) + " " + serial


def of(env: dict[str, Any]) -> Identity:
    """A run's (or a node's) identity from its environment snapshot."""
    raw = env.get("host")
    host: dict[str, Any] = raw if isinstance(raw, dict) else {}
    rec = env.get("identity")
    cpu = host.get("cpu_model")
    if isinstance(rec, dict):
        dmi = rec.get("dmi")
        dmi = dmi if isinstance(dmi, dict) else {}
        uuids = {normal_uuid(u) for u in rec.get("gpu_uuids") or []}
        return Identity(rec.get("hostname") or host.get("hostname"), _serial(dmi),
                        frozenset(u for u in uuids if u), cpu, True)
    uuids = {normal_uuid(g.get("uuid")) for g in env.get("gpus") or [] if isinstance(g, dict)}
    return Identity(host.get("hostname"), None, frozenset(u for u in uuids if u), cpu, False)


def same_machine(a: Identity, b: Identity) -> bool:
    if a.serial and b.serial:
        return a.serial == b.serial
    if a.gpu_uuids and b.gpu_uuids:
        return bool(a.gpu_uuids & b.gpu_uuids)
    return (a.hostname is not None and a.hostname == b.hostname
            and (a.cpu_model is None or b.cpu_model is None or a.cpu_model == b.cpu_model))


def why_same(a: Identity, b: Identity) -> str:
    """What made same_machine say yes, in words."""
    if a.serial and b.serial:
        return f"the same DMI serial ({a.serial})"
    if a.gpu_uuids and b.gpu_uuids:
        return "the same GPU UUIDs"
    return "the same host name and CPU model"


def machines(ids: Sequence[Identity]) -> list[list[int]]:
    """The indices of `ids` grouped by machine (same_machine, joined transitively), each group
    in index order, the groups in order of their first member. Distinct identities are few
    (one per machine), so they are compared pairwise once each, not the runs."""
    distinct: dict[Identity, list[int]] = {}
    for i, ident in enumerate(ids):
        distinct.setdefault(ident, []).append(i)
    keys = list(distinct)
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            if same_machine(keys[i], keys[j]):
                parent[root(j)] = root(i)
    grouped: dict[int, list[int]] = {}
    for k, ident in enumerate(keys):
        grouped.setdefault(root(k), []).extend(distinct[ident])
    return sorted((sorted(g) for g in grouped.values()), key=lambda g: g[0])
