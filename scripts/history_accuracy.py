"""How often `benchbench history` finds a real slowdown, calls a false one, and gates right, on
seeded synthetic families; beside Apache Otava's detector on the same series when its Python is
given. Measured on this machine.

    python scripts/history_accuracy.py [--series 40] [--mix run|rounds|both]
        [--otava /path/to/otava-venv/bin/python [--recheck 300] | --against earlier.json]
        [--json out.json] [--alpha 0.001]
    python scripts/history_accuracy.py --machines 100
    python scripts/history_accuracy.py --gpu-nodes 100
    python scripts/history_accuracy.py --pooling 1000
    python scripts/history_accuracy.py --latest 3000
    python scripts/history_accuracy.py --gate 200
    python scripts/history_accuracy.py --alone 100
    python scripts/history_accuracy.py --tails 300 [--otava /path/to/otava-venv/bin/python]

The families (each series n runs of 3 rounds around 100, lognormal noise of a CV per run):
- noise: nothing planted;
- step: one step of −3/−5/−10/−20% at an early run (n/4), the middle or the last two runs;
- two steps: −10% at n/3 and −10% more at 2n/3;
- spike: one run 25% slow in the middle (a noisy neighbour for one night);
- drift: −10% linearly over the last min(n, 30) runs;
- staircase: four −4% steps (−15% in all) at n/5, 2n/5, 3n/5, 4n/5;
- recover: −10% at n/3 and back at 2n/3;
- recorded change: the environment changes at n/2 (a driver update) and nothing else does.
Each series is judged twice: with nothing recorded, and with the environment recorded as
changing at each planted step (as when a driver update makes the step; issue 31's harness
changed the kernel version there), where a step may be tested at its place alone.
Two mixes of the noise: "run" (a run's rounds share its noise, and differ by a quarter of it
among themselves) and "rounds" (every round draws its own noise: the runs scatter no more than
their rounds say).

Pure noise and the idle recorded change get ten times as many series as the other cells. A
planted step is found when a change point lies within 3 runs of it; a change point further
from every planted step is false. The gate is `history`'s exit rule at the defaults (5%); for
the staircases and drifts the summary also gives the change the gate reports (its median per
cell), which a line reads larger than steps it runs through.
`--machines N`: histories, not series. Issue 31's harness scaled every headline figure of a
history (6,096 series in 2,032 histories: three a history); here N histories of three series
per cell, the run mix, each run's noise correlated by rho (0, 0.5, 1) across the three series
of its history, every series with the same plant. A history exits 3 where the gate calls any of
its series, or the index of them all (history_series.composite); the table gives each apart.
`--pooling N`: pure noise between the two mixes, where each run's rounds carry a share of its
noise, so that the runs scatter 2 to 49 times the variance their rounds say (the run mix is 49
times, the rounds mix once): N series per cell of 12 and 30 runs at 3%, the false change points
per series and the gate's exits, where the rounds' pooling pre-test is tried hardest.
`--latest N`: the gate on the latest run alone, where the run before it lies on the level of
the runs before (an outlier run the gate counts, since nothing after it can say it was one
night): pure noise at CV 3 and 10% (N series a cell) and a latest run 10 or 25% slow in 1%
noise and 15 or 25% slow in 3% (N / 3), over 4, 6, 12 and 30 runs, both mixes; how often the
history exits 3.
`--gate N`: the gate alone on slow regressions, the series the full run draws (the same
seeds): drifts and staircases at every length and noise, N histories a cell, and pure noise,
3 N; both mixes; how often the history exits 3.
`--gpu-nodes N`: whole histories of an 8-GPU node (the tests' synthetic node: matmul bf16 and
fp16 and a host-to-device copy per GPU, ResNet50 on cuda:0; 26 series with the index, and 24
of each GPU against the other GPUs), written as runs and read by `history` itself, n = 12 and
30 runs: each GPU's own run-to-run noise (1 or 3%) and a day's noise all its GPUs share (0 or
3%). Healthy (4 N histories a cell), one GPU 10% slower from the middle run (N), and all
GPUs 6% slower from it with a driver update recorded there (N); how often the history exits 3,
and the change points and exits per GPU series beside it: the slow GPU's own bf16 series, and
its bf16 against the others.
Otava: apache-otava 0.8.0's compute_change_points at its defaults (window 50, p 0.001), on the
runs' values (the exponential of the mean log of the rounds, what benchbench tests), from its
own virtual environment (`python -m venv /tmp/otava && /tmp/otava/bin/pip install
apache-otava==0.8.0`). The series are seeded, so `--against` reads Otava's tallies from an
earlier run's --json instead of running it again. `--recheck N` measures each step cell where
Otava found more than either judging again, on N fresh series, all three judged: a cell of 30
series moves by three series or so on chance alone (a cell found in 37% of 300 series was
found in 23% of its 30).
`--alone N`: whether the method loses anything the test at its heart would find: each single
step and each pure noise cell, N series a cell, both mixes, judged by `history` (nothing
recorded) and by the maximum-t test alone (max_t.best_split over the whole series at alpha,
one split, no candidates, merge or outlier runs); steps found by each, and series of pure
noise with any change point.
`--tails N`: pure noise whose tails are heavier than the normal's (Student's t of 5 and 3
degrees of freedom, the variance that of the CV, 3%; 3 N series a cell): its false change
points (and Otava's where --otava is given) and the gate's exits; and better spells that come
back (+10% for 2 runs, +25% for 3, in the middle) and a gain of 10% held ten runs and lost
(N a cell), in normal noise; each history gated as `history` gates it, and with no spell
passed over as the gate's reference (history_gate.SPELL_RUNS 0), as before it.
`--alpha A`: history's --alpha, for the cost of finding more steps in false change points
(the default, 0.001, is history's). The summary gives each detector's point on that trade-off
per history length (its false change points per series on pure noise, the mean of the noise
cells, and its share of the planted single steps, nothing recorded), so runs at several A with
`--against` trace benchbench's curve through Otava's point.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import Pool

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate, max_t
from benchbench.compare.history_series import index_points
from benchbench.engine.progress import task_progress

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


def judged(p: Planted, drawn: list[list[list[float]]], otava_py: str | None) -> Tallies:
    """The series judged by benchbench with nothing recorded and with p's changes recorded,
    and by Otava when its Python is given."""
    blind, recorded = Tally(), Tally()
    for pts in drawn:
        blind.add(p, *benchbench(pts, []))
        recorded.add(p, *benchbench(pts, p.recorded()))
    theirs = None
    if otava_py:
        theirs = Tally()
        for cuts in otava(otava_py, [run_values(x) for x in drawn]):
            theirs.add(p, cuts)
    return blind, recorded, theirs


def measure(count: int, mix: str, otava_py: str | None, against: dict[str, Tally],
            progress: Callable[[str], None]) -> dict[str, Tallies]:
    out: dict[str, Tallies] = {}
    for name, planted in families():
        rng = random.Random(f"{name} {mix}")
        times = NOISE_TIMES if planted.family in ("noise", "recorded change") else 1
        drawn = [draw(planted, mix, rng) for _ in range(count * times)]
        blind, recorded, theirs = judged(planted, drawn, otava_py)
        out[name] = (blind, recorded, theirs or against.get(name))
        progress(name)
    return out


def cells_done(bar: Callable[[int, int], None], total: int) -> Callable[[str], None]:
    """progress(name) for measure() and recheck(): each cell done moves the bar on by one."""
    done = itertools.count(1)
    return lambda name: bar(next(done), total)


def earlier(path: str | None, mix: str) -> dict[str, Tally]:
    """Otava's tallies per cell from an earlier --json (the last of each cell's tallies)."""
    if path is None:
        return {}
    with open(path) as fh:
        cells = json.load(fh).get(mix, {})
    return {k: Tally(**v[-1]) for k, v in cells.items() if v[-1] is not None}


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "—"


def report(results: dict[str, Tallies], mix: str) -> list[str]:
    lines = [f"## noise mix: {mix}", "",
             "Each pair: with nothing recorded / with the environment recorded as changing at "
             "each planted step.", ""]
    lines += ["| series | found (benchbench) | found (Otava) | false CPs per series "
              "(benchbench / Otava) | location error, runs | gate exit 3 |",
              "|---|---|---|---|---|---|"]
    for name, (a, r, b) in results.items():
        err = " / ".join(f"{statistics.fmean(x.errors):.1f}" if x.errors else "—"
                         for x in (a, r))
        theirs = pct(b.found, b.planted) if b else "—"
        false = " / ".join(f"{x.false / x.series:.3f}" for x in (a, r)) + (
            f" / {b.false / b.series:.3f}" if b else "")
        found = f"{pct(a.found, a.planted)} / {pct(r.found, r.planted)}"
        if name.startswith("spike"):
            found = f"outlier run {pct(a.spike_outlier, a.series)}"
            theirs = f"CP at it {pct(b.spike_cp, b.series)}" if b else "—"
            false += f"; CP at it {pct(a.spike_cp, a.series)}"
        lines.append(f"| {name} | {found} | {theirs} | {false} | {err} | "
                     f"{pct(a.gate, a.series)} / {pct(r.gate, r.series)} |")
    return lines


def share(a: int, b: int) -> str:
    """a of b in percent: to a tenth, and to two figures below 1% (1 of 3,000 is 0.033%)."""
    x = 100 * a / b
    return f"{x:.2g}%" if 0 < x < 1 else f"{x:.1f}%".replace(".0%", "%")


def counted(a: int, b: int) -> str:
    """a of b, and its share: '3 of 1000 (0.3%)'."""
    return f"{a} of {b} ({share(a, b)})"


def short_of(x: Tally, otava: Tally | None) -> bool:
    """Whether benchbench found a smaller share of the planted steps than Otava did (never
    where nothing was planted: pure noise, a spike, an idle recorded change)."""
    return (otava is not None and x.planted > 0 and otava.planted > 0
            and x.found / x.planted < otava.found / otava.planted)


def operating_points(results: dict[str, Tallies]) -> list[str]:
    """Per history length, each detector's point on the trade-off: its false change points per
    series on pure noise (the mean over the noise cells) and the share of every planted single
    step it finds, nothing recorded; Otava's beside where its tallies are. Run again at other
    --alpha values, the lines trace benchbench's curve through Otava's point."""
    lines = []
    for n in LENGTHS:
        noise = [v for k, v in results.items() if k.startswith(f"noise n={n} ")]
        steps = [v for k, v in results.items() if k.startswith("step") and f" n={n} " in k]
        if not noise or not steps:
            continue
        said = []
        for which, who in ((0, "benchbench"), (2, "Otava")):
            if any(v[which] is None for v in noise + steps):
                continue
            false = statistics.mean(v[which].false / v[which].series for v in noise)
            found = sum(v[which].found for v in steps) / sum(v[which].planted for v in steps)
            said.append(f"{who} {false:.4f} false change points per series, {found:.1%} of "
                        "the steps found")
        lines.append(f"n = {n}, nothing recorded: " + "; ".join(said))
    return lines


def summary(results: dict[str, Tallies]) -> list[str]:
    def worst(prefix: str, which: int) -> float:
        return max(v[which].false / v[which].series for k, v in results.items()
                   if k.startswith(prefix))

    lines = [f"false change points on pure noise: at most {worst('noise', 0):.3f} per series "
             "(target ≤ 0.01); at a recorded change that moved nothing: at most "
             f"{worst('recorded change', 1):.3f}"]
    steps = {k: v for k, v in results.items() if k.startswith("step") and v[2] is not None}
    for which, judged in ((0, "nothing recorded"), (1, "the step's change recorded")):
        behind = [(k, v[which].found / v[which].planted, v[2].found / v[2].planted)
                  for k, v in steps.items() if short_of(v[which], v[2])]
        if steps:
            lines.append(f"{judged}: step cells where benchbench finds at least Otava's share: "
                         f"{len(steps) - len(behind)} of {len(steps)}" + "".join(
                             f"\n  {k}: {x:.0%} against {y:.0%}" for k, x, y in behind))
    lines += operating_points(results)
    for family in ("staircase", "drift"):
        for which, judged in ((0, "nothing recorded"), (1, "recorded")):
            cells = [(k, v[which]) for k, v in results.items() if k.startswith(family)
                     and ("cv=1" in k.split() or "cv=3" in k.split())]
            low = min(cells, key=lambda kv: kv[1].gate / kv[1].series)
            reads = [statistics.median(t.reads) for _, t in cells if t.reads]
            span = f"{min(reads):+.1f}% to {max(reads):+.1f}%".replace("-", "−")
            lines.append(f"{family}, CV ≤ 3%, {judged}: the gate exits 3 in at least "
                         f"{pct(low[1].gate, low[1].series)} ({low[0]}); the change it "
                         f"reports, median per cell: {span} (planted: {PLANTED[family]})")
    return lines


def to_recheck(results: dict[str, Tallies]) -> list[str]:
    """The step cells where benchbench found fewer than Otava, with nothing recorded or with
    the step's change recorded: those recheck() measures again."""
    return [name for name, (a, r, b) in results.items()
            if name.startswith("step") and (short_of(a, b) or short_of(r, b))]


