"""Measures CPU steal: the share of a VM's CPU time the hypervisor gave to someone else.

Read /proc/stat before and after a probe; steal_fraction() of the pair says how much of the
interval the host's other tenants took. A data-loading probe on a VM whose vCPUs are stolen
looks like a slow CPU, so the report must say so. Counters are in jiffies (USER_HZ ticks), and
only their ratio is used, so the tick rate never matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Above 2% steal, a CPU-bound probe's result moves by more than its own run-to-run noise.
STEAL_FLAG = 0.02

# proc(5): the fields of the "cpu" line, in order. steal arrived in 2.6.11, guest in 2.6.24,
# guest_nice in 2.6.33; a missing trailing field reads as 0.
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
           "guest_nice")
_STEAL_FIELDS = _FIELDS.index("steal") + 1


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in jiffies since boot, summed over all CPUs."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0
    guest: int = 0
    guest_nice: int = 0
    fields: int = len(_FIELDS)  # how many the kernel wrote: under 8 means steal is unknown

    @property
    def total(self) -> int:
        # guest and guest_nice are already inside user and nice (kernel/sched/cputime.c).
        return (self.user + self.nice + self.system + self.idle + self.iowait + self.irq
                + self.softirq + self.steal)


def parse_proc_stat(text: str) -> CpuTimes | None:
    """The aggregate line of /proc/stat text, or None when it has none."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                values = [int(v) for v in parts[1:len(_FIELDS) + 1]]
            except ValueError:
                return None
            if len(values) < 4:  # user nice system idle have been there since 2.4
                return None
            return CpuTimes(**dict(zip(_FIELDS, values, strict=False)), fields=len(values))
    return None


def read_proc_stat(root: Path = Path("/")) -> CpuTimes | None:
    """CPU times from root/proc/stat; None when it cannot be read or parsed."""
    try:
        text = (Path(root) / "proc" / "stat").read_text()
    except (OSError, ValueError):
        return None
    return parse_proc_stat(text)


def steal_fraction(before: CpuTimes, after: CpuTimes) -> float | None:
    """Steal over the interval as a ratio of all CPU time (0..1); None when the kernel has no
    steal counter, no time passed, or the counters went backwards (a reboot in between)."""
    if min(before.fields, after.fields) < _STEAL_FIELDS:
        return None
    total = after.total - before.total
    steal = after.steal - before.steal
    if total <= 0 or steal < 0:
        return None
    return min(1.0, steal / total)


def flag(probe: str, fraction: float | None) -> str | None:
    """A sentence for the report when steal exceeded STEAL_FLAG during `probe`, else None."""
    if fraction is None or fraction <= STEAL_FLAG:
        return None
    return f"another tenant took {fraction:.1%} of this VM's CPU time while {probe} ran"


def unavailable_reason(before: CpuTimes | None, after: CpuTimes | None) -> str | None:
    """Completes "skipped, because …" when steal_fraction cannot say anything, else None."""
    if before is None or after is None:
        return "/proc/stat could not be read (not Linux, or /proc is not mounted)"
    if min(before.fields, after.fields) < _STEAL_FIELDS:
        return "this kernel's /proc/stat has no steal column (it arrived in Linux 2.6.11)"
    if after.total - before.total <= 0:
        return "no CPU time passed between the two readings of /proc/stat"
    if after.steal < before.steal:
        return "the steal counter went backwards between the two readings (a reboot?)"
    return None
