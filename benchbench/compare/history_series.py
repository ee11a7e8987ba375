"""A machine's history as data: its runs, the environment's changes between them, a series per
headline figure (its points, change points, outlier runs and gate), and the series derived from
the others: the machine as a whole (composite: every figure in one index) and each GPU against
the other GPUs. compare/history.py reads the runs and fills them in.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate
from benchbench.compare import evidence, identity, series


@dataclass(frozen=True)
class RunPoint:
    number: int  # 1 for the oldest
    source: str
    started_at: str
    label: str | None
    identity: identity.Identity
    env: dict[str, Any]  # the fields a change point is attributed to (history.ATTRIBUTED)
    conditions: str = ""  # its values of the conditions that split series (History.split)


@dataclass(frozen=True)
class EnvChange:
    field: str
    before: Any
    after: Any
    runs: tuple[int, int]  # the numbers of the runs it changed between


@dataclass
class Series:
    name: str
    probe: str
    metric: str
    key: series.Key
    unit: str
    higher_is_better: bool
    first_device: bool
    runs: list[int] = field(default_factory=list)  # the numbers of the runs that have it
    points: list[tuple[float, ...]] = field(default_factory=list)  # each run's round values
    # each run's figure: the median of its rounds, as the levels are (a peak's too, where the
    # run's own figure is its best round: the dots and the levels must tell the same story)
    values: list[float] = field(default_factory=list)
    # each run's (SM clock, rate per GHz of it) where its samples carry their clock
    clocks: list[tuple[float, float] | None] = field(default_factory=list)
    shifts: list[cp.Shift] = field(default_factory=list)
    segments: list[cp.Segment] = field(default_factory=list)
    causes: list[list[EnvChange]] = field(default_factory=list)  # one list per shift
    # per shift: the (SM clock, rate per GHz of it) of the segments before and after it,
    # where both read their clock (analysis/clocks); None elsewhere
    clock_moves: list[tuple[tuple[float, float], tuple[float, float]] | None] = field(
        default_factory=list)
    outliers: list[cp.OutlierRun] = field(default_factory=list)  # single runs far off
    # what each outlier run's own record shows that the run before it does not, by point
    told: dict[int, tuple[int, list[evidence.Evidence]]] = field(default_factory=dict)
    # what the first run of each new level records that the run before the level (its last
    # that is not an outlier run) does not, by the shift's point: its steal, throttling,
    # clocks, other processes (the environment's own changes are in `causes`)
    shift_told: dict[int, tuple[int, list[evidence.Evidence]]] = field(default_factory=dict)
    # the run-to-run noise, as a CV in percent; None (unknown) with fewer than MIN_RUNS runs
    noise_pct: float | None = None
    # the least slowdown in the middle of these runs that its test calls about half the time,
    # in percent: (found blind, at a recorded change); None where the noise is unknown or 0,
    # or the runs are too few for two levels (max_t.smallest_step)
    sees_pct: tuple[float, float] | None = None
    gate: history_gate.Gate | None = None  # the latest level against the reference
    baseline_missing: bool = False  # --baseline names a run this series has no point of
    # the machine's index alone: the series it is made of, each with its share (composite)
    weights: list[tuple[Series, float]] = field(default_factory=list)
    # the level its tests are held at where not the history's alpha: a GPU against the other
    # GPUs (against_the_others) shares alpha with the figure's other GPUs
    alpha: float | None = None
    # held against its peers (a GPU against the other GPUs): the gate's reference is its
    # first segment, not its best (history_gate.judge's from_first)
    peers: bool = False
    # the conditions that keep it apart from the figure's other series ('--quick'), where its
    # runs differ in them (compare/conditions.py); "" where they do not
    condition: str = ""
    # gated: it holds its figure's latest run. One of other conditions than that run is shown,
    # not judged: the gate holds the latest run against the runs of its own conditions
    judged: bool = True

    @property
    def regression(self) -> history_gate.Gate | None:
        """The gate, when it says the series regressed."""
        return self.gate if self.gate is not None and self.gate.regressed else None

    def run_at(self, point: int) -> int:
        return self.runs[point]

    @property
    def gpu(self) -> str | None:
        """The GPU it was measured on (a cuda:N device), or None."""
        device = dict(self.key[2]).get("device")
        return device if isinstance(device, str) and device.startswith("cuda:") else None

    def unheld(self, threshold_pct: float) -> bool:
        """Worse than its reference by more than the threshold, but its test did not hold:
        not regressed, and not within the threshold either."""
        return (self.gate is not None and not self.gate.regressed
                and self.gate.change_pct < -threshold_pct)


@dataclass(frozen=True)
class Split:
    """A condition the runs differ in, that keeps a figure's runs apart as separate series."""

    title: str  # "mode", "resnet50: image size"
    probe: str | None  # None for a run-level condition
    field: str  # "quick", "image_size"
    runs: list[tuple[str, int]]  # each value in words and how many runs recorded it, most first
    latest: str | None  # the latest run's value in words, None where it recorded none


