"""At what SM clock a GPU measurement ran, and what it did per GHz of that clock. Pure
functions over a RunResult.

A data-center GPU under dense load sits at its power limit (NVML's software power cap), and
there its SM clock falls below its maximum: while the third H200's matmuls ran, its telemetry
read 1,095-1,500 MHz of 1,980 at the 700 W limit, and its dtypes read 63-76% of the
datasheet's dense figures (fp16 9% under bf16, unexplained by the run itself). Each
timed sample of `ctx.time_op` on a GPU carries the SM clock NVML read as it began and as it
ended (context "sm_clock_Hz", one per sample, probes/api.py), so a figure below its reference
can say whether the clock or the work per clock is short: the samples' rate per GHz is what
the kernel does per cycle, whatever the clock. Two dtypes whose rates per GHz agree, but not
their rates, differ in their clocks: in the power their data draws, not in their kernels.
Only arithmetic (FLOP/s) is read so: the SM clock paces it, where a copy's bytes are paced by
the memory clock or a link (a host-to-device copy leaves the SMs idle, at whatever clock
idling gives them) and an inference batch by both; their samples keep their clocks in
results.json, unread. Nothing here is estimated: a measurement whose clocks were not read has
no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchbench.core import units as fmt
from benchbench.core.gpus import gpu_for
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.stats import median

MIN_CLOCKED = 3  # samples with a clock: fewer give no median worth a row
BELOW_MAX = 0.9  # a median clock under this share of the GPU's maximum is said to be held down


@dataclass(frozen=True)
class AtClock:
    clock_Hz: float  # the median SM clock of the samples
    low_Hz: float  # the lowest and highest sample clock
    high_Hz: float
    max_Hz: float | None  # the GPU's maximum SM clock (NVML, the environment), or None
    per_GHz: float  # the median of the samples' values per GHz of their own clock
    samples: int  # samples with a clock

    @property
    def share(self) -> float | None:
        """The median clock as a share of the GPU's maximum, or None where that is unknown."""
        return self.clock_Hz / self.max_Hz if self.max_Hz else None

    @property
    def held_down(self) -> bool:
        return self.share is not None and self.share < BELOW_MAX


def at_clock(run: RunResult, m: Measurement) -> AtClock | None:
    """The clock facts of a GPU's arithmetic whose samples carry their SM clock, or None."""
    pairs, device = _pairs([m]), device_of(m)
    if len(pairs) < MIN_CLOCKED or device is None:
        return None
    per = [v / c * 1e9 for v, c in pairs]
    hz = [c for _, c in pairs]
    record = gpu_for(run.environment, device)
    top = (record or {}).get("sm_clock_max")
    return AtClock(median(hz), min(hz), max(hz),
                   float(top) if isinstance(top, (int, float)) and top > 0 else None,
                   median(per), len(pairs))


def device_of(m: Measurement) -> str | None:
    """The GPU a measurement ran on ('cuda:N', its key's device), or None."""
    device = str(m.key.get("device") or "")
    return device if device.startswith("cuda:") else None


def per_cycle(m: Measurement) -> bool:
    """Whether the SM clock paces the measurement, so that its rate per GHz of it is work per
    cycle: arithmetic (FLOP/s). The module's docstring says why nothing else."""
    return m.unit == "FLOP/s"


def behind(pr: ProbeResult, m: Measurement) -> Measurement:
    """The measurement whose samples a summary row stands for: a peak over sizes
    (statistic "max", context "best_<field>") stands for its best size's measurement; any
    other measurement for itself."""
    best = next(((k.removeprefix("best_"), v) for k, v in m.context.items()
                 if k.startswith("best_")), None)
    if m.statistic != "max" or best is None:
        return m
    field, value = best
    return next((x for x in pr.measurements if x.statistic != "max"
                 and x.key.get(field) == value
                 and all(x.key.get(k) == v for k, v in m.key.items())), m)


def probe_clocks(run: RunResult, pr: ProbeResult) -> list[tuple[Measurement, AtClock]]:
    """Each measurement of the probe whose samples carry their clock, with its facts (the
    summaries over sizes left out: their sizes are among these)."""
    out = []
    for m in pr.measurements:
        got = at_clock(run, m) if m.statistic != "max" else None
        if got is not None:
            out.append((m, got))
    return out


def pooled(ms: Sequence[Measurement]) -> tuple[float, float] | None:
    """(the median SM clock in Hz, the median rate per GHz of it) over every clocked sample of
    these measurements (one figure's runs and rounds on one side of a comparison), or None
    with fewer than MIN_CLOCKED such samples, or for a peak over sizes, whose samples are the
    sizes' medians."""
    pairs = _pairs([m for m in ms if m.statistic != "max"])
    if len(pairs) < MIN_CLOCKED:
        return None
    return median([c for _, c in pairs]), median([v / c * 1e9 for v, c in pairs])


def _pairs(ms: Sequence[Measurement]) -> list[tuple[float, float]]:
    """(value, SM clock in Hz) of every sample of these measurements that carries its clock;
    a measurement whose clocks do not line up with its samples gives none."""
    out = []
    for m in ms:
        got = m.context.get("sm_clock_Hz") if per_cycle(m) else None
        if isinstance(got, list) and len(got) == len(m.samples):
            out += [(v, float(c)) for v, c in zip(m.samples, got, strict=True)
                    if isinstance(c, (int, float)) and c > 0]
    return out


def moved(before: tuple[float, float], after: tuple[float, float], change_pct: float) -> str:
    """The clause a changed figure gets where both sides read their clock: how far the clock
    and the rate per GHz of it moved, and which of the two carried the change, where one did
    (carried)."""
    clock, per = shifts(before, after)
    which = carried(clock, per, change_pct)
    return (f"SM clock {before[0] / 1e6:,.0f} → {after[0] / 1e6:,.0f} MHz "
            f"({fmt.signed_percent(clock)}) while the samples ran, per GHz of it "
            f"{fmt.signed_percent(per)}"
            + (f": {which}" if which else ""))


def shifts(before: tuple[float, float], after: tuple[float, float]) -> tuple[float, float]:
    """(how far the clock moved, how far the rate per GHz of it moved), in percent."""
    return (after[0] / before[0] - 1) * 100, (after[1] / before[1] - 1) * 100


def carried(clock_pct: float, per_pct: float, change_pct: float) -> str | None:
    """Which of the clock and the work per cycle carried a figure's change: the one that moved
    by at least half as much as the figure, where the other moved by under half; None where
    neither or both did."""
    half = abs(change_pct) / 2
    if abs(per_pct) < half <= abs(clock_pct):
        return "the clock moved, not the work per cycle"
    if abs(clock_pct) < half <= abs(per_pct):
        return "the work per cycle moved, not the clock"
    return None

