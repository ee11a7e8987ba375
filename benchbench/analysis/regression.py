"""The regression decision for one measurement: the baseline's values against the candidate's.

Pure functions, no I/O. What is compared is the unit of replication that carries run-to-run
noise: one value per round (each round a fresh worker, minutes apart in the run, rounds.py)
and per run when a side pools several runs. The samples inside one worker share its state
(the clock speed, a neighbour's load, the page cache): their spread is far smaller than the
spread between runs, so a test on them calls almost any run-to-run shift "significant".

Two rules, by what the sides hold; both, as asv's, ask a change to exceed a threshold too.
- Several runs on a side (pooled): a two-sided t-test at `alpha` on the logarithms of every
  round of every run; its critical difference is the noise ("values of it differ by up to N%
  with nothing changed"), and a change must be significant and beyond the threshold.
- One run a side: a VM can hold one kernel in a slow state for a whole run (seen here: bf16
  matmul at half speed in both rounds of one run, with nothing changed), which two rounds of
  one run cannot reveal. So the noise is the metric family's (a probe's metric across its
  sizes, dtypes, loaders): the largest spread between rounds of any of its measurements on
  either side. A measurement regressed when every candidate value lies beyond every baseline
  value by more than the threshold and that noise, and its family moved the same way (its
  median change is beyond both too): one kernel's state moves one measurement, a slower
  machine or slower software moves the family. With no second value anywhere in the family,
  the noise is unknown and the change inconclusive, never regressed.
- One run a side, calibrated: rounds seconds apart still under-state the noise between runs,
  and unchanged back-to-back pairs of the mode show it (run_noise.py, measured by
  scripts/unchanged_pairs.py), a kernel held in a slow state included. Where they calibrated
  the measurement, it regressed when its change lies beyond the threshold and their floor,
  every round beyond the other side's; a change under the floor is inconclusive, with the
  runs a side that would judge it.
A noisy side is evidence in itself and is reported beside the change, never a reason to call a
change that lies wholly beyond the noise inconclusive. scipy is imported inside the functions
that need it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchbench.analysis import run_noise
from benchbench.core import stats
from benchbench.core import units as fmt

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_ALPHA = 0.01
# pyperf's "unstable" mark for a side's raw samples: reported beside a change as evidence.
NOISY_CV = 0.10

REGRESSED = "regressed"
IMPROVED = "improved"
WITHIN = "within threshold"
NO_CHANGE = "no significant change"
INCONCLUSIVE = "inconclusive"
NOT_TESTED = "not tested"
OUTCOMES = (REGRESSED, IMPROVED, WITHIN, NO_CHANGE, INCONCLUSIVE, NOT_TESTED)
# What to do about an inconclusive metric; the reports print it once above the list.
INCONCLUSIVE_ADVICE = ("pool several runs per side (`--baseline` repeated, or a quoted glob: "
                       "3 before and 3 after), or run with more `--rounds`")
NOISE_UNKNOWN = "noise unknown"  # the reason's start where Decision.noise_known is False
TEST = "t-test on log values (rounds, runs)"
SPREAD = "beyond the family's spread (one run a side)"
CALIBRATED = "beyond what unchanged pairs showed (one run a side)"


@dataclass(frozen=True)
class Family:
    """What a measurement's family (its probe's metric across keys) says, for one pair of
    sides: each side's largest relative spread between rounds (None when no measurement of
    the family has two values there), and the median of the family's log changes, oriented
    (+ is better)."""

    name: str
    noise: tuple[float | None, float | None]
    change: float | None


@dataclass(frozen=True)
class Decision:
    """What one candidate/baseline pair says."""

    outcome: str  # one of OUTCOMES
    ratio: float | None  # candidate / baseline, > 1 is better whatever the direction
    change_pct: float | None  # signed, + is better
    test: str | None  # the test that ran, or None
    p_value: float | None = None
    reason: str = ""
    noise_pct: float | None = None  # the smallest change this machine's noise lets one call
    units: tuple[int, int] = (0, 0)  # values a side: rounds and runs
    cv: tuple[float, float] | None = None  # each side's raw-sample CV, as evidence
    noise_known: bool = True  # False: no second value says this machine's noise for it


def ratio(base: float, cand: float, higher_is_better: bool) -> float | None:
    """Candidate against baseline, oriented so that > 1 is better."""
    if higher_is_better:
        return cand / base if base > 0 else None
    return base / cand if cand > 0 else None


def change_pct(base: float, cand: float, higher_is_better: bool) -> float | None:
    """Signed percentage change of the candidate, + is better."""
    if base == 0:
        return None
    pct = (cand - base) / abs(base) * 100.0
    return pct if higher_is_better else -pct


def _logs(values: Sequence[float], higher_is_better: bool) -> list[float]:
    """Oriented logarithms: larger is better either way."""
    return [math.log(v) if higher_is_better else -math.log(v) for v in values]


def _t_crit(alpha: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(1 - alpha / 2, df))


def _ss(xs: list[float]) -> float:
    m = statistics.fmean(xs)
    return sum((x - m) ** 2 for x in xs)


def _evidence(samples: tuple[Sequence[float], Sequence[float]]) -> tuple[float, float] | None:
    b, c = samples
    if len(b) < 2 or len(c) < 2:
        return None
    return stats.cv(b), stats.cv(c)


def noise_unknown(d: Decision) -> bool:
    """Whether a decision is inconclusive because no second value says this machine's noise
    (one value a side, in the measurement and in its family)."""
    return d.outcome == INCONCLUSIVE and not d.noise_known


def unsteady_sides(cvs: tuple[float, float] | None) -> list[tuple[str, float]]:
    """(side, CV) for each side whose own run's samples varied by more than NOISY_CV."""
    if not cvs:
        return []
    return [(name, v) for name, v in zip(("baseline", "candidate"), cvs, strict=True)
            if v > NOISY_CV]


