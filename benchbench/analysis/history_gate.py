"""The history's gate: is the machine slower now than it was at its best, or than a run the
user pinned, by more than the threshold? Pure functions, no I/O.

Comparing only the latest segment with the one before lets a slow regression through: four
−4% steps are −15% in all, and each passes a 5% threshold alone. So the latest level is held
against a reference:
- the best segment of the history (the last `window` runs, when given), or the segment of the
  run pinned with --baseline; for a series held against its peers (a GPU against the node's
  other GPUs), its first segment: a level above it is the peers' slowdown, which their own
  series show, and the GPU's return to them no regression. A level of at most SPELL_RUNS
  runs above the levels either side of it is a spell, not a reference: two nights 10% fast,
  held as the reference, failed every later run;
- the latest level is the latest segment's, or, where its runs drift (a linear trend that
  holds at alpha, or at DRIFT_AFTER_STEPS after steps that hold), where the trend has taken it by
  the latest run, or the latest run alone
  when it is an outlier run on the worse side (CI must see the latest run being slow, even if
  the next run may show it was one night) whose own test holds, or whose level's does not
  regress: a drift's latest run lies off its segment's level too, and does not undo a drift
  that holds.
- A drift that change points cut into pieces is still a drift: where the runs from the
  reference's start to the latest run lie at least as close to one line as to their segments'
  levels, the trend is fitted over them all. A −10% drift over 12 runs at 1% noise was cut in 35
  histories of 200; their segments read it as −4.1% to −9.5% (median −6.0%), and 4 passed a
  5% threshold. Over the whole drift they read −7.1% to −11.0% (−9.2% planted) and all exit.
The change between them must exceed the threshold and hold at alpha (Welch's t-test between
the two segments' runs, the trend's own test, or Student's prediction test of the latest run
alone against its segment). A drift whose trend holds at ten times alpha (at_change) but not
at alpha, and takes the series beyond the threshold, is read too, not regressed: beyond the
threshold, not held (more runs will tell), where the median of the latest segment's runs would
read the series as level (docs/history-method.md, step 6). The trend's test and the latest
run's take the rounds' noise in, as the change points' tests do, where the runs scatter no more
than their rounds say.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchbench.analysis import max_t
from benchbench.analysis.change_points import (
    Found,
    Segment,
    Shift,
    at_change,
    change_pct,
    rounds_noise,
    run_logs,
    within,
)

TREND_MIN_RUNS = 6  # fewer runs cannot tell a drift from noise
# A regression holds beyond the threshold at this level, one-sided: a change of exactly the
# threshold exits 3 in 5% of histories where its error is right (the best of several noisy
# levels as the reference reads it larger: −5% steps exit in up to 19% of 300 histories a cell,
# scripts/history_accuracy.py), and one within it less often still. Held
# beyond no change alone (at alpha), a −3% step failed a 5% gate in 13% of histories (issue
# 71): its estimate crossed −5% one time in eight (the −3% step cells' gate column of
# scripts/history_accuracy.py; docs/history-method.md, step 6).
BEYOND_LEVEL = 0.05
# After steps that hold, the latest segment's drift gives the latest level where its trend holds
# at this level (at alpha where no step does): the level it is read beyond the threshold at.
DRIFT_AFTER_STEPS = BEYOND_LEVEL
# A level of at most this many runs above the levels either side of it is a spell (a
# neighbour away for a few nights, heavy-tailed noise), not a level the machine held, and not
# the reference: held against one, every later run exited 3 (docs/history-method.md, step 6).
SPELL_RUNS = 3


@dataclass(frozen=True)
class Trend:
    """A linear drift of the latest segment's runs (log values against their run index)."""

    pct_per_run: float  # signed, + is better whichever way the metric points
    start: float  # the fitted level at the segment's first run
    end: float  # and at the latest run
    p_value: float  # one-sided, that the runs get worse
    runs: tuple[int, int] = (0, 0)  # the points of its first and its latest run
    # the standard error (log units) of the fitted change from its first run to its latest,
    # and of its level at the latest run, with the degrees of freedom of both
    se_span: float = 0.0
    se_end: float = 0.0
    df: int = 0


@dataclass(frozen=True)
class Gate:
    reference: float  # the level it is held against
    reference_what: str  # "the best segment (runs 1–40)", "run 7 (--baseline)"
    latest: float
    latest_what: str
    change_pct: float  # signed, + is better
    steps: list[Shift]  # the change points between the reference and the latest segment
    trend: Trend | None
    p_value: float
    held_at: float  # the level p had to reach: alpha, or a recorded change's (Shift.held_at)
    regressed: bool
    across: bool = False  # the latest level is a drift's, fitted across the steps' cuts
    # one-sided p that the change is no worse than the threshold (Beyond): a regression must
    # hold beyond the threshold at BEYOND_LEVEL, not only beyond no change at all
    beyond_p: float = 1.0

    @property
    def drift(self) -> Trend | None:
        """The trend, where the latest level is where it has taken the series (held or not)."""
        return self.trend if self.trend is not None and self.latest == self.trend.end else None


