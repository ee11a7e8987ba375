"""Run-to-run noise: how far two back-to-back runs of one mode differ with nothing changed.

One run a side cannot show its own run-to-run noise: its rounds, seconds apart in a --quick
run, share the machine's state (a neighbour's load, a kernel held in a slow state, the page
cache), so the spread between them under-states the spread between runs (two unchanged
`run --quick` 36 s apart differed by 6.9% in ResNet50's step time, where its rounds said ±2%).
Back-to-back unchanged pairs do show it: `scripts/unchanged_pairs.py` runs many, and writes
what each measurement's log ratio did across them into run_noise.json, which this module reads.

A measurement's floor is the change unchanged pairs are not expected to reach:
max(Z × the root mean square of their log ratios, the largest one seen). Z = 4 leaves about
one false call (one-sided) in 32,000 measurements of a normal noise; the largest seen guards
against tails a normal model misses. It was chosen on the pairs themselves, each judged by
the others' floors (docs/reference.md, "Calibrating the gate"): of 30 unchanged --quick pairs
Z = 3 called 4, 3.5 called 2 and 4 called 1; each caught 9 of 10 planted 15% slowdowns.

The table is per mode (quick, default) and device (cpu, cuda). Where a device or mode has no
pairs of its own, the nearest calibrated one stands in and says so: the default run falls back
to --quick's floors (shorter runs are noisier, so this errs towards "inconclusive"), and a GPU
to the CPU VM's (a VM is noisier than bare metal: the same). A measurement with no calibrated
figure in its own family keeps the rule that only its own rounds give.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

Z = 4.0
# A measurement whose unchanged pairs differ by more than this (gloo's small all-reduces on a
# 2-core VM: by up to 270%) is not judged with one run a side at all: a floor that wide calls
# nothing a reader would act on, and its pairs' tails are too heavy for the largest seen to
# bound the next one. Pooled runs judge it.
WIDEST_JUDGED = math.log1p(0.5)
FILE = "run_noise.json"
MODES = ("quick", "default")


@dataclass(frozen=True)
class Calibration:
    """What unchanged pairs of one measurement showed."""

    rms: float  # root mean square of the pairs' log ratios
    largest: float  # the largest |log ratio| seen
    pairs: int

    @property
    def floor(self) -> float:
        """The log change unchanged pairs are not expected to reach."""
        return max(Z * self.rms, self.largest)


@dataclass(frozen=True)
class Floor:
    """A measurement's floor, and where it came from (for the reason a report gives)."""

    log: float  # in log units
    rms: float  # the pairs' root mean square log ratio
    pairs: int
    source: str  # "--quick runs on this kind of machine", or what stood in

    @property
    def pct(self) -> float:
        return math.expm1(self.log) * 100


def row_id(probe: str, metric: str, key: Mapping[str, Any]) -> str:
    """A measurement's name in the table: 'matmul/flops/dtype=fp32,size=2048' (the device
    left out: cuda:0 and the CPU are one row each)."""
    fields = ",".join(f"{k}={key[k]}" for k in sorted(key) if k != "device")
    return f"{probe}/{metric}/{fields}"


def family_id(row: str) -> str:
    return row.rsplit("/", 1)[0]


Table = Mapping[str, Mapping[str, Mapping[str, Calibration]]]  # device -> mode -> row id


def parse(doc: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Calibration]]]:
    """The table from run_noise.json's text (its 'calibrations' object)."""
    out: dict[str, dict[str, dict[str, Calibration]]] = {}
    for device, modes in doc.get("calibrations", {}).items():
        for mode, rows in modes.items():
            out.setdefault(device, {})[mode] = {
                rid: Calibration(float(c["rms"]), float(c["largest"]), int(c["pairs"]))
                for rid, c in rows.items()}
    return out


ENV = "BENCHBENCH_NOISE_TABLE"  # a table of your own machine's pairs, instead of the shipped one


class TableError(ValueError):
    """The table ENV names cannot be read: one line for the user."""


def shipped() -> Table:
    """The table ENV names (scripts/unchanged_pairs.py evaluate --write --table PATH writes
    one for your machine), else the one it wrote into the package."""
    own = os.environ.get(ENV)
    return _read(own) if own else _packaged()


@functools.cache
def _read(path: str) -> Table:
    try:
        return parse(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TableError(f"{ENV}={path}: not a noise table scripts/unchanged_pairs.py wrote "
                         f"({type(exc).__name__}: {exc}); unset it to use benchbench's own") \
            from None


@functools.cache
def _packaged() -> Table:
    path = resources.files("benchbench.analysis").joinpath(FILE)
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {}


def _candidates(device: str, mode: str) -> list[tuple[str, str, str]]:
    """(device, mode, what stands in) in the order they are tried."""
    own = "cuda" if device == "cuda" else "cpu"
    out = []
    for dev in dict.fromkeys((own, "cpu")):
        for m in dict.fromkeys((mode, "quick")):
            if dev == own and m == mode:
                why = f"{_mode_words(mode)} on this kind of machine"
            else:
                why = (f"{_mode_words(m)} on a {'GPU' if dev == 'cuda' else 'CPU VM'} "
                       f"(standing in for {_mode_words(mode)} on "
                       f"{'a GPU' if own == 'cuda' else 'a CPU'}, which no pairs calibrated)")
            out.append((dev, m, why))
    return out


def _mode_words(mode: str) -> str:
    return "--quick runs" if mode == "quick" else "default runs"


def floor(table: Table, device: str, mode: str, probe: str, metric: str,
          key: Mapping[str, Any]) -> Floor | None:
    """The measurement's floor from the first calibration that has it; else its family's
    widest (a size or dtype the pairs did not run); else None."""
    rid = row_id(probe, metric, key)
    for dev, m, why in _candidates(device, mode):
        rows = table.get(dev, {}).get(m, {})
        if not rows:
            continue
        if rid in rows:
            c = rows[rid]
            return Floor(c.floor, c.rms, c.pairs, why)
        fam = [c for r, c in rows.items() if family_id(r) == family_id(rid)]
        if fam:
            c = max(fam, key=lambda c: c.floor)
            return Floor(c.floor, c.rms, c.pairs, why + f" (the widest of {probe} {metric})")
    return None


def runs_needed(change_log: float, noise: Floor, alpha: float) -> int | None:
    """How many runs a side a pooled t-test needs to call a change of `change_log` (log
    units) beyond the noise the floor's pairs showed: the smallest n with
    t(alpha, 2n - 2) × rms × sqrt(1/n) < |change| (rms: the pairs' root mean square, that of
    a difference of two runs, so one run's is rms / √2). None when 20 would not."""
    from scipy.stats import t

    for n in range(2, 21):
        if float(t.ppf(1 - alpha / 2, 2 * n - 2)) * noise.rms / math.sqrt(n) < abs(change_log):
            return n
    return None


# A measurement fewer unchanged pairs measured (a size the time budget left out of some runs)
# has no floor: five pairs can say little of its tail, and its family's widest stands in.
MIN_PAIRS = 5


def calibrate(ratios: Mapping[str, list[float]], least: int = 1) -> dict[str, dict[str, Any]]:
    """The table's rows from each measurement's log ratios over unchanged pairs (those that
    `least` pairs or more measured: the script that writes the table asks MIN_PAIRS)."""
    return {rid: {"rms": math.sqrt(sum(x * x for x in xs) / len(xs)),
                  "largest": max(abs(x) for x in xs), "pairs": len(xs)}
            for rid, xs in sorted(ratios.items()) if xs and len(xs) >= least}