@dataclass
class History:
    machine: str
    runs: list[RunPoint]
    series: list[Series]
    changes: list[EnvChange]  # between every two successive runs
    set_apart: list[tuple[str, str]]  # (source, why)
    threshold_pct: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    baseline: int | None = None  # the run (number) pinned as the reference
    window: int | None = None  # the reference is the best segment of the last this many runs
    split: list[Split] = field(default_factory=list)  # the conditions that split series

    @property
    def regressions(self) -> list[Series]:
        return [s for s in self.series if s.regression is not None]

    @property
    def unheld(self) -> list[Series]:
        """The series beyond the threshold whose test did not hold (Series.unheld)."""
        return [s for s in self.series if s.unheld(self.threshold_pct)]

    def run(self, number: int) -> RunPoint:
        return self.runs[number - 1]


NOISE_FLOOR = 0.001  # σ of the log values: a series of copies weighs no more than 0.1% noise


def index_weights(logs: Sequence[Sequence[float]]) -> list[float]:
    """Each series' share of the index (they sum to 1): the inverse of its run-to-run variance
    (change_points.noise of its runs' log values), its noise never below NOISE_FLOOR."""
    weights = [1 / max(cp.noise(x), NOISE_FLOOR) ** 2 for x in logs]
    return [w / sum(weights) for w in weights]


def index_points(points: Sequence[Sequence[Sequence[float]]], higher_is_better: Sequence[bool],
                 weights: Sequence[float] | None = None) -> list[tuple[float, ...]]:
    """Several series of the same runs (each a list of the runs' rounds, every value above 0)
    as one index per run and round: their geometric mean weighted by the inverse of each
    series' run-to-run variance (change_points.noise), each oriented so that higher is better
    and taken about its own median run, so a typical run reads 1. Round j of a run is round j
    of every series that has one, and the run's value of each that does not (a quick run
    measures some probes twice and others once), weighted alike: so the geometric mean of a
    run's rounds is the index of its series' run values, and its rounds spread as much as the
    rounds that were measured say. `weights`: index_weights of the series, where the caller
    has them already."""
    logs = [cp.run_logs(p) for p in points]
    parts = [(w * (1 if up else -1), statistics.median(x), p, x)
             for w, x, p, up in zip(index_weights(logs) if weights is None else weights, logs,
                                    points, higher_is_better, strict=True)]
    out = []
    for i in range(len(points[0])):
        rounds = max(len(p[i]) for _, _, p, _ in parts)
        out.append(tuple(
            math.exp(sum(w * ((math.log(p[i][j]) if j < len(p[i]) else x[i]) - mid)
                         for w, mid, p, x in parts))
            for j in range(rounds)))
    return out