def recheck(results: dict[str, Tallies], mix: str, count: int, otava_py: str,
            progress: Callable[[str], None]) -> list[str]:
    """The step cells where benchbench found fewer than Otava (with nothing recorded, or with
    the step's change recorded), measured again on `count` fresh series each, all three
    judged: a cell of 30 series moves by three series or so on chance alone."""
    planted = dict(families())
    lines, behind = [], [0, 0]
    for name in to_recheck(results):
        a, r, b = results[name]
        short = [short_of(x, b) for x in (a, r)]
        p = planted[name]
        rng = random.Random(f"{name} {mix} again")
        blind, ours, theirs = judged(p, [draw(p, mix, rng) for _ in range(count)], otava_py)
        assert theirs is not None  # otava_py is given
        still = [x.found < theirs.found for x in (blind, ours)]
        behind = [n + (s and t) for n, s, t in zip(behind, short, still, strict=True)]
        lines.append(f"  {name}: {blind.found} / {ours.found} of {count} against Otava's "
                     f"{theirs.found}" + ("" if any(still) else " (at least as many)"))
        progress(name)
    steps = sum(k.startswith("step") for k in results)
    return [f"again on {count} fresh series (nothing recorded / the step's change recorded):",
            *lines, f"step cells where benchbench finds at least Otava's share, after this: "
            f"{steps - behind[0]} / {steps - behind[1]} of {steps}"] if lines else []


