"""How often `benchbench fleet` calls a healthy node an outlier, whether it finds a sick one, and
how long 64 nodes take. Measured on this machine.

1. False outliers: --fleets healthy fleets of 32 and of 256 nodes of 8 GPUs and 3 rounds, 3%
   spread (σ, normal) from node to node, each GPU 1% more; how many fleets fail (a low outlier
   node, or a low GPU inside its node), by analysis/outliers.py's rule as compare/fleet.py
   applies it to one measurement. Two mixes: the 3% is each node's own level ("node"), or
   each round's noise on alike nodes ("rounds").
2. Found: a node 15% slow, and one GPU 20% slow in an otherwise healthy node, in each fleet;
   beside it, in the node mix, what an oracle finds that knows the healthy nodes' spread
   exactly (the 3%, the GPUs' 1% and the rounds' 0.3% averaged over the node) and spends the
   same alpha on the same nodes: the ceiling for any bar on one measurement; and Grubbs' test,
   the likelihood-ratio test for one low outlier among normal values, which must estimate the
   spread from the fleet as the rule does (its bar drawn from normal fleets at the same alpha).
3. Two nodes 15% slow, in fleets of their own (node mix): each must be found, though the
   other could widen the spread it is judged by (--only-two runs this alone).
4. Several measurements (--several fleets of each): the node mix in four measurements at once,
   each node's levels in them correlated (0.8, 0.95, 1) over the nodes, the slow node 15% slow
   in all four; alpha paid for the nodes and GPUs times the effective number of measurements as
   fleet counts it (outliers.effective_tests, at the bar's tail).
5. Earlier runs (fleet --before; --earlier fleets of each): the node mix measured twice, each
   node's own level the same both times and moved by 0, 1 or 3% (σ) between them, the GPUs'
   1% and the rounds drawn afresh; the slow node 15% slower the second time. Each node's
   change is held against the others' as well as its level against theirs, both paid from the
   nodes' share of alpha, as fleet does.
6. Time: 64 nodes of 8 GPUs written as results.json files, `benchbench fleet` end to end: the
   nodes alone, with their earlier runs given with --before, and with both given as the nodes
   (an archive: each node's latest run judged, the run before it its earlier run).

7. Headline figures of their own noise (--headline N alone, issue 71): n nodes of three
   figures, each figure × its own N(1, 0.03) (each node's own level, or every round's noise),
   a node 15% slow and one 8% slow in all three. Per node-figure, fleet's rule beside Grubbs'
   test at the same false-alarm rate (its bar drawn at alpha / 3: measurement by measurement);
   per node, found in any figure, and with the index of all three (outliers.combined, as
   fleet judges it), whose noise averages down.

    python scripts/fleet_bench.py [--fleets 400] [--several 100] [--earlier 400] [--only-two]
    python scripts/fleet_bench.py --headline 200
    python scripts/fleet_bench.py --healthy 16000

8. Healthy fleets near alpha (--healthy N alone): item 7's healthy fleets, N of 32 nodes and
   N / 4 of 256 per mix, failing through a figure or only through the index (one binomial
   error beside each; at 300 fleets 1% and 1.5% are 3 and 4.5 fleets, which chance mixes).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scipy import stats

from benchbench.analysis import change_points as cp
from benchbench.analysis import outliers
from benchbench.compare.fleet import GPU_SHARE

TESTS = Path(__file__).resolve().parents[1] / "tests" / "support"


def fleet(rng: random.Random, n: int = 32, slow_node: int | None = None,
          slow_gpu: int | None = None, mix: str = "node",
          levels: list[float] | None = None, also_slow: int | None = None
          ) -> list[list[list[float]]]:
    """n nodes × 8 GPUs × 3 rounds. mix "node": the 3% is each node's own level (its rounds
    agree to 0.3%), or `levels` gives each node's; "rounds": the nodes are alike and every
    round draws the 3% itself. `slow_node` and `also_slow` are 15% slow."""
    nodes = []
    for i in range(n):
        own = levels[i] if levels else rng.gauss(1, 0.03) if mix == "node" else 1.0
        f = own * (0.85 if i in (slow_node, also_slow) else 1.0)
        sd = 0.003 if mix == "node" else 0.03
        nodes.append([[f * rng.gauss(1, 0.01) * (0.8 if i == slow_gpu and g == 3 else 1.0)
                       * rng.gauss(1, sd) for _ in range(3)] for g in range(8)])
    return nodes


def node_values(nodes: list[list[list[float]]]) -> list[float]:
    """Each node's value: the median of its GPUs' means, as fleet takes it."""
    return [statistics.median(statistics.fmean(r) for r in g) for g in nodes]


def judged(nodes: list[list[list[float]]], alpha: float = outliers.DEFAULT_ALPHA,
           measurements: tuple[float, float] = (1.0, 1.0),
           then: list[list[list[float]]] | None = None
           ) -> tuple[set[int], set[tuple[int, int]]]:
    """(the low outlier nodes, the low outlier (node, GPU)s inside their node), by fleet's
    rule for one measurement of several (`measurements`: their effective number for the
    nodes and for the GPUs, as fleet counts them): alpha shared between the node and the GPU
    tests as fleet shares it (GPU_SHARE). `then`: the nodes' earlier runs, each node's change
    since its own held against the others' too, the nodes' tests doubled."""
    n = len(nodes)
    gpu_value = [[statistics.fmean(r) for r in g] for g in nodes]
    node_value = [statistics.median(g) for g in gpu_value]
    rounds = cp.rounds_noise([r for g in nodes for r in g])
    med = statistics.median(node_value)
    tests = n * measurements[0] * (2 if then else 1)
    by_node = outliers.score(node_value, tests=tests, alpha=(1 - GPU_SHARE) * alpha,
                             rounds=(rounds.run_var * med**2, rounds.df))
    odd = {i for i, s in enumerate(by_node.scores) if s.low}
    if then:
        before = node_values(then)
        ratios = [a / b for a, b in zip(node_value, before, strict=True)]
        was = cp.rounds_noise([r for g in then for r in g])
        r = statistics.median(ratios)
        changes = outliers.score(ratios, tests=tests, alpha=(1 - GPU_SHARE) * alpha,
                                 rounds=((rounds.run_var + was.run_var) * r**2,
                                         rounds.df + was.df))
        odd |= {i for i, s in enumerate(changes.scores) if s.low}
    devs = [v / statistics.median(g) - 1 for g in gpu_value for v in g]
    sigma, df = outliers.relative_spread(devs)
    inside = set()
    for i, g in enumerate(gpu_value):
        m = statistics.median(g)
        got = outliers.score(g, tests=8 * n * measurements[1], alpha=GPU_SHARE * alpha,
                             spread=(sigma * m, df))
        inside |= {(i, j) for j, s in enumerate(got.scores) if s.low}
    return odd, inside


# The node mix's spread of one node's value (the median of its GPUs' means), all of it known.
NODE_SIGMA = math.sqrt(0.03**2 + (0.01**2 + 0.003**2 / 3) * math.pi / 2 / 8)


def oracle_finds(nodes: list[list[list[float]]], node: int,
                 alpha: float = outliers.DEFAULT_ALPHA) -> bool:
    """The node below the fleet's median by more than a normal bar at the same share of alpha over
    the nodes, with the healthy spread known instead of estimated."""
    values = node_values(nodes)
    bar = stats.norm.isf((1 - GPU_SHARE) * alpha / len(nodes))
    return values[node] / statistics.median(values) - 1 < -bar * NODE_SIGMA


def grubbs_bar(n: int, alpha: float = outliers.DEFAULT_ALPHA, draws: int = 200_000,
               level: float | None = None) -> float:
    """Grubbs' one-sided bar, (mean − min) / s, that n normal values pass with the nodes' share
    of alpha (or `level`): drawn, since its exact tail has no closed form."""
    import numpy as np

    rng = np.random.default_rng(n)
    got = []
    for _ in range(draws // 10_000):
        x = rng.standard_normal((10_000, n))
        got.append((x.mean(axis=1) - x.min(axis=1)) / x.std(axis=1, ddof=1))
    return float(np.quantile(np.concatenate(got),
                             1 - (level if level is not None else (1 - GPU_SHARE) * alpha)))


def grubbs_finds(nodes: list[list[list[float]]], node: int, bar: float) -> bool:
    """The node is the fleet's lowest, and Grubbs' statistic passes the bar."""
    return grubbs_low(node_values(nodes), bar) == node


def rates(count: int) -> None:
    for mix in ("node", "rounds"):
        for n in (32, 256):
            rng = random.Random(f"{mix} {n}")
            failed = found_node = found_gpu = oracle = grubbs = 0
            bar = grubbs_bar(n) if mix == "node" else 0.0
            for _ in range(count):
                odd, inside = judged(fleet(rng, n, mix=mix))
                failed += bool(odd or inside)
                sick = fleet(rng, n, slow_node=17, slow_gpu=5, mix=mix)
                odd, inside = judged(sick)
                found_node += 17 in odd
                found_gpu += (5, 3) in inside
                oracle += mix == "node" and oracle_finds(sick, 17)
                grubbs += mix == "node" and grubbs_finds(sick, 17, bar)
            ceiling = (f" (an oracle that knows the spread: {oracle}; Grubbs' test, which "
                       f"estimates it: {grubbs})" if mix == "node" else "")
            print(f"{mix:>6} mix, {n:3d} nodes: a healthy fleet fails (a low outlier node or "
                  f"GPU) in {failed} of {count}; the 15% slow node found in {found_node}"
                  f"{ceiling}, the 20% slow GPU in {found_gpu}", flush=True)


def two_slow(count: int) -> None:
    """Two nodes 15% slow in the node mix: how often each is found, and both. A second slow
    node must not hide the first by widening the spread it is judged by."""
    for n in (32, 256):
        rng = random.Random(f"two {n}")
        each = both = 0
        for _ in range(count):
            odd, _ = judged(fleet(rng, n, slow_node=17, also_slow=18))
            each += (17 in odd) + (18 in odd)
            both += {17, 18} <= odd
        print(f"  node mix, {n:3d} nodes, two 15% slow nodes: each found in {each} of "
              f"{2 * count}, both in {both} of {count}", flush=True)


def correlated(rng: random.Random, n: int, m: int, rho: float) -> list[list[float]]:
    """Each node's own level in each of m measurements: 3% spread in each, correlation rho
    between any two of them over the nodes."""
    out = [[] for _ in range(m)]
    for _ in range(n):
        shared = rng.gauss(0, 1)
        for j in range(m):
            z = math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.gauss(0, 1)
            out[j].append(1 + 0.03 * z)
    return out


def counted(fleets: list[list[list[list[float]]]], alpha: float = outliers.DEFAULT_ALPHA
            ) -> tuple[float, float]:
    """The effective number of measurements for the nodes and for the GPUs, as fleet's _budget
    takes them (outliers.paid_tests)."""
    nodes = [list(row) for row in zip(*(node_values(f) for f in fleets), strict=True)]
    gpus = []
    for f in fleets:
        means = [[statistics.fmean(r) for r in g] for g in f]
        gpus.append([v / statistics.median(g) for g in means for v in g])
    gpus = [list(row) for row in zip(*gpus, strict=True)]
    n, m = len(nodes), len(fleets)
    return (outliers.paid_tests([(n, nodes, m)], (1 - GPU_SHARE) * alpha) / n,
            outliers.paid_tests([(8 * n, gpus, m)], GPU_SHARE * alpha) / (8 * n))


def several(count: int, m: int = 4, rhos: tuple[float, ...] = (0.8, 0.95, 1.0)) -> None:
    """The node mix in m measurements at once, as fleet judges them: alpha over the nodes and
    the GPUs times the effective number of measurements (counted from the fleet's own values);
    the slow node 15% slow in all of them, found where any of them flags it."""
    for rho in rhos:
        for n in (32, 256):
            rng = random.Random(f"several {rho} {n}")
            failed = found = 0
            m_effs = []
            for _ in range(count):
                for sick in (False, True):
                    fleets = [fleet(rng, n, slow_node=17 if sick else None, levels=lv)
                              for lv in correlated(rng, n, m, rho)]
                    m_eff = counted(fleets)
                    low = [judged(f, measurements=m_eff) for f in fleets]
                    if sick:
                        found += any(17 in odd for odd, _ in low)
                    else:
                        failed += any(odd or inside for odd, inside in low)
                        m_effs.append(m_eff[0])
            print(f"{m} measurements, correlation {rho:.2f}, {n:3d} nodes (effective "
                  f"measurements {min(m_effs):.1f}–{max(m_effs):.1f}): a healthy fleet fails "
                  f"in {failed} of {count}; the 15% slow node found in {found}", flush=True)


def headline_fleet(rng: random.Random, n: int, mix: str, figures: int = 3,
                   slow: dict[int, float] | None = None) -> list[list[tuple[float, ...]]]:
    """n nodes × `figures` headline figures × 3 rounds, each figure with noise of its own: in
    the node mix each figure × its own N(1, 0.03) level (its rounds agree to 0.3%), in the
    rounds mix alike nodes whose every round draws the 3%. `slow`: node -> factor on every
    figure of it (0.85, 0.92)."""
    sd = 0.003 if mix == "node" else 0.03
    out = []
    for _ in range(figures):
        col = []
        for i in range(n):
            level = (rng.gauss(1, 0.03) if mix == "node" else 1.0) * (slow or {}).get(i, 1.0)
            col.append(tuple(level * rng.gauss(1, sd) for _ in range(3)))
        out.append(col)
    return out


def headline_judged(cols: list[list[tuple[float, ...]]], alpha: float = outliers.DEFAULT_ALPHA
                    ) -> tuple[list[set[int]], set[int]]:
    """(each figure's low outliers, the index's), by fleet's rule for a group of nodes with
    no GPUs: each figure's values (the mean of its rounds) against the others', the rounds'
    noise joined where it agrees; the index of all of them (outliers.combined, as
    compare/fleet.py's _combined); alpha paid for the nodes times the effective number of
    the figures and the index (outliers.paid_tests, as _budget)."""
    values = [[statistics.fmean(r) for r in col] for col in cols]
    n = len(values[0])
    index, _ = outliers.combined([dict(enumerate(v)) for v in values], [True] * len(values))
    columns = values + ([[index[i] for i in range(n)]] if index else [])
    table = [list(row) for row in zip(*columns, strict=True)]
    tests = outliers.paid_tests([(n, table, len(columns))], alpha)
    lows = []
    for col, v in zip(cols, values, strict=True):
        noise = cp.rounds_noise(col)
        med = statistics.median(v)
        g = outliers.score(v, tests=tests, alpha=alpha,
                           rounds=(noise.run_var * med**2, noise.df) if noise.df else None)
        lows.append({i for i, s in enumerate(g.scores) if s.low})
    low_index: set[int] = set()
    if index:
        g = outliers.score([index[i] for i in range(n)], tests=tests, alpha=alpha)
        low_index = {i for i, s in enumerate(g.scores) if s.low}
    return lows, low_index


def grubbs_low(values: list[float], bar: float) -> int | None:
    """The lowest value's index where Grubbs' one-sided statistic passes `bar`."""
    low = min(range(len(values)), key=values.__getitem__)
    return low if (statistics.fmean(values) - values[low]) / statistics.stdev(values) > bar \
        else None


def headline(count: int, figures: int = 3) -> None:
    """The fleet issue 71 measured: n healthy nodes of `figures` headline figures, each with
    its own 3% noise (as each node's own level, or as every round's), plus a node 15% slow and
    one 8% slow in every figure. Per node-figure, fleet's rule beside Grubbs' test at the same
    false-alarm rate (its bar drawn from normal fleets at alpha / the figures: measurement by
    measurement, at most alpha of healthy fleets failing); per node, either found in any
    figure, and fleet's rule with the index of all figures."""
    for mix in ("node", "rounds"):
        for n in (32, 256):
            rng = random.Random(f"headline {mix} {n}")
            bar = grubbs_bar(n, level=outliers.DEFAULT_ALPHA / figures)
            failed = grubbs_failed = 0
            ours = {17: 0, 18: 0}
            gr = {17: 0, 18: 0}
            node_ours = {17: 0, 18: 0}
            node_index = {17: 0, 18: 0}
            node_gr = {17: 0, 18: 0}
            for _ in range(count):
                lows, low_index = headline_judged(headline_fleet(rng, n, mix, figures))
                failed += bool(low_index or any(lows))
                healthy = headline_fleet(rng, n, mix, figures)
                grubbs_failed += any(grubbs_low([statistics.fmean(r) for r in col], bar)
                                     is not None for col in healthy)
                cols = headline_fleet(rng, n, mix, figures, slow={17: 0.85, 18: 0.92})
                lows, low_index = headline_judged(cols)
                found_g: list[set[int]] = []  # per figure, the nodes Grubbs' test flags
                for col in cols:
                    v = [statistics.fmean(r) for r in col]
                    # Grubbs' test again on the rest once it found the lowest (as ESD would)
                    found_g.append(set())
                    first = grubbs_low(v, bar)
                    if first is not None:
                        found_g[-1].add(first)
                        second = grubbs_low([x for i, x in enumerate(v) if i != first], bar)
                        if second is not None:
                            found_g[-1].add(second + (second >= first))
                for node in (17, 18):
                    ours[node] += sum(node in low for low in lows)
                    gr[node] += sum(node in low for low in found_g)
                    node_ours[node] += any(node in low for low in lows)
                    node_index[node] += any(node in low for low in lows) or node in low_index
                    node_gr[node] += any(node in low for low in found_g)
            per = count * figures
            print(f"{mix:>6} mix, {n:3d} nodes, {figures} figures: healthy fleets failing: "
                  f"fleet {failed} of {count}, Grubbs {grubbs_failed} of {count}", flush=True)
            for node, pct in ((17, 15), (18, 8)):
                print(f"    the {pct}% slow node: flagged in {ours[node]} of {per} node-figures "
                      f"(Grubbs {gr[node]}); as a node, in any figure {node_ours[node]} of "
                      f"{count} (Grubbs {node_gr[node]}), with the index of all figures "
                      f"{node_index[node]}", flush=True)


def healthy(count: int, figures: int = 3) -> None:
    """Healthy fleets of issue 71's three figures, counted on enough of them to tell 1% from
    1.5%: `count` fleets of 32 nodes and count / 4 of 256 per mix, failing through a figure
    or only through the index."""
    for mix in ("node", "rounds"):
        for n, fleets in ((32, count), (256, count // 4)):
            rng = random.Random(f"healthy {mix} {n}")
            failed = via_index = 0
            for _ in range(fleets):
                lows, low_index = headline_judged(headline_fleet(rng, n, mix, figures))
                failed += bool(low_index or any(lows))
                via_index += bool(low_index) and not any(lows)
            err = math.sqrt(failed) / fleets * 100
            print(f"{mix:>6} mix, {n:3d} nodes: healthy fleets failing {failed} of {fleets} "
                  f"({failed / fleets:.2%}, ±{err:.2f} points), {via_index} only through the "
                  "index", flush=True)


def earlier(count: int, moves: tuple[float, ...] = (0.0, 0.01, 0.03)) -> None:
    """The node mix measured twice (fleet --before): each node's level the same both times and
    moved by `moves` (σ) between them; the slow node 15% slower the second time, found where
    its level or its change is a low outlier. Beside it, the level alone on the same fleets."""
    for move in moves:
        for n in (32, 256):
            rng = random.Random(f"earlier {move} {n}")
            failed = found = alone = 0
            for _ in range(count):
                for sick in (False, True):
                    levels = [rng.gauss(1, 0.03) for _ in range(n)]
                    then = fleet(rng, n, levels=levels)
                    now = fleet(rng, n, slow_node=17 if sick else None,
                                levels=[v * rng.gauss(1, move) for v in levels])
                    odd, inside = judged(now, then=then)
                    if sick:
                        found += 17 in odd
                        alone += 17 in judged(now)[0]
                    else:
                        failed += bool(odd or inside)
            print(f"earlier runs, each node moved {move:.0%} between them, {n:3d} nodes: a "
                  f"healthy fleet fails in {failed} of {count}; the node 15% slower since "
                  f"found in {found} (by its level alone: {alone})", flush=True)


def timed(n: int = 64) -> None:
    sys.path.insert(0, str(TESTS))
    from synthetic_runs import gpu_node

    from benchbench.core import results

    rng = random.Random(24)
    with tempfile.TemporaryDirectory(prefix="benchbench-fleet-bench-") as tmp:
        root = Path(tmp)
        for i in range(n):
            level = rng.gauss(1, 0.03)
            for folder, when, moved in (("nodes", "2026-11-30T02:00:00+00:00", 1.0),
                                        ("then", "2026-11-01T02:00:00+00:00",
                                         rng.gauss(1, 0.005))):
                d = root / folder / f"node{i:02d}"
                d.mkdir(parents=True)
                results.save(gpu_node(f"node{i:02d}", factor=level * moved, started=when,
                                      per_gpu={g: rng.gauss(1, 0.01) for g in range(8)}),
                             d / "results.json")
        nodes, then = str(root / "nodes" / "*"), str(root / "then" / "*")
        for k, (args, what) in enumerate((
                ([nodes], ""),
                ([nodes, "--before", then], ", and each node's earlier run (--before)"),
                ([nodes, then], ", and each node's earlier run among the runs given"))):
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "benchbench", "fleet", *args, "--out",
                                   str(root / f"out{k}"), "--junit", str(root / f"fleet{k}.xml")],
                                  capture_output=True, text=True)
            print(f"benchbench fleet, {n} nodes of 8 GPUs{what}, end to end with --out and "
                  f"--junit: {time.perf_counter() - started:.1f} s (exit {proc.returncode})")
        same = [(root / f"out{k}" / "fleet.csv").read_text() for k in (1, 2)]
        print("the runs given as one archive judge as --before does: "
              + ("the same fleet.csv" if same[0] == same[1] else "NOT the same fleet.csv"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fleets", type=int, default=400,
                    help="fleets of one measurement per mix and size (default 400)")
    ap.add_argument("--several", type=int, default=100,
                    help="fleets of several measurements per correlation and size (0: none)")
    ap.add_argument("--earlier", type=int, default=100,
                    help="fleets measured twice, per move and size (0: none)")
    ap.add_argument("--only-two", action="store_true",
                    help="only the fleets with two slow nodes (--fleets of each size)")
    ap.add_argument("--headline", type=int, default=0, metavar="N",
                    help="only issue 71's fleets: three headline figures of their own noise, "
                         "a node 15%% and one 8%% slow, N fleets of each mix and size")
    ap.add_argument("--healthy", type=int, default=0, metavar="N",
                    help="only healthy fleets of issue 71's three figures: N of 32 nodes and "
                         "N / 4 of 256 per mix, to count failures near alpha")
    a = ap.parse_args()
    if a.healthy:
        healthy(a.healthy)
        return 0
    if a.only_two:
        two_slow(a.fleets)
        return 0
    if a.headline:
        headline(a.headline)
        return 0
    rates(a.fleets)
    two_slow(a.fleets)
    if a.several:
        several(a.several)
    if a.earlier:
        earlier(a.earlier)
    timed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
