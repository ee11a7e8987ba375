"""How often Rosner's generalized ESD, as analysis/outliers.py's _esd runs it, calls a value of a
normal group low: the surplus its steps beyond the first add over the n × p that the first
step's Bonferroni bar promises, by group size n and n × p. outliers.ESD_SURPLUS holds the table
this prints, and fleet holds each step at p / (1 + the surplus), so that a healthy fleet of 12
or 32 nodes fails in alpha, not up to 1.3 or 1.1 times it.

    python scripts/esd_null.py [--draws 1000000] [--sizes 10 12 ...] [--check]

The rule is run vectorised over `--draws` normal groups a cell (numpy: outliers.py's own
function takes a millisecond a group), and first checked against outliers._esd, flag for flag,
on 2,000 groups. A step beyond the first passes where the first did not ('later'): its value
is judged against others whose most extreme values were taken out, whose standard deviation is
the smaller for it. --check draws as many groups again, runs them at the corrected p and
prints the chance of a low call beside n × p: the table holds when they agree within the
draws' error. The whole table takes about 25 minutes of one core (256 the most: --sizes splits
it over processes).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from rich.progress import Progress
from scipy.stats import t as student

from benchbench.analysis import outliers

SIZES = (10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 256)
NPS = outliers.ESD_NP  # n × p: the bar's share of a group (alpha over the columns, 0.1–1%)
CHUNK = 20_000


def esd_low(x: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Per group (a row of `x`): (a value under the median is called an outlier, the first
    step called it), as fleet reads Score.low. _esd's rule without TINY_PCT, which only
    stops calls (so the surplus without it is the most the rule has: 20,000 groups of 12 at
    3% spread and 1% read 267 low calls with it and 282 without), or the rounds' noise (with
    it the spread has more degrees of freedom and a later step less surplus)."""
    m, n = x.shape
    median = np.median(x, axis=1)
    steps = max(1, n // 5)
    rows = np.arange(m)
    left = np.ones((m, n), bool)
    passed = np.zeros((m, steps), bool)
    low = np.zeros((m, steps), bool)
    for i in range(steps):
        if n - i < outliers.MIN_GROUP:
            steps = i
            break
        xs = np.where(left, x, np.nan)
        k = np.nanargmax(np.abs(xs - np.nanmean(xs, axis=1, keepdims=True)), axis=1)
        left[rows, k] = False
        v = x[rows, k]
        others = np.where(left, x, np.nan)
        count = n - i - 1
        mean, sd = np.nanmean(others, axis=1), np.nanstd(others, axis=1, ddof=1)
        passed[:, i] = np.abs(v - mean) / (sd * math.sqrt(1 + 1 / count)) > student.isf(
            p, count - 1)
        low[:, i] = v < median
    passed, low = passed[:, :steps], low[:, :steps]
    last = steps - 1 - np.argmax(passed[:, ::-1], axis=1)
    any_low = passed.any(axis=1) & (np.cumsum(low, axis=1) > 0)[rows, last]
    return any_low, passed[:, 0] & low[:, 0]


def agrees(rng: np.random.Generator, groups: int = 2_000) -> tuple[int, int]:
    """(groups where esd_low and outliers._esd differ on whether a low value is called, groups
    where _esd calls one), at a lenient p that calls some (a group of 16 to 40 at 10% spread,
    where TINY_PCT's 5% stops no call; two values moved down 3–5σ in a third)."""
    differ = called = 0
    for _ in range(groups):
        n = int(rng.integers(16, 41))
        x = rng.standard_normal(n) * 0.1 + 1
        if rng.random() < 1 / 3:
            x[:2] -= rng.uniform(0.3, 0.5, 2)
        p = 0.01 / n
        theirs = any(x[i] < np.median(x) for i in outliers._esd(list(x), p, None))
        differ += bool(esd_low(x[None, :], p)[0][0]) != theirs
        called += theirs
    return differ, called


def cell(rng: np.random.Generator, n: int, p: float, draws: int) -> tuple[float, float]:
    """(the chance of a low call, that of a low call the first step did not make)."""
    low = later = 0
    for start in range(0, draws, CHUNK):
        any_low, first = esd_low(rng.standard_normal((min(CHUNK, draws - start), n)), p)
        low += int(any_low.sum())
        later += int((any_low & ~first).sum())
    return low / draws, later / draws


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1_000_000, help="normal groups a cell")
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="group sizes")
    ap.add_argument("--check", action="store_true",
                    help="also run each cell at the corrected p, against n × p")
    a = ap.parse_args()
    rng = np.random.default_rng(a.sizes)
    differ, called = agrees(rng)
    print(f"vectorised rule against outliers._esd: {differ} of 2,000 groups differ "
          f"({called} of them called low)")
    if differ:
        return 1
    table: dict[int, tuple[float, ...]] = {}
    with Progress(transient=True) as bar:
        task = bar.add_task("ESD on normal groups", total=len(a.sizes) * len(NPS))
        for n in a.sizes:
            row = []
            for share in NPS:
                low, later = cell(rng, n, share / n, a.draws)
                row.append(later / share)
                err = math.sqrt(later * a.draws) / a.draws / share
                line = (f"n {n:3d}, n×p {share:.3f}: a low call {low:.5f}, by a later step "
                        f"{later:.5f}: surplus {later / share:.3f} ±{err:.3f}")
                if a.check:
                    fixed, _ = cell(rng, n, outliers.esd_p(share / n, n), a.draws)
                    line += f"; at the corrected p {fixed:.5f} against {share:.5f}"
                bar.console.print(line)
                bar.advance(task)
            table[n] = tuple(round(s, 3) for s in row)
    print("ESD_SURPLUS = {" + ", ".join(f"{n}: {v}" for n, v in table.items()) + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