MACHINE_SERIES = 3  # a history's series in issue 31's harness (6,096 in 2,032 histories)


def draw_machine(p: Planted, rho: float, rng: random.Random) -> list[list[list[float]]]:
    """MACHINE_SERIES series of one history, the run mix: each run's noise shared across them
    with correlation rho, its rounds' own quarter of it apart."""
    sd = math.log1p(p.cv / 100)
    out: list[list[list[float]]] = [[] for _ in range(MACHINE_SERIES)]
    for i in range(p.n):
        level = level_at(p, i)
        shared = rng.gauss(0, 1)
        for series in out:
            z = math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.gauss(0, 1)
            run = level * math.exp(sd * z)
            series.append([run * math.exp(rng.gauss(0, sd / 4)) for _ in range(3)])
    return out


def machine_cell(args: tuple[str, Planted, float, int]) -> tuple[int, int, int]:
    """Histories of one --machines cell that exit 3: (on a series, on the index, either)."""
    name, p, rho, count = args
    rng = random.Random(f"machine {name} {rho}")
    alone = index = either = 0
    for _ in range(count):
        drawn = draw_machine(p, rho, rng)
        a = any(benchbench(pts, [])[2] for pts in drawn)
        b = benchbench([list(x) for x in index_points(drawn, [True] * len(drawn))], [])[2]
        alone, index, either = alone + a, index + b, either + (a or b)
    return alone, index, either