def _median_change(fam: Family) -> str:
    """The family's median change, as its reasons give it: '−79%'."""
    return fmt.signed_percent(100 * math.expm1(fam.change or 0), 0)


def _noisy_note(cvs: tuple[float, float] | None) -> str:
    sides = unsteady_sides(cvs)
    if not sides:
        return ""
    return (f"; the {' and '.join(s for s, _ in sides)} run's own samples varied by CV "
            f"{' and '.join(f'{v:.0%}' for _, v in sides)}: the machine was "
            "unsteady while it ran")


def spread(values: Sequence[float]) -> float | None:
    """Relative spread of a side's values (max / min - 1), None with fewer than two."""
    vals = [float(v) for v in values]
    if len(vals) < 2 or min(vals) <= 0:
        return None
    return max(vals) / min(vals) - 1


def family_of(name: str, rows: Sequence[tuple[Sequence[float], Sequence[float]]],
              higher_is_better: bool) -> Family:
    """A family from its rows' (baseline values, candidate values) pairs."""
    def worst(side: int) -> float | None:
        got = [x for x in (spread(r[side]) for r in rows) if x is not None]
        return max(got) if got else None

    changes = [statistics.fmean(_logs(c, higher_is_better)) -
               statistics.fmean(_logs(b, higher_is_better))
               for b, c in rows if b and c and min(*b, *c) > 0]
    return Family(name, (worst(0), worst(1)), statistics.median(changes) if changes else None)