def composite(all_series: Sequence[Series], runs: Sequence[RunPoint]) -> Series | None:
    """The machine as a whole (index_points): every headline figure that these runs measured,
    each and no other, with no value of 0 or less, in one index. A change the whole machine
    shares (a driver that costs every figure 10%) moves the index by all of it, while its noise
    is less than any one series' where the series' noise is their own: 12 runs drifting 10% at
    3% noise, three series, exit 3 in 92% of 400 histories against 76% on the series alone
    (scripts/history_accuracy.py --machines; 69% against 64% where half their noise is shared,
    44% and 44% where it is one). The weights keep one noisy figure (a disk that
    reads 0.6 or 2.5 GB/s) from drowning the rest. None with fewer than two such series."""
    numbers = [r.number for r in runs]
    every = [s for s in all_series if s.runs == numbers
             and all(p and min(p) > 0 for p in s.points)]
    if len(every) < 2:
        return None
    c = Series(f"all {len(every)} headline figures (weighted)", "all", "index",
               ("all", "index", (("series", len(every)),)), "ratio", True, True)
    c.runs = numbers
    shares = index_weights([cp.run_logs(s.points) for s in every])
    c.points = index_points([s.points for s in every], [s.higher_is_better for s in every],
                            shares)
    c.values = [statistics.median(p) for p in c.points]
    c.weights = list(zip(every, shares, strict=True))
    return c


MIN_GPUS = 3  # a GPU and at least two others to hold it against
AGAINST = "against the other GPUs"


def against_the_others(all_series: Sequence[Series], alpha: float) -> list[Series]:
    """Each GPU's figure against the median of the other GPUs' in the same run, a series per
    GPU of every figure that MIN_GPUS or more GPUs measure. What moves every GPU of the node
    alike (the day, the host, a driver) cancels, so a GPU that fell behind the others shows
    above its own noise alone: 12 runs, each GPU with 1% noise of its own and 3% that the day
    gives them all, one GPU 10% slower from the middle run; its own series exits 3 in 52 of
    100 histories, its series against the others in 100 (at 3% and 3%: 35 and 26, the node
    46; scripts/history_accuracy.py --gpu-nodes). A figure's GPUs share alpha (Bonferroni),
    so a healthy node fails about as often: one question, whether any GPU fell behind, per
    figure. A run counts where the GPU and two others measured the figure; each round of the
    GPU is held against the others' run values. The gate holds such a series against its first
    segment, not its best: a GPU that stood above the others for a few runs while they were
    slower (a driver update that reached it three runs later) is level with them again, not
    10% behind its best."""
    by_figure: dict[series.Key, list[Series]] = {}
    for s in all_series:
        if s.gpu is not None:
            by_figure.setdefault(series.without_device(s.key), []).append(s)
    out = []
    for gpus in by_figure.values():
        if len(gpus) < MIN_GPUS:
            continue
        at_run: dict[int, list[tuple[Series, float]]] = {}
        for g in gpus:
            for run, v in zip(g.runs, g.values, strict=True):
                at_run.setdefault(run, []).append((g, v))
        for g in gpus:
            base = g.name.removesuffix(f" ({g.gpu})")
            r = Series(f"{base} {AGAINST} ({g.gpu})", g.probe, g.metric,
                       (g.key[0], g.key[1], (*g.key[2], ("against", "the other GPUs"))),
                       "ratio", g.higher_is_better, False, alpha=alpha / len(gpus),
                       peers=True, condition=g.condition, judged=g.judged)
            for run, rounds in zip(g.runs, g.points, strict=True):
                others = [v for o, v in at_run[run] if o is not g and v > 0]
                if len(others) < MIN_GPUS - 1 or not rounds or min(rounds) <= 0:
                    continue
                mid = statistics.median(others)
                r.runs.append(run)
                r.points.append(tuple(v / mid for v in rounds))
                r.values.append(statistics.median(r.points[-1]))
            if len(r.runs) >= cp.MIN_RUNS:
                out.append(r)
    return out
