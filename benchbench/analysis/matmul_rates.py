"""The one matmul figure per GPU and dtype that a run is judged by, and the basis it stands on.

A GPU at its power limit runs a 20 ms burst at a higher clock than it holds for a second, and
the matmul probe's peak_flops is the best of its rounds' medians: on one H200 two rounds read
692 and 724 TFLOP/s while five seconds of the same matmul held 674. So the headline, the
health line, the published references and mamfu all read one figure, the sustained one:

1. the matmul probe's sustained_flops: the best size timed back to back for about a second;
2. else (runs before it) the stability probe's sustained_flops, where it ran that dtype;
3. else the median of every timed burst at the best size, named so (else the burst peak).

The burst peak stays beside it, named "burst peak". Pure functions over a RunResult.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchbench.core import units as fmt
from benchbench.core.results import Measurement, RunResult


@dataclass(frozen=True)
class MatmulRate:
    value: float  # FLOP/s
    sustained: bool  # timed back to back for seconds, not bursts
    basis: str  # "sustained 1.0 s at n=8192", "median of 7 bursts at n=8192 (…)"
    burst_peak: float | None  # matmul peak_flops: the best round's median at its best size
    measurement: Measurement  # the samples behind `value`
    dtype: str  # the dtype it was measured in (mamfu may borrow an equal-rated one's)


def _find(run: RunResult, probe: str, metric: str, device: str, dtype: str
          ) -> list[Measurement]:
    pr = run.probe(probe)
    if pr is None or pr.status != "ok":
        return []
    return [m for m in pr.measurements if m.metric == metric
            and m.key.get("device") == device and m.key.get("dtype") == dtype]


def _seconds(m: Measurement) -> float | None:
    s = m.context.get("seconds")
    return float(s) if isinstance(s, (int, float)) else None


def _sustained(m: Measurement, who: str) -> str:
    s = _seconds(m)
    over = f" {s:.1f} s" if s is not None else ""
    return f"sustained{over}{who} at n={m.key.get('size')}, median of {len(m.samples)} windows"


def rate(run: RunResult, device: str, dtype: str) -> MatmulRate | None:
    """The figure of the module docstring for one GPU (or the CPU) and dtype, or None."""
    peaks = _find(run, "matmul", "peak_flops", device, dtype)
    burst = peaks[0].value if peaks else None
    own = _find(run, "matmul", "sustained_flops", device, dtype)
    if own:
        m = max(own, key=lambda x: x.value)
        return MatmulRate(m.value, True, _sustained(m, ""), burst, m, dtype)
    stability = _find(run, "stability", "sustained_flops", device, dtype)
    if stability:
        m = stability[0]
        return MatmulRate(m.value, True, _sustained(m, " (the stability probe)"), burst, m,
                          dtype)
    if not peaks:
        return None
    n = peaks[0].context.get("best_size")
    at = [m for m in _find(run, "matmul", "flops", device, dtype) if m.key.get("size") == n]
    if not at:
        return MatmulRate(peaks[0].value, False, "burst peak; not timed sustained in this run",
                          None, peaks[0], dtype)
    m = at[0]
    return MatmulRate(m.value, False, f"median of {len(m.samples)} bursts at n={n}; not timed "
                      "sustained in this run", burst, m, dtype)


def equal_rated(run: RunResult, device: str, dtype: str,
                datasheet: dict[str, float | None]) -> MatmulRate | None:
    """The sustained figure of this dtype, else of one the datasheet rates equal to it (bf16
    and fp16 on Hopper: their tensor cores do as many of each a cycle), so that two dtypes'
    shares rest on one clock basis, not on bursts that ran at different clocks; else this
    dtype's figure as rate() gives it."""
    own = rate(run, device, dtype)
    if own is not None and own.sustained:
        return own
    for other in ("bf16", "fp16"):
        if other == dtype or datasheet.get(other) is None or \
                datasheet.get(other) != datasheet.get(dtype):
            continue
        got = rate(run, device, other)
        if got is not None and got.sustained:
            return got
    return own


def basis(r: MatmulRate) -> str:
    """'sustained 5.0 s (the stability probe) at n=4096, median of 49 windows; burst peak
    724 TFLOP/s': how the figure was timed, and the burst peak beside it."""
    peak = f"; burst peak {fmt.value(r.burst_peak, 'FLOP/s')}" if r.burst_peak else ""
    return f"{r.basis}{peak}"