def decide(base: Sequence[float], cand: Sequence[float], higher_is_better: bool, *,
           statistic: str = "median", threshold_pct: float = DEFAULT_THRESHOLD_PCT,
           alpha: float = DEFAULT_ALPHA, values: tuple[float, float] | None = None,
           samples: tuple[Sequence[float], Sequence[float]] | None = None,
           pooled: bool = False, family: Family | None = None,
           floor: run_noise.Floor | None = None) -> Decision:
    """Decide a change from each side's replication units (`base`, `cand`: one value per
    round, of every run a side pools). `pooled`: a side holds several runs, and the t-test
    decides; else the one-run rule with `family` (default: the measurement alone) and `floor`,
    what unchanged pairs of this mode showed (analysis/run_noise.py). `values`
    are the two figures the ratio compares (default: the units' medians); `samples` are the
    sides' raw samples, whose CV is reported as evidence. Peaks over sizes (statistic 'max')
    are not tested: their per-size rows are."""
    b = [float(x) for x in base]
    c = [float(x) for x in cand]
    mb, mc = values if values is not None else (statistics.median(b), statistics.median(c))
    r, pct = ratio(mb, mc, higher_is_better), change_pct(mb, mc, higher_is_better)
    units = (len(b), len(c))
    cvs = _evidence(samples) if samples else None
    if statistic == "max":
        why = ("a peak over sizes: its per-size rows are tested instead"
               if max(units) > 1 else "a single peak figure, not repeated samples")
        return Decision(NOT_TESTED, r, pct, None, reason=why, units=units, cv=cvs)
    if min(b) == max(b) == min(c) == max(c):
        return Decision(NO_CHANGE, r, pct, None, reason="identical values", units=units,
                        cv=cvs)
    if min(b + c) <= 0:
        return Decision(INCONCLUSIVE, r, pct, None, reason="a value of 0 or less cannot be "
                        "compared as a ratio", units=units, cv=cvs)
    if not pooled:
        return _one_run(b, c, higher_is_better, threshold_pct, r, pct, units, cvs,
                        family or family_of("it", [(b, c)], higher_is_better), floor, alpha,
                        samples)
    lb, lc = _logs(b, higher_is_better), _logs(c, higher_is_better)
    df = len(lb) + len(lc) - 2
    if len(lb) < 2 and len(lc) < 2:
        return Decision(INCONCLUSIVE, r, pct, None, units=units, cv=cvs, noise_known=False,
                        reason=f"{NOISE_UNKNOWN}: one value a side, so this machine's run-to-run "
                               "noise for it is not known" + _noisy_note(cvs))
    se = math.sqrt((_ss(lb) + _ss(lc)) / df * (1 / len(lb) + 1 / len(lc)))
    crit = _t_crit(alpha, df)
    noise = (math.exp(crit * se) - 1) * 100
    diff = statistics.fmean(lc) - statistics.fmean(lb)
    factor = math.log1p(threshold_pct / 100)
    beyond = _beyond(lb, lc, alpha, factor)
    if beyond is not None:
        outcome = REGRESSED if beyond < 0 else IMPROVED
        return Decision(outcome, r, pct, TEST, None, noise_pct=noise, units=units, cv=cvs,
                        reason="every value of one side lies beyond every value of the other, "
                               "by more than the threshold and the steadier side's noise"
                               + _noisy_note(cvs))
    if se == 0:
        p = 0.0 if diff else 1.0
    else:
        from scipy.stats import t

        p = float(2 * t.sf(abs(diff / se), df))
    significant = p <= alpha
    if significant and diff < -factor:
        return Decision(REGRESSED, r, pct, TEST, p, noise_pct=noise, units=units, cv=cvs,
                        reason=_noisy_note(cvs).removeprefix("; "))
    if significant and diff > factor:
        return Decision(IMPROVED, r, pct, TEST, p, noise_pct=noise, units=units, cv=cvs)
    if significant:
        return Decision(WITHIN, r, pct, TEST, p, noise_pct=noise, units=units, cv=cvs,
                        reason=f"significant but within ±{threshold_pct:g}%")
    if abs(diff) > factor:
        return Decision(INCONCLUSIVE, r, pct, TEST, p, noise_pct=noise, units=units, cv=cvs,
                        reason=f"with nothing changed, this machine's values of it differ by "
                               f"up to {noise:.0f}%: a smaller change cannot be called here"
                               + _noisy_note(cvs))
    return Decision(NO_CHANGE, r, pct, TEST, p, noise_pct=noise, units=units, cv=cvs)


