"""The synthetic series of scripts/history_accuracy.py and the judges on them: the planted
families and their seeded noise, the tallies of what was found, `history`'s own detection and
gate, and Apache Otava's detector (run from its own Python). Both that script's step tables
and its studies (_history_studies.py) draw from here."""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
from dataclasses import dataclass

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate

NEAR = 3  # runs: a change point this close to a planted step found it
PLANTED = {"staircase": "−15.1%", "drift": "−10% at the last run"}
SIZES = (-3, -5, -10, -20)
CVS = (1, 3, 5, 10)
LENGTHS = (12, 30, 100)
NOISE_TIMES = 10  # pure noise gets ten times the series: its false change points are rare

OTAVA = """
import json, sys
from otava.analysis import compute_change_points
out = []
for s in json.load(sys.stdin):
    out.append([int(c.index) for c in compute_change_points(s)[0]])
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class Planted:
    family: str
    n: int
    cv: float  # percent, of a run's value
    steps: tuple[tuple[int, float], ...]  # (first run of the new level, factor)
    spike: int | None = None
    drift: int = 0  # runs of a linear drift to the end
    total: float = 1.0  # the level at the end against the start
    changes: tuple[int, ...] = ()  # recorded environment changes that move nothing
    spike_factor: float = 0.75  # the spike run's level against the others'
    df: int = 0  # the noise: Student's t of these degrees of freedom (its variance the CV's), or
    # normal where 0

    def recorded(self) -> list[int]:
        """The environment changes of the recorded judging: at each step, and the idle ones."""
        return sorted({at for at, _ in self.steps} | set(self.changes))


def where(n: int, position: str) -> int:
    return {"early": max(2, n // 4), "middle": n // 2, "last two": n - 2}[position]


def level_at(p: Planted, i: int) -> float:
    """Run i's planted level."""
    level = 100 * math.prod(f for at, f in p.steps if i >= at)
    if p.drift and i >= p.n - p.drift:
        level *= 1 + (p.total - 1) * (i - (p.n - p.drift) + 1) / p.drift
    return level * (p.spike_factor if i == p.spike else 1.0)


def unit(rng: random.Random, df: int) -> float:
    """A draw of variance 1: normal where df is 0, else Student's t of df (> 2) degrees of
    freedom, scaled (a normal over the root of a chi-square's mean square)."""
    z = rng.gauss(0, 1)
    if not df:
        return z
    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(df))
    return z / math.sqrt(chi2 / df) * math.sqrt((df - 2) / df)


def draw(p: Planted, mix: str, rng: random.Random) -> list[list[float]]:
    sd = math.log1p(p.cv / 100)
    run_sd, round_sd = (sd, sd / 4) if mix == "run" else (0.0, sd * math.sqrt(3))
    out = []
    for i in range(p.n):
        run = level_at(p, i) * math.exp(run_sd * unit(rng, p.df))
        out.append([run * math.exp(round_sd * unit(rng, p.df)) for _ in range(3)])
    return out


def families() -> list[tuple[str, Planted]]:
    out = []
    for n in LENGTHS:
        for cv in CVS:
            out.append((f"noise n={n} cv={cv}", Planted("noise", n, cv, ())))
            for size in SIZES:
                for pos in ("early", "middle", "last two"):
                    out.append((f"step {size}% {pos} n={n} cv={cv}",
                                Planted("step", n, cv, ((where(n, pos), 1 + size / 100),))))
            out.append((f"two steps n={n} cv={cv}",
                        Planted("two steps", n, cv, ((n // 3, 0.9), (2 * n // 3, 0.9)))))
            out.append((f"spike n={n} cv={cv}", Planted("spike", n, cv, (), spike=n // 2)))
            out.append((f"drift n={n} cv={cv}",
                        Planted("drift", n, cv, (), drift=min(n, 30), total=0.9)))
            out.append((f"staircase n={n} cv={cv}", Planted(
                "staircase", n, cv, tuple((k * n // 5, 0.96) for k in range(1, 5)))))
            out.append((f"recover n={n} cv={cv}",
                        Planted("recover", n, cv, ((n // 3, 0.9), (2 * n // 3, 1 / 0.9)))))
            out.append((f"recorded change n={n} cv={cv}",
                        Planted("recorded change", n, cv, (), changes=(n // 2,))))
    return out


@dataclass
class Tally:
    series: int = 0
    planted: int = 0
    found: int = 0
    false: int = 0
    errors: list[int] | None = None
    spike_cp: int = 0
    spike_outlier: int = 0
    gate: int = 0
    reads: list[float] | None = None  # the change the gate reports, per series (%)

    def add(self, p: Planted, cuts: list[int], outliers: list[int] = (), gated: bool = False,
            read: float | None = None) -> None:
        self.series += 1
        self.errors = self.errors or []
        self.reads = self.reads or []
        if read is not None:
            self.reads.append(read)
        for at, _ in p.steps:
            near = [c for c in cuts if abs(c - at) <= NEAR]
            self.planted += 1
            if near:
                self.found += 1
                self.errors.append(min(abs(c - at) for c in near))
        if not p.drift:  # a drift has no one place to find; its cuts are no false ones
            self.false += self.cut_false(p, cuts)
        if p.spike is not None:
            self.spike_cp += any(abs(c - p.spike) <= 1 for c in cuts)
            self.spike_outlier += p.spike in outliers
        self.gate += gated

    @staticmethod
    def cut_false(p: Planted, cuts: list[int]) -> int:
        """The cuts further than NEAR from every planted step and more than a run from the
        spike."""
        return sum(all(abs(c - at) > NEAR for at, _ in p.steps) for c in cuts
                   if p.spike is None or abs(c - p.spike) > 1)


ALPHA = [cp.DEFAULT_ALPHA]  # --alpha: history's level for the change points and the gate


def benchbench(pts: list[list[float]], changes: list[int]
               ) -> tuple[list[int], list[int], bool, float | None]:
    found = cp.detect(pts, alpha=ALPHA[0], changes=changes)
    gate = history_gate.judge(pts, found, True, cp.DEFAULT_THRESHOLD_PCT, ALPHA[0])
    return ([s.at for s in found.shifts], [o.at for o in found.outliers],
            bool(gate and gate.regressed), gate.change_pct if gate else None)


def otava(python: str, batch: list[list[float]]) -> list[list[int]]:
    proc = subprocess.run([python, "-c", OTAVA], input=json.dumps(batch), text=True,
                          capture_output=True, check=True)
    return json.loads(proc.stdout)


def run_values(pts: list[list[float]]) -> list[float]:
    return [math.exp(statistics.fmean(math.log(v) for v in p)) for p in pts]




Tallies = tuple[Tally, Tally, Tally | None]  # nothing recorded, the changes recorded, Otava


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "—"


def share(a: int, b: int) -> str:
    """a of b in percent: to a tenth, and to two figures below 1% (1 of 3,000 is 0.033%)."""
    x = 100 * a / b
    return f"{x:.2g}%" if 0 < x < 1 else f"{x:.1f}%".replace(".0%", "%")


def counted(a: int, b: int) -> str:
    """a of b, and its share: '3 of 1000 (0.3%)'."""
    return f"{a} of {b} ({share(a, b)})"
