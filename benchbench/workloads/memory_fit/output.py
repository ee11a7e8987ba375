"""memory_fit's measurements from the points its search tried: each fitted point's peaks, ratio
and step times, and per mode the largest size that fitted, with what stopped the search above
it. Shared by the real run and the simulator; torch-free."""

from __future__ import annotations

import statistics

from benchbench.core.results import Measurement
from benchbench.core.units import iec
from benchbench.probes.api import ProbeOutput
from benchbench.workloads.memory_fit.search import FAR_BEYOND, Point


def output(points: list[Point], dev: str, seq: int, precision: str, memory: float | None,
           notes: list[str], gpu_name: str | None) -> ProbeOutput:
    """Each fitted point's peak, ratio and step time; per mode the largest that fitted."""
    # Text, not a call: where the peak comes from, for the report.
    source = "torch.cuda.max_memory_allocated" if dev != "cpu" else \
        "the process's peak resident memory above its level before the model was built"
    out: list[Measurement] = []
    for mode in dict.fromkeys(p.mode for p in points):
        far = [p.rung for p in points if p.mode == mode and p.bound == "estimate"]
        if far:
            notes.append(f"{', '.join(far)} {mode} not tried, because their estimates are over "
                         f"{FAR_BEYOND:g}x the device's {iec(memory or 0)}")
    for p in points:
        if p.fits is None and p.bound != "estimate":
            notes.append(f"{p.rung} {p.mode} skipped, because {p.why}")
        if not p.fits or p.peak_B is None:
            continue
        key = {"mode": p.mode, "rung": p.rung, "seq_len": seq, "precision": precision}
        warm = list(p.step_s[1:] or p.step_s)
        context = {"params": p.estimate.params, "estimate": p.estimate.to_dict(),
                   "ratio": p.ratio, "peak_reserved_B": p.reserved_B, "build_s": p.build_s,
                   "step_s": p.step_s, "memory_source": source, "device": dev,
                   "gpu_name": gpu_name, "layers": p.shape.layers, "hidden": p.shape.hidden}
        out += [
            Measurement(metric="step_peak_memory", key=key, value=p.peak_B, unit="B",
                        statistic="max", samples=[p.peak_B], higher_is_better=False,
                        context=context),
            Measurement(metric="estimate_ratio", key=key, value=p.ratio or 0.0, unit="ratio",
                        statistic="median", samples=[p.ratio or 0.0], higher_is_better=False,
                        context=context),
            # The warm steps only: the first allocates the optimizer's states, and is kept
            # beside them, not among them.
            Measurement(metric="step_time", key=key, value=statistics.median(warm), unit="s",
                        statistic="median", samples=warm, higher_is_better=False,
                        context={**context, "first_step_s": p.step_s[0],
                                 "first_step_includes": "allocation and the optimizer's "
                                                        "states"}),
        ]
    for mode in dict.fromkeys(p.mode for p in points):
        largest = _largest(mode, [p for p in points if p.mode == mode], seq, precision, memory,
                           dev, gpu_name, notes)
        if largest is not None:
            out.append(largest)
    return ProbeOutput(out, notes=notes, params={"seq_len": seq, "precision": precision})


def _largest(mode: str, mine: list[Point], seq: int, precision: str, memory: float | None,
             dev: str, gpu_name: str | None, notes: list[str]) -> Measurement | None:
    """The mode's largest fitted size, with what stopped the search above it: memory (the
    answer), time or free RAM (a lower bound only), or the ladder's end."""
    fitted = [p for p in mine if p.fits]
    best = max(fitted, key=lambda p: p.estimate.params, default=None)
    above = [p for p in mine if not p.fits and (best is None or p.estimate.params >
                                               best.estimate.params)]
    nxt = min(above, key=lambda p: p.estimate.params, default=None)
    if best is None:
        # Every size refused before it ran (its reason is in the notes already) is no answer
        # about memory: "no size fitted" would read as one.
        ran = any(p.fits is not None for p in mine)
        notes.append(f"{mode}: no size fitted" + (
            f" ({nxt.rung} ran out of memory)" if nxt and nxt.fits is False else "")
            if ran else f"{mode}: no size tried")
        return None
    bound = "the ladder's end" if nxt is None else "memory" if nxt.fits is False else nxt.bound
    return Measurement(
        metric="largest_model", key={"mode": mode, "seq_len": seq, "precision": precision},
        value=float(best.estimate.params), unit="count", statistic="max",
        samples=[float(p.estimate.params) for p in fitted], higher_is_better=True,
        context={"rung": best.rung, "layers": best.shape.layers, "hidden": best.shape.hidden,
                 "peak_B": best.peak_B, "peak_reserved_B": best.reserved_B,
                 "memory_total_B": memory, "device": dev, "gpu_name": gpu_name,
                 "bounded_by": bound,
                 "next_up": None if nxt is None else {
                     "rung": nxt.rung, "params": nxt.estimate.params,
                     "outcome": "out of memory" if nxt.fits is False else
                     f"skipped, because {nxt.why}"},
                 "tried": [{"rung": p.rung, "params": p.estimate.params, "fits": p.fits,
                            "peak_B": p.peak_B, "why": p.why} for p in mine]})