def _beyond(lb: list[float], lc: list[float], alpha: float, factor: float) -> float | None:
    """The signed gap between the two sides' ranges (log units, + when the candidate is
    better), when it is wider than the threshold and the steadier side's own noise band;
    else None."""
    gap = min(lc) - max(lb) if min(lc) > max(lb) else (max(lc) - min(lb) if max(lc) < min(lb)
                                                       else 0.0)
    if gap == 0.0:
        return None
    bands = []
    for side in (lb, lc):
        if len(side) >= 2:
            s = math.sqrt(_ss(side) / (len(side) - 1))
            bands.append(_t_crit(alpha, len(side) - 1) * s * math.sqrt(1 / len(lb) + 1 / len(lc)))
    if not bands or abs(gap) <= max(factor, min(bands)):
        return None
    return gap


def _one_run(b: list[float], c: list[float], hib: bool, threshold_pct: float,
             r: float | None, pct: float | None, units: tuple[int, int],
             cvs: tuple[float, float] | None, fam: Family, floor: run_noise.Floor | None,
             alpha: float, samples: tuple[Sequence[float], Sequence[float]] | None = None
             ) -> Decision:
    """One run a side: beyond the threshold and what unchanged pairs of this mode showed
    (`floor`), where pairs calibrated it; else beyond the family's widest spread, and moved
    with its family (see the module's docstring). Where a side has one round, whose values
    cannot overlap the other side's, the sides' raw samples must not overlap instead: a
    kernel slow for part of one round leaves samples at the other side's level."""
    lb, lc = _logs(b, hib), _logs(c, hib)
    if min(len(b), len(c)) < 2 and samples and min(len(samples[0]), len(samples[1])) >= 2 \
            and min(min(samples[0]), min(samples[1])) > 0:
        lb, lc = _logs([float(x) for x in samples[0]], hib), \
            _logs([float(x) for x in samples[1]], hib)
    gap = min(lc) - max(lb) if min(lc) > max(lb) else (
        max(lc) - min(lb) if max(lc) < min(lb) else 0.0)
    if floor is not None:
        return _calibrated(gap, threshold_pct, r, pct, units, cvs, floor, alpha, (lb, lc))
    known = [n for n in fam.noise if n is not None]
    if not known:
        return Decision(INCONCLUSIVE, r, pct, None, units=units, cv=cvs, noise_known=False,
                        reason=f"{NOISE_UNKNOWN}: no measurement of {fam.name} has two values "
                               "on a side, so this machine's run-to-run noise for it is not "
                               "known" + _noisy_note(cvs))
    widest = max(known)
    bar = max(math.log1p(threshold_pct / 100), math.log1p(widest))
    moved = fam.change is not None and abs(fam.change) > bar and (fam.change > 0) == (gap > 0)
    noise = widest * 100
    if gap and abs(gap) > bar and moved:
        return Decision(REGRESSED if gap < 0 else IMPROVED, r, pct, SPREAD, None,
                        noise_pct=noise, units=units, cv=cvs,
                        reason=f"every value lies beyond the other side's by more than "
                               f"{math.expm1(bar):.0%}, and {fam.name} moved with it (median "
                               f"{_median_change(fam)})" + _noisy_note(cvs))
    big = r is not None and r > 0 and abs(math.log(r)) > math.log1p(threshold_pct / 100)
    if big:
        why = (f"with nothing changed, this machine's values of {fam.name} differ by up to "
               f"{widest:.0%} between rounds: a smaller change cannot be called here"
               if not gap or abs(gap) <= bar else
               f"{fam.name} did not move with it (median {_median_change(fam)}):"
               " one kernel's state, which a VM can hold for a whole run, can explain it; "
               "pool runs to call it")
        return Decision(INCONCLUSIVE, r, pct, SPREAD, None, noise_pct=noise, units=units,
                        cv=cvs, reason=why + _noisy_note(cvs))
    return Decision(NO_CHANGE, r, pct, SPREAD, None, noise_pct=noise, units=units, cv=cvs)