def spells(found: Found) -> list[Segment]:
    """The better spells: segments of at most SPELL_RUNS runs above the levels either side of
    them (a change point up into each, one down out of it)."""
    into = {x.at: x for x in found.shifts}
    return [seg for seg in found.segments
            if seg.runs and len(seg.runs) <= SPELL_RUNS and seg.start in into
            and seg.stop in into
            and into[seg.start].change_pct > 0 > into[seg.stop].change_pct]


def _logs(points: Sequence[Sequence[float]], runs: Sequence[int]) -> list[float]:
    return run_logs([points[i] for i in runs])


def trend(points: Sequence[Sequence[float]], runs: Sequence[int], higher_is_better: bool
          ) -> Trend | None:
    """The linear drift of these runs (log values against their index), or None with fewer
    than TREND_MIN_RUNS runs."""
    if len(runs) < TREND_MIN_RUNS:
        return None
    from scipy.stats import t as student

    x = list(runs)
    slope, level_at, ss, sxx = _line(x, _logs(points, runs))
    rounds = rounds_noise([points[i] for i in runs])
    var, df, _ = max_t.pooled(ss / (len(x) - 2), len(x) - 2, rounds.run_var, rounds.df)
    sign = 1 if higher_is_better else -1
    worse = -sign * slope  # + when the runs get worse
    # one-sided: the gate asks only whether the machine is getting slower
    if var > 0:
        p = float(student.sf(worse / math.sqrt(var / sxx), df))
    else:
        p = 0.0 if worse > 0 else 1.0
    mx = statistics.fmean(x)
    return Trend(sign * math.expm1(slope) * 100, math.exp(level_at(x[0])),
                 math.exp(level_at(x[-1])), p, (x[0], x[-1]),
                 se_span=math.sqrt(var / sxx) * (x[-1] - x[0]),
                 se_end=math.sqrt(var * (1 / len(x) + (x[-1] - mx) ** 2 / sxx)), df=df)


def _line(x: Sequence[int], y: Sequence[float]
          ) -> tuple[float, Callable[[float], float], float, float]:
    """The least-squares line of y on x: (its slope, its value at an x, the sum of squares
    about it, the sum of squares of x about its mean)."""
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx
    ss = sum((b - my - slope * (a - mx)) ** 2 for a, b in zip(x, y, strict=True))
    return slope, lambda at: my + slope * (at - mx), ss, sxx


def _drifts(points: Sequence[Sequence[float]], segs: Sequence[Segment]) -> bool:
    """Whether the runs of these segments (two or more) lie at least as close to one line as
    to their own segments' levels: a drift that change points cut into steps, not steps. The
    line has fewer parameters than the levels and their cuts, so a tie goes to the line."""
    runs = [r for s in segs for r in s.runs]
    if len(segs) < 2 or len(runs) < TREND_MIN_RUNS:
        return False
    levels, _ = within(_logs(points, s.runs) for s in segs if s.runs)
    return _line(runs, _logs(points, runs))[2] <= levels


def _alone_p(points: Sequence[Sequence[float]], segs: Sequence[Segment], at: int) -> float:
    """How rare a run as slow as the run at `at` is, one-sided, where nothing changed: Student's
    prediction test of it against the mean of the segment it is off, with the run-to-run
    variance pooled within every segment (its outlier runs left out). The rounds' noise joins
    where the runs scatter no more than they say and the runs' own spread sees the run at
    max_t.POOLED_CHECK, as in the change points' test. Exact on normal noise, where the robust
    noise of a few runs, as a normal tail, was not: healthy histories of 4 runs at 3% noise
    exited in 52 of 3,000 (6 now), at 10% in 126 (20); of 12 runs at 10%, in 16 (8)
    (scripts/history_accuracy.py --latest)."""
    from scipy.stats import t as student

    kept = [s for s in segs if s.runs]
    ss, df = within(_logs(points, s.runs) for s in kept)
    seg = next((s for s in kept if s.start <= at < s.stop), None)
    if seg is None or df == 0 or ss <= 0:
        return 1.0
    off = abs(_logs(points, [at])[0] - statistics.fmean(_logs(points, seg.runs)))
    scale = 1 + 1 / len(seg.runs)
    p = float(student.sf(off / math.sqrt(ss / df * scale), df))
    rounds = rounds_noise([points[i] for s in kept for i in s.runs])
    var, joined_df, joined = max_t.pooled(ss / df, df, rounds.run_var, rounds.df)
    if joined and p <= max_t.POOLED_CHECK:
        p = float(student.sf(off / math.sqrt(var * scale), joined_df))
    return p


