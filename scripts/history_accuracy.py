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
Otava: apache-otava 0.8.0's compute_change_points at its defaults (window 50, p 0.001), on the
runs' values (the exponential of the mean log of the rounds, what benchbench tests), from its
own virtual environment (`python -m venv /tmp/otava && /tmp/otava/bin/pip install
apache-otava==0.8.0`). The series are seeded, so `--against` reads Otava's tallies from an
earlier run's --json instead of running it again. `--recheck N` measures each step cell where
Otava found more than either judging again, on N fresh series, all three judged: a cell of 30
series moves by three series or so on chance alone (a cell found in 37% of 300 series was
found in 23% of its 30).
`--alpha A`: history's --alpha, for the cost of finding more steps in false change points
(the default, 0.001, is history's). The summary gives each detector's point on that trade-off
per history length (its false change points per series on pure noise, the mean of the noise
cells, and its share of the planted single steps, nothing recorded), so runs at several A with
`--against` trace benchbench's curve through Otava's point.

The studies beside the step tables (--machines, --gpu-nodes, --pooling, --latest, --gate,
--alone, --tails) are described in _history_studies.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable

# the modules beside this script: on the path when it runs, as scripts/ is
import _history_series as series
from _history_series import (
    LENGTHS,
    NOISE_TIMES,
    PLANTED,
    Planted,
    Tallies,
    Tally,
    benchbench,
    draw,
    families,
    otava,
    pct,
    run_values,
)
from _history_studies import alone, gate, gpu_nodes, latest, machines, pooling, tails

from benchbench.analysis import change_points as cp
from benchbench.core.units import signed_percent
from benchbench.engine.progress import task_progress


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
            span = f"{signed_percent(min(reads))} to {signed_percent(max(reads))}"
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
    series.ALPHA[0] = a.alpha
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