def _calibrated(gap: float, threshold_pct: float, r: float | None, pct: float | None,
                units: tuple[int, int], cvs: tuple[float, float] | None,
                floor: run_noise.Floor, alpha: float,
                rounds: tuple[list[float], list[float]]) -> Decision:
    """One run a side where unchanged pairs calibrated the measurement: its change beyond
    the threshold and the floor they set, every round of one side beyond every round of
    the other, and every round of the run judged beyond the baseline by the threshold and
    the floor (held; `rounds`: the log values of the baseline's rounds and the run's). The
    pairs showed what a kernel held in a slow state or a neighbour's hour does to it, which
    is what the family rule stood in for."""
    change = math.log(r) if r is not None and r > 0 else 0.0
    threshold = math.log1p(threshold_pct / 100)
    bar = max(threshold, floor.log)
    noise = math.expm1(bar) * 100
    # held: one round 45% slow and the other 5% is a passing state, not a change. Held by the
    # threshold alone, 2 of 12 fresh unchanged --quick pairs were called, judged by the floors
    # of 30 others: one round 45% slow and one 5–6% (docs/reference.md, "Calibrating the gate")
    mid, judged = statistics.median(rounds[0]), rounds[1]
    held = all(x - mid < -bar for x in judged) or all(x - mid > bar for x in judged)
    if gap and held and abs(change) > bar and (gap > 0) == (change > 0) and \
            floor.log <= run_noise.WIDEST_JUDGED:
        return Decision(REGRESSED if change < 0 else IMPROVED, r, pct, CALIBRATED, None,
                        noise_pct=noise, units=units, cv=cvs,
                        reason=_floor_words(floor, change) + _noisy_note(cvs))
    if abs(change) > threshold:
        why = (_one_side_words(change, floor, alpha) if abs(change) <= bar or
               floor.log > run_noise.WIDEST_JUDGED else
               "its rounds on the two sides overlap: pool runs to call it" if not gap else
               f"not held: a round of it lies less than {abs(_toward(bar, change)):.0f}% "
               f"{'below' if change < 0 else 'above'} the baseline, where the others do not "
               "(a passing state, not the machine's); pool runs to call it")
        return Decision(INCONCLUSIVE, r, pct, CALIBRATED, None, noise_pct=noise, units=units,
                        cv=cvs, reason=why + _noisy_note(cvs))
    return Decision(NO_CHANGE, r, pct, CALIBRATED, None, noise_pct=noise, units=units, cv=cvs)


def _toward(bar: float, change: float) -> float:
    """A bar of log ratio `bar` as the percent it is in the change's direction: a floor of
    +32% is −24% for a slowdown ('−26% is beyond the 32%' read as a contradiction)."""
    return math.expm1(bar if change > 0 else -bar) * 100


def _floor_words(floor: run_noise.Floor, change: float) -> str:
    """The calibrated bar a called change passed, in its reason."""
    return (f"its change, {fmt.signed_percent(math.expm1(change) * 100, 0)}, is beyond the "
            f"{fmt.signed_percent(_toward(floor.log, change), 0)} that unchanged pairs of "
            f"{floor.source} stay within "
            f"({floor.pairs} pairs), with every round beyond it and beyond the other side's")


def _one_side_words(change: float, floor: run_noise.Floor, alpha: float) -> str:
    """Why a change under a calibrated floor is not called, and what would call it."""
    n = run_noise.runs_needed(change, floor, alpha)
    more = (f"{n} runs a side, pooled, would judge a change of this size" if n else
            "even 20 runs a side would not judge a change of this size here")
    return (f"one run a side: with nothing changed, {floor.source} differ by up to "
            f"{floor.pct:.0f}% in it ({floor.pairs} unchanged pairs); {more}")