def _pooled_t(points: Sequence[Sequence[float]], segs: Sequence[Segment], a: Segment,
              b: Segment) -> float:
    """Student's t between two segments that are not neighbours, with the run-to-run variance
    pooled over every segment (each about its own level): the steps between them hold
    already, this asks whether their sum does."""
    from scipy.stats import t as student

    ss, df = within(_logs(points, s.runs) for s in segs if s.runs)
    if df == 0:
        return 1.0
    la, lb = _logs(points, a.runs), _logs(points, b.runs)
    se = math.sqrt(ss / df * (1 / len(la) + 1 / len(lb)))
    diff = abs(statistics.fmean(la) - statistics.fmean(lb))
    if se == 0:
        return 0.0 if diff else 1.0
    return float(2 * student.sf(diff / se, df))


@dataclass(frozen=True)
class Beyond:
    """The noise of a change the gate reads (log units): its standard error and degrees of
    freedom, for the test that it lies beyond the threshold."""

    se: float
    df: int

    def p(self, reference: float, latest: float, higher_is_better: bool,
          threshold_pct: float) -> float:
        """One-sided p that the change from `reference` to `latest` is no worse than the
        threshold: Student's t of the change's distance past the threshold over its error."""
        from scipy.stats import t as student

        worse = math.log(latest / reference) * (1 if higher_is_better else -1)  # − is worse
        # the threshold as change_pct reads it: a rate −5%, a time +5%
        bar = math.log1p(-threshold_pct / 100) if higher_is_better else \
            -math.log1p(threshold_pct / 100)
        past = bar - worse  # + where beyond the threshold
        if self.se <= 0 or self.df <= 0:
            return 0.0 if past > 0 else 1.0
        return float(student.sf(past / self.se, self.df))


def _within_var(points: Sequence[Sequence[float]], segs: Sequence[Segment]
                ) -> tuple[float, int]:
    """The run-to-run variance of the log values pooled within every segment, and its df."""
    ss, df = within(_logs(points, s.runs) for s in segs if s.runs)
    return (ss / df if df else 0.0), df


def _levels_noise(within_var: tuple[float, int], a: Segment, b: Segment | None) -> Beyond:
    """The error of segment b's level against segment a's, with the run-to-run variance
    (_within_var); b None: of one run against a's level (the latest run alone)."""
    var, df = within_var
    if df == 0 or not a.runs:
        return Beyond(0.0, 0)
    other = 1.0 if b is None else 1 / max(len(b.runs), 1)
    return Beyond(math.sqrt(var * (1 / len(a.runs) + other)), df)


def _span(seg: Segment) -> str:
    """'runs 7–12': the segment's first run to its last kept one (an outlier run at its end,
    the latest run alone, is not of it)."""
    a, b = seg.start + 1, (seg.runs[-1] + 1 if seg.runs else seg.stop)
    return f"run {a}" if a == b else f"runs {a}–{b}"


