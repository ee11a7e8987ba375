"""The inference workload's offline batch sweep, read: which batches timed the host's launch
path rather than the GPU, and whether the best batch is the peak or only a floor.

The rule for the launch path, per precision, at a measured batch b:
- the next larger measured batch b' ran at least LINEAR_SHARE of b'/b times b's rate: the
  call's time hardly grew with its work, so it was fixed cost (Python, the kernel launches),
  not the GPU's arithmetic; or
- fp32 ran at least as fast as a half precision at b: half precision's 2x or more faster
  arithmetic did not decide the time (both rows are labelled).
The best batch is a floor ("at least") where larger batches of the sweep were not tried for
time, or where it is the largest tried and its rate still grew as above from the batch before.
Pure functions over the probe's measurements; units samples/s.
"""

from __future__ import annotations

import itertools

from benchbench.analysis.capacities import metric
from benchbench.core.results import Measurement, ProbeResult

# A doubled batch at 1.6x the rate or more: the call took at most 25% longer for twice the
# work. ResNet50 on an H200 in eager bf16 grew 1.9-2.8x a doubling up to batch 16 (launch
# bound); a GPU at its arithmetic limit grows a few percent.
LINEAR_SHARE = 0.8
HALF = ("bf16", "fp16")


def _by_precision(pr: ProbeResult | None) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for m in metric(pr, "offline_throughput"):
        out.setdefault(str(m.key.get("precision")), {})[int(m.key["batch_size"])] = m.value
    return out


def _grew(rates: dict[int, float], b: int, nxt: int) -> bool:
    return rates[nxt] >= LINEAR_SHARE * (nxt / b) * rates[b]


def host_bound(pr: ProbeResult | None) -> dict[tuple[str, int], str]:
    """(precision, batch) → why that batch's time is the host's launch path, not the GPU's."""
    sweep = _by_precision(pr)
    out: dict[tuple[str, int], str] = {}
    for precision, rates in sweep.items():
        sizes = sorted(rates)
        for b, nxt in itertools.pairwise(sizes):
            if _grew(rates, b, nxt):
                out[(precision, b)] = (f"the host's launch path: batch {nxt} ran "
                                       f"{rates[nxt] / rates[b]:.2g}x its rate for "
                                       f"{nxt / b:g}x the work")
    fp32 = sweep.get("fp32", {})
    for half in HALF:
        for b, rate in sweep.get(half, {}).items():
            if b in fp32 and fp32[b] >= rate:
                why = (f"the host's launch path: fp32 ran as fast as {half} ({fp32[b]:,.0f} "
                       f"vs {rate:,.0f} images/s)")
                out.setdefault((half, b), why)
                out.setdefault(("fp32", b), why)
    return out


def larger_not_tried(pr: ProbeResult | None, peak: Measurement) -> list[int]:
    """The sweep's batches above the best that were not measured for time (a batch that did
    not fit in memory was tried: the best is then the peak that fits)."""
    precision = peak.key.get("precision")
    best = int(peak.context.get("best_batch_size") or 0)
    measured = _by_precision(pr).get(str(precision), {})
    planned = (pr.params.get("batch_sizes") if pr else None) or []
    notes = ((pr.reason or "") if pr else "").split("; ")
    oom = [b for b in planned for n in notes if n.startswith(f"offline {precision} batch {b} ")
           and f"because batch {b} does not fit in memory" in n]
    first_oom = min(oom, default=None)
    return sorted(b for b in planned if b > best and b not in measured
                  and (first_oom is None or b < first_oom))


def still_rising(pr: ProbeResult | None, peak: Measurement) -> bool:
    """Whether the best batch is the largest measured and its rate still grew about linearly
    from the batch before: the plateau was not reached."""
    rates = _by_precision(pr).get(str(peak.key.get("precision")), {})
    best = int(peak.context.get("best_batch_size") or 0)
    below = [b for b in rates if b < best]
    return bool(below) and best == max(rates) and _grew(rates, max(below), best)


def is_floor(pr: ProbeResult | None, peak: Measurement) -> bool:
    return bool(larger_not_tried(pr, peak)) or still_rising(pr, peak)


def peak_text(pr: ProbeResult | None, peak: Measurement) -> str:
    """'at least 5,356 images/s, not the peak (batches 32-256 not tried, for time; …)' or
    '9,035 images/s'."""
    skipped = larger_not_tried(pr, peak)
    why = []
    if skipped:
        span = f"batch {skipped[0]}" if len(skipped) == 1 else \
            f"batches {skipped[0]}-{skipped[-1]}"
        why.append(f"{span} not tried, for time")
    if still_rising(pr, peak):
        why.append("the rate still grew about linearly with the batch")
    if not why:
        return f"{peak.value:,.0f} images/s"
    return f"at least {peak.value:,.0f} images/s, not the peak ({'; '.join(why)})"
