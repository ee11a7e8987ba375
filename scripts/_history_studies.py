"""The studies of scripts/history_accuracy.py beside its step tables, each a flag that
measures one thing alone:

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
"""

from __future__ import annotations

import math
import random
import sys
from multiprocessing import Pool

from _history_series import (
    ALPHA,
    CVS,
    LENGTHS,
    NEAR,
    NOISE_TIMES,
    Planted,
    Tally,
    benchbench,
    counted,
    draw,
    families,
    level_at,
    otava,
    pct,
    run_values,
    share,
)

from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate, max_t
from benchbench.compare.history_series import index_points
from benchbench.core.units import signed_percent

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
        what = "as the others" if f == 1.0 else signed_percent((f - 1) * 100, 0)
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
        for part in (*POOLING_SHARES, None):
            cps = exits = 0
            for seed in range(count):
                if part is None:
                    pts = draw(Planted("noise", n, 3, ()), "rounds",
                               random.Random(f"pooling {n} rounds {seed}"))
                else:
                    rng = random.Random(f"{n} {part} {seed}")
                    wsd = math.sqrt(part * 3) * sd
                    pts = [[v * math.exp(rng.gauss(0, wsd)) for _ in range(3)]
                           for v in (100 * math.exp(rng.gauss(0, sd)) for _ in range(n))]
                cuts, _, gated, _ = benchbench(pts, [])
                cps, exits = cps + len(cuts), exits + gated
            ratio = "1 (the rounds mix)" if part is None else f"{(1 + part) / part:.0f}"
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