def judge(points: Sequence[Sequence[float]], found: Found, higher_is_better: bool,
          threshold_pct: float, alpha: float, baseline: int | None = None,
          window: int | None = None, from_first: bool = False) -> Gate | None:
    """The gate of a series (found: change_points.detect's); `baseline` a point index;
    `from_first`: the reference is the first segment (of the window), not the best, for a
    series held against its peers, where a level above its first is the peers' slowdown;
    None when the series has no level to judge."""
    segs = [s for s in found.segments if s.runs]
    if not segs:
        return None

    def regresses(at: float, p: float, level: float, noise: Beyond) -> bool:
        """The exit rule: a latest level `at` worse than the reference by more than the
        threshold, its test held at `level`, and held beyond the threshold at BEYOND_LEVEL."""
        return (change_pct(reference, at, higher_is_better) < -threshold_pct and p <= level
                and noise.p(reference, at, higher_is_better, threshold_pct) <= BEYOND_LEVEL)

    n = segs[-1].stop
    better = max if higher_is_better else min
    last = segs[-1]
    if baseline is not None:
        ref = next(s for s in found.segments if s.start <= baseline < s.stop)
        ref_what = f"run {baseline + 1} (--baseline), in the segment of {_span(ref)}"
    else:
        recent = [s for s in segs if window is None or s.runs[-1] >= n - window] or [last]
        brief = [] if from_first else spells(found)
        held = [s for s in recent if s not in brief]  # never empty: the latest is no spell
        ref = recent[0] if from_first else better(held, key=lambda s: s.level)
        ref_what = f"the {'first' if from_first else 'best'} segment ({_span(ref)})" \
            if len(segs) > 1 else f"the latest segment ({_span(ref)})"
        passed = [s for s in recent
                  if s in brief and change_pct(ref.level, s.level, higher_is_better) > 0]
        if passed:  # no figure in the words: the series that share them read as one line
            top = better(passed, key=lambda s: s.level)
            ref_what = (f"the best segment ({_span(ref)}; {_span(top)} were better, but a spell "
                        f"of {len(top.runs)} runs, not a level)")
    reference = ref.level
    latest, latest_what, p = last.level, f"the latest segment ({_span(last)})", 1.0
    level = alpha
    within_var = _within_var(points, found.segments)
    noise = _levels_noise(within_var, ref, last)
    steps = [x for x in found.shifts if ref.start < x.at <= last.start]
    if len(steps) == 1:
        # the two are the segments either side of one change point, held as it was (at a
        # recorded change, at that change's level)
        p, level = steps[0].p_value, steps[0].held_at
    elif steps:
        p = _pooled_t(points, found.segments, ref, last)
    since = [s for s in segs if s.start >= ref.start]
    cut = _drifts(points, since)
    drift = trend(points, [r for s in (since if cut else [last]) for r in s.runs],
                  higher_is_better)
    across = False

    def drift_read(line: Trend) -> tuple[float, str, float, str]:
        """(reference, its words, latest, its words) where the drift gives the latest level;
        a drift from the reference's own segment (or across its cuts) starts there too."""
        what = f"the drift since run {ref.start + 1}" if cut else "the latest segment's drift"
        rate = f"{line.pct_per_run:+.2f}".replace("-", "−")
        end = f"{what} at its last run ({rate}% a run)"
        if (ref is last or cut) and baseline is None:
            return line.start, (f"the drift's start (run {ref.start + 1})" if cut else
                                f"the latest segment's start ({_span(last)})"), line.end, end
        return reference, ref_what, line.end, end

    def drift_noise(line: Trend, start: float) -> Beyond:
        """The error of the drift's latest level against `start`: its fitted change where
        it starts there, else its fitted end against the reference segment's level."""
        if start == line.start or not ref.runs:
            return Beyond(line.se_span, line.df)
        var, df = within_var
        return Beyond(math.sqrt(line.se_end**2 + var / len(ref.runs)),
                      min(line.df, df) if df else line.df)

    # After steps that hold, the latest segment's runs that still drift, though not at alpha,
    # give the latest level where that drift has taken them. A drift that change points cut
    # into two levels read as the latest level's middle, short of its end: a −10% drift over
    # the last 30 of 100 runs at 3% noise exited in 260 of 300 histories, 287 now, and −3%
    # steps as often as before (docs/history-method.md, step 6)
    after_steps = not cut and ref is not last and drift is not None \
        and drift.p_value <= DRIFT_AFTER_STEPS
    if drift is not None and drift.pct_per_run < 0 and (drift.p_value <= alpha or after_steps):
        reference, ref_what, latest, latest_what = drift_read(drift)
        noise = drift_noise(drift, reference)
        if drift.p_value <= alpha:  # the drift's own test judges it (else the steps' does)
            across = cut
            p, level = drift.p_value, alpha
    odd = next((o for o in found.outliers if o.latest and o.change_pct < 0), None)
    if odd is not None and change_pct(latest, odd.value, higher_is_better) < 0:
        alone = _alone_p(points, found.segments, odd.at)
        # The run alone is judged where its own test holds, or where the level it would
        # replace does not regress. A drift's latest run lies off its segment's level, as
        # an outlier run does, and held against that level with the drift in its noise it
        # did not hold: a −10% drift over 12 runs at 1% noise, its trend at p 1e-6, exited
        # 0 in 55 of 1,000 histories (scripts/history_accuracy.py --gate).
        if alone <= alpha or not regresses(latest, p, level, noise):
            across = False
            latest, latest_what, p, level = odd.value, \
                f"the latest run alone (run {odd.at + 1})", alone, alpha
            noise = _levels_noise(within_var, ref, None)
    gate = Gate(reference, ref_what, latest, latest_what,
                change_pct(reference, latest, higher_is_better), steps, drift, p, level,
                regresses(latest, p, level, noise), across,
                noise.p(reference, latest, higher_is_better, threshold_pct))
    # A drift that does not hold at alpha but holds at ten times it (at_change), and takes the
    # series beyond the threshold, is read too: not regressed, but 'beyond the threshold, not
    # held (more runs will tell)', where the latest segment's level alone would read level.
    if (odd is None and not gate.regressed and gate.change_pct >= -threshold_pct
            and drift is not None and drift.pct_per_run < 0
            and alpha < drift.p_value <= at_change(alpha)):
        start, start_what, end, end_what = drift_read(drift)
        change = change_pct(start, end, higher_is_better)
        if change < -threshold_pct:
            return Gate(start, start_what, end, end_what, change, steps, drift, drift.p_value,
                        alpha, False, cut, drift_noise(drift, start).p(
                            start, end, higher_is_better, threshold_pct))
    return gate