def machines(count: int) -> list[str]:
    """The gate on histories of MACHINE_SERIES series: how often any series exits 3, the
    index of them all, and either (the history's exit)."""
    cells = []
    for n in LENGTHS:
        for cv in CVS:
            cells.append((f"noise n={n} cv={cv}", Planted("noise", n, cv, ())))
        for cv in (1, 3):
            cells.append((f"drift n={n} cv={cv}",
                          Planted("drift", n, cv, (), drift=min(n, 30), total=0.9)))
            cells.append((f"staircase n={n} cv={cv}", Planted(
                "staircase", n, cv, tuple((k * n // 5, 0.96) for k in range(1, 5)))))
    jobs = [(name, p, rho, count) for name, p in cells for rho in (0.0, 0.5, 1.0)]
    with Pool() as pool:
        out = pool.map(machine_cell, jobs)
    lines = [f"## histories of {MACHINE_SERIES} series, the run mix (--machines)", "",
             "| history | noise shared across its series | exit 3: a series | the index | "
             "either (the history) |", "|---|---|---|---|---|"]
    for (name, _, rho, _), exits in zip(jobs, out, strict=True):
        lines.append(f"| {name} | {rho:g} | "
                     + " | ".join(f"{x} ({share(x, count)})" for x in exits) + " |")
    print("\n".join(lines), flush=True)
    return lines


LATEST_CELLS = [(n, cv, factor) for n in (4, 6, 12, 30)
                for cv, factor in ((3, 1.0), (10, 1.0), (1, 0.9), (1, 0.75), (3, 0.85), (3, 0.75))]


def latest_cell(args: tuple[int, float, float, str, int]) -> tuple[int, int, int]:
    """(histories that exit 3, histories where a run is called an outlier run, histories) of
    one --latest cell."""
    n, cv, factor, mix, count = args
    exits = called = 0
    for seed in range(count):
        p = Planted("latest", n, cv, (), spike=n - 1, spike_factor=factor)
        _, outliers, exit3, _ = benchbench(draw(p, mix, random.Random(
            f"latest {n} {cv} {factor} {mix} {seed}")), [])
        exits += exit3
        called += bool(outliers)
    return exits, called, count


def latest(count: int) -> list[str]:
    """The gate on the latest run alone: pure noise, and a latest run slow by a factor."""
    lines = ["## the latest run alone (--latest)", "",
             "| runs | noise (CV) | the latest run | run mix: exit 3 | rounds mix: exit 3 | "
             "a run called an outlier run: run mix | rounds mix |",
             "|---|---|---|---|---|---|---|"]
    cells = [(n, cv, f, mix, count if f == 1.0 else count // 3)
             for n, cv, f in LATEST_CELLS for mix in ("run", "rounds")]
    with Pool() as pool:
        out = pool.map(latest_cell, cells)
    for i, (n, cv, f) in enumerate(LATEST_CELLS):
        (a, oa, c), (b, ob, _) = out[2 * i], out[2 * i + 1]
        what = "as the others" if f == 1.0 else f"{(f - 1) * 100:+.0f}%".replace("-", "−")
        lines.append(f"| {n} | {cv}% | {what} | {a} of {c} | {b} of {c} | {oa} | {ob} |")
    print("\n".join(lines), flush=True)
    return lines


GATE_FAMILIES = ("drift", "staircase", "noise")


def gate_cell(args: tuple[str, Planted, str, int]) -> tuple[int, int, int]:
    """(histories that exit 3, histories beyond the threshold whose test did not hold,
    histories) of one --gate cell: the first `count` series the full run draws for it."""
    name, planted, mix, count = args
    rng = random.Random(f"{name} {mix}")
    exits = unheld = 0
    for _ in range(count):
        _, _, regressed, change = benchbench(draw(planted, mix, rng), [])
        exits += regressed
        unheld += (not regressed and change is not None
                   and change < -cp.DEFAULT_THRESHOLD_PCT)
    return exits, unheld, count


def gate(count: int) -> list[str]:
    """The gate on slow regressions (GATE_FAMILIES), both mixes: how often a history exits 3,
    and how often it reads beyond the threshold without its test holding ("more runs will
    tell": a drift that holds at ten times alpha, a step whose test does not hold)."""
    cells = [(name, p, mix, count * (3 if p.family == "noise" else 1))
             for name, p in families() if p.family in GATE_FAMILIES for mix in ("run", "rounds")]
    with Pool() as pool:
        out = pool.map(gate_cell, cells)
    lines = ["## the gate on slow regressions (--gate)", "",
             "| history | run mix: exit 3 | beyond the threshold, not held | rounds mix: exit 3 "
             "| beyond the threshold, not held |", "|---|---|---|---|---|"]
    for i in range(0, len(cells), 2):
        (a, u, c), (b, v, _) = out[i], out[i + 1]
        lines.append(f"| {cells[i][0]} | {counted(a, c)} | {counted(u, c)} | {counted(b, c)} "
                     f"| {counted(v, c)} |")
    print("\n".join(lines), flush=True)
    return lines


def tails_cells() -> list[tuple[str, Planted]]:
    """--tails: pure noise with normal and heavy tails (Student's t of 5 and 3 degrees of
    freedom, the variance the same), and better spells that come back, and a gain held ten
    runs and lost, in normal noise."""
    cells = [(f"noise, {f't{df}' if df else 'normal'}, n={n}", Planted("noise", n, 3, (), df=df))
             for df in (0, 5, 3) for n in LENGTHS]
    for n in (12, 30, 100):
        for cv in (1, 3):
            at = n // 2
            cells += [(f"+10% for 2 runs and back, n={n} cv={cv}",
                       Planted("spell", n, cv, ((at, 1.1), (at + 2, 1 / 1.1)))),
                      (f"+25% for 3 runs and back, n={n} cv={cv}",
                       Planted("spell", n, cv, ((at, 1.25), (at + 3, 1 / 1.25))))]
    cells += [(f"+10% for 10 runs, then lost, n=30 cv={cv}",
               Planted("gain lost", 30, cv, ((10, 1.1), (20, 1 / 1.1)))) for cv in (1, 3)]
    return cells


def tails_cell(args: tuple[str, Planted, str, int, str | None]) -> tuple[int, int, int, int,
                                                                         int | None]:
    """(false change points, histories that exit 3, histories that exit 3 where a spell may be
    the reference (SPELL_RUNS 0, as before it), histories, Otava's false change points) of one
    --tails cell; a planted spell's change points are not false."""
    name, planted, mix, count, otava_py = args
    rng = random.Random(f"{name} {mix}")
    drawn = [draw(planted, mix, rng) for _ in range(count)]
    spell_runs = history_gate.SPELL_RUNS
    false = exits = before = 0
    for pts in drawn:
        found = cp.detect(pts, alpha=ALPHA[0])
        false += Tally.cut_false(planted, [x.at for x in found.shifts])
        regressed = []
        try:  # the gate as it is, then with no spell passed over
            for spells in (spell_runs, 0):
                history_gate.SPELL_RUNS = spells
                g = history_gate.judge(pts, found, True, cp.DEFAULT_THRESHOLD_PCT, ALPHA[0])
                regressed.append(bool(g and g.regressed))
        finally:
            history_gate.SPELL_RUNS = spell_runs
        exits, before = exits + regressed[0], before + regressed[1]
    theirs = None
    if otava_py:
        theirs = sum(Tally.cut_false(planted, cuts)
                     for cuts in otava(otava_py, [run_values(x) for x in drawn]))
    return false, exits, before, count, theirs


def tails(count: int, otava_py: str | None) -> list[str]:
    """The change points and the gate where the noise has heavy tails, and on better spells
    that come back: the series either mix draws, each history judged with the gate's spells
    (history_gate.SPELL_RUNS) and without them."""
    cells = [(name, p, mix, count * (3 if p.family == "noise" else 1), otava_py)
             for name, p in tails_cells() for mix in ("run", "rounds")]
    with Pool() as pool:
        out = pool.map(tails_cell, cells)
    lines = ["## heavy tails and spells that come back (--tails)", "",
             "Each: false change points per series (Otava's beside where its Python is given) "
             f"/ exit 3 / exit 3 with a spell of up to {history_gate.SPELL_RUNS} runs as the "
             "gate's reference (before)", "",
             "| history | run mix | rounds mix |", "|---|---|---|"]
    for i in range(0, len(cells), 2):
        words = []
        for false, exits, before, c, theirs in out[i:i + 2]:
            per = f"{false / c:.4f}" + (f" (Otava {theirs / c:.4f})" if theirs is not None
                                        else "")
            words.append(f"{per} / {counted(exits, c)} / {counted(before, c)}")
        lines.append(f"| {cells[i][0]} | {' | '.join(words)} |")
    print("\n".join(lines), flush=True)
    return lines


POOLING_SHARES = (1 / 48, 1 / 8, 1 / 4, 1 / 3, 1 / 2, 1.0)  # the rounds' variance / the runs' own


def pooling(count: int) -> list[str]:
    """False change points and gate exits on pure noise whose runs scatter more than their
    rounds say, by how much (POOLING_SHARES), and in the rounds mix (as much)."""
    lines = ["## pure noise between the mixes, CV 3% (--pooling)", "",
             "| runs | the runs' variance / what their rounds say | false change points per "
             "series | gate exits |", "|---|---|---|---|"]
    sd = math.log1p(0.03)
    for n in (12, 30):
        for share in (*POOLING_SHARES, None):
            cps = exits = 0
            for seed in range(count):
                if share is None:
                    pts = draw(Planted("noise", n, 3, ()), "rounds",
                               random.Random(f"pooling {n} rounds {seed}"))
                else:
                    rng = random.Random(f"{n} {share} {seed}")
                    wsd = math.sqrt(share * 3) * sd
                    pts = [[v * math.exp(rng.gauss(0, wsd)) for _ in range(3)]
                           for v in (100 * math.exp(rng.gauss(0, sd)) for _ in range(n))]
                cuts, _, gated, _ = benchbench(pts, [])
                cps, exits = cps + len(cuts), exits + gated
            ratio = "1 (the rounds mix)" if share is None else f"{(1 + share) / share:.0f}"
            lines.append(f"| {n} | {ratio} | {cps / count:.4f} | {exits / count:.4f} |")
            print(lines[-1], flush=True)
    return lines


def alone_cell(args: tuple[str, Planted, str, int]) -> tuple[int, int]:
    """(series where `history` finds the planted step, where the maximum-t test alone does) of
    one --alone cell; on pure noise, the series with any change point."""
    name, planted, mix, count = args
    rng = random.Random(f"{name} {mix} alone")
    at = planted.steps[0][0] if planted.steps else None
    ours = alone = 0
    for _ in range(count):
        pts = draw(planted, mix, rng)
        cuts = benchbench(pts, [])[0]
        split = max_t.best_split(cp.run_logs(pts), cp.rounds_noise(pts))
        held = split is not None and split.p <= ALPHA[0]
        if at is None:
            ours, alone = ours + bool(cuts), alone + held
        else:
            ours += any(abs(c - at) <= NEAR for c in cuts)
            alone += held and split is not None and abs(split.at - at) <= NEAR
    return ours, alone


def alone(count: int) -> list[str]:
    """`history` against the maximum-t test alone (alone_cell), by history length and mix, and
    the cells where the test alone found the most more."""
    cells = [(name, p, mix, count * (NOISE_TIMES if p.family == "noise" else 1))
             for name, p in families() if p.family in ("step", "noise")
             for mix in ("run", "rounds")]
    with Pool() as pool:
        out = pool.map(alone_cell, cells)
    lines = ["## history against the maximum-t test alone (--alone)", "",
             "| runs | mix | steps found: history / the test alone | pure noise, series with a "
             "change point: history / the test alone |", "|---|---|---|---|"]
    for n in LENGTHS:
        for mix in ("run", "rounds"):
            mine = [(c, o) for c, o in zip(cells, out, strict=True)
                    if c[1].n == n and c[2] == mix]
            steps = [o for c, o in mine if c[1].family == "step"]
            noise = [(o, c[3]) for c, o in mine if c[1].family == "noise"]
            planted = count * len(steps)
            lines.append(
                f"| {n} | {mix} | {counted(sum(a for a, _ in steps), planted)} / "
                f"{counted(sum(b for _, b in steps), planted)} | "
                f"{sum(a for (a, _), _ in noise)} / {sum(b for (_, b), _ in noise)} of "
                f"{sum(k for _, k in noise)} |")
    worst = sorted(((o[1] - o[0], c[0], c[2], o) for c, o in zip(cells, out, strict=True)
                    if c[1].family == "step"), key=lambda w: -w[0])[:5]
    lines += ["", f"the cells where the test alone found the most more (of {count}):"]
    lines += [f"  {name} ({mix} mix): {o[0]} / {o[1]}" for _, name, mix, o in worst]
    print("\n".join(lines), flush=True)
    return lines


GPU_NODE_CELLS = [(n, own, day) for n in (12, 30) for own in (1, 3) for day in (0, 3)]
HEALTHY_TIMES = 4  # healthy nodes get four times the histories: their exits are rare


def gpu_node_history(args: tuple[int, int, int, str, int]) -> tuple[list[str], int, int]:
    """One 8-GPU node's history through `history` itself: the series that exit 3, the change
    points in the GPU series, and the series."""
    import shutil
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
    from synthetic_runs import gpu_node

    from benchbench.compare import history
    from benchbench.core import results

    n, own, day, plant, seed = args
    rng = random.Random(f"gpu node {n} {own} {day} {plant} {seed}")
    root = Path(tempfile.mkdtemp(prefix="benchbench-gpu-node-"))
    try:
        for i in range(n):
            late = i >= n // 2
            per_gpu = {g: math.exp(rng.gauss(0, own / 100))
                       * (0.9 if plant == "one GPU" and g == 5 and late else 1.0)
                       * (0.94 if plant == "driver" and late else 1.0) for g in range(8)}
            run = gpu_node("gpu-a", factor=math.exp(rng.gauss(0, day / 100)), per_gpu=per_gpu,
                           started=f"2026-{10 + i // 28:02d}-{i % 28 + 1:02d}T02:00:00+00:00",
                           driver="555.42.02" if plant == "driver" and late else "550.54.15")
            folder = root / f"r{i:03d}"
            folder.mkdir()
            results.save(run, folder / "results.json")
        h = history.build([str(root / "*")])
        gpu = [s for s in h.series if s.probe == "matmul" and s.alpha is None]
        return ([s.name for s in h.regressions], sum(len(s.shifts) for s in gpu),
                len(h.series))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def gpu_nodes(count: int) -> list[str]:
    """The exit of whole 8-GPU node histories (GPU_NODE_CELLS), healthy (HEALTHY_TIMES count)
    and with a plant (count)."""
    from benchbench.compare import history_series

    lines = ["## 8-GPU node histories through `history` (--gpu-nodes)", "",
             "| runs | each GPU's noise | a day's, shared | plant | exit 3 | change points per "
             "matmul series (16, the planted steps' included) | the planted GPU's bf16 exits "
             "| its bf16 against the other GPUs exits |", "|---|---|---|---|---|---|---|---|"]
    with Pool() as pool:
        for n, own, day in GPU_NODE_CELLS:
            for plant in ("healthy", "one GPU", "driver"):
                histories = count * (HEALTHY_TIMES if plant == "healthy" else 1)
                out = pool.map(gpu_node_history,
                               [(n, own, day, plant, seed) for seed in range(histories)])
                exits = sum(bool(r) for r, _, _ in out)
                points = sum(c for _, c, _ in out)
                sick = sum("matmul peak bf16 (cuda:5)" in r for r, _, _ in out)
                behind = sum(f"matmul peak bf16 {history_series.AGAINST} (cuda:5)" in r
                             for r, _, _ in out)
                lines.append(f"| {n} | {own}% | {day}% | {plant} | {counted(exits, histories)} | "
                             f"{points / (16 * histories):.4f} | "
                             f"{pct(sick, count) if plant != 'healthy' else '—'} | "
                             f"{pct(behind, count) if plant != 'healthy' else '—'} |")
                print(lines[-1], flush=True)
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=40, help="series per cell")
    ap.add_argument("--otava", help="a Python with apache-otava installed")
    ap.add_argument("--against", help="Otava's tallies from an earlier run's --json")
    ap.add_argument("--mix", choices=("run", "rounds", "both"), default="both",
                    help="the noise: a run's rounds share it (run), each round its own (rounds), "
                         "or both (default)")
    ap.add_argument("--json", help="write the tallies here")
    ap.add_argument("--recheck", type=int, metavar="N",
                    help="measure the cells where Otava found more again, on N fresh series "
                         "(needs --otava)")
    ap.add_argument("--alpha", type=float, default=cp.DEFAULT_ALPHA,
                    help=f"history's --alpha (default {cp.DEFAULT_ALPHA}): what more steps "
                         "found cost in false change points")
    ap.add_argument("--machines", type=int, metavar="N",
                    help="only the gate on N histories of three series per cell")
    ap.add_argument("--gpu-nodes", type=int, metavar="N",
                    help="only whole 8-GPU node histories through `history`, N per cell")
    ap.add_argument("--latest", type=int, metavar="N",
                    help="only the gate on the latest run alone, N series of noise per cell")
    ap.add_argument("--pooling", type=int, metavar="N",
                    help="only pure noise between the two mixes, N series per cell")
    ap.add_argument("--gate", type=int, metavar="N",
                    help="only the gate on drifts and staircases, N histories per cell "
                         "(pure noise 3 N)")
    ap.add_argument("--alone", type=int, metavar="N",
                    help="only history against the maximum-t test alone, N series per step "
                         "cell (pure noise 10 N)")
    ap.add_argument("--tails", type=int, metavar="N",
                    help="only heavy-tailed noise (3 N series a cell) and better spells that "
                         "come back (N), with Otava's false change points where --otava is "
                         "given")
    a = ap.parse_args()
    if not 0 < a.alpha < 1:
        ap.error(f"--alpha {a.alpha}: a level between 0 and 1, such as 0.001")
    ALPHA[0] = a.alpha
    started = time.perf_counter()
    if a.tails:
        tails(a.tails, a.otava)
        print(f"{a.tails} histories per cell (pure noise 3 N), "
              f"{time.perf_counter() - started:.0f} s")
        return 0
    # the modes that measure one thing alone, each with what its count counts
    for count, mode, counted in ((a.latest, latest, "series of noise"),
                                 (a.pooling, pooling, "series"),
                                 (a.gate, gate, "histories"),
                                 (a.alone, alone, "series"),
                                 (a.gpu_nodes, gpu_nodes, "histories"),
                                 (a.machines, machines, "histories")):
        if count:
            mode(count)
            print(f"{count} {counted} per cell, {time.perf_counter() - started:.0f} s")
            return 0
    dump = {}
    cells = len(families())
    for mix in (("run", "rounds") if a.mix == "both" else (a.mix,)):
        # a bar on a terminal; nothing in a log, where the tables say what was measured
        with task_progress(f"the {mix} mix's {cells} cells") as bar:
            res = measure(a.series, mix, a.otava, earlier(a.against, mix), cells_done(bar, cells))
        # Each mix's table and tallies as soon as they are measured (6.5 min a mix at 30
        # series on a 2-core VM): the recheck after them, minutes more, must not cost them.
        dump[mix] = {k: [vars(x) if x else None for x in v] for k, v in res.items()}
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(dump, fh)
        print("\n".join(report(res, mix) + [""] + summary(res) + [""]), flush=True)
        if a.recheck and a.otava:
            behind = len(to_recheck(res))
            with task_progress(f"the {behind} cells where Otava found more, again") as bar:
                lines = recheck(res, mix, a.recheck, a.otava, cells_done(bar, behind))
            print("\n".join(lines + [""]), flush=True)
    print(f"{a.series} series per cell, alpha {a.alpha:g}, "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
