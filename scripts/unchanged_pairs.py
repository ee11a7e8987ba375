"""How far do two unchanged runs differ, and does compare's gate hold on this machine?

    python scripts/unchanged_pairs.py collect DIR [--mode quick|default] [--pairs 30]
                                                  [--planted 10] [--slowdown 0.15]
                                                  [--interleave-quick]
    python scripts/unchanged_pairs.py evaluate DIR [--write [--table PATH]] [--z Z]

collect: back-to-back pairs of `run` with nothing changed, and planted pairs (a run, then one
beside a CPU hog: a process on every core busy `--slowdown` of every 10 ms, so each core gives
the run about 1 - slowdown of its time). Planted pairs are spread among the unchanged ones, so
that a drift over the hour lands on both. Resumable: a pair whose results.json exist is kept.

--interleave-quick (with --mode default): a `run --quick` before each pair, so that quick and
default are compared on the same machine at the same hour: evaluate prints each headline
capacity of the quick run divided by the default pair's.

evaluate: each measurement's log ratio over the unchanged pairs, then compare's decision on
  - every unchanged pair, with the noise table calibrated on the OTHER pairs (leave-one-out: a
    pair never calibrates its own judgement), and with the table of all pairs;
  - every planted pair, with the table of all unchanged pairs;
and the planted hog's actual effect on the headline figures. `--write` stores the table in
benchbench/analysis/run_noise.json for this mode and device (analysis/run_noise.py reads it);
with `--table PATH`, there instead: your own machine's floors, which compare uses under
BENCHBENCH_NOISE_TABLE=PATH.
Exit 1 when an unchanged pair is called a regression or fewer than 9 in 10 planted ones are.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rich.progress import Progress

from benchbench.analysis import regression, run_noise
from benchbench.compare import align, comparison

TABLE = Path(run_noise.__file__).with_name(run_noise.FILE)
PERIOD_S = 0.010


def _spin(duty: float, cpu: int) -> None:
    """Busy `duty` of every PERIOD_S on one core, asleep the rest: a neighbour's steady load."""
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {cpu})
    busy = duty * PERIOD_S
    while True:
        start = time.perf_counter()
        while time.perf_counter() - start < busy:
            pass
        time.sleep(max(0.0, PERIOD_S - (time.perf_counter() - start)))


@contextlib.contextmanager
def hog(duty: float) -> Iterator[None]:
    cpus = sorted(os.sched_getaffinity(0))
    procs = [multiprocessing.Process(target=_spin, args=(duty, c), daemon=True) for c in cpus]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def _run(out: Path, mode: str, log: Path) -> None:
    if (out / "results.json").exists():
        return
    cmd = [sys.executable, "-m", "benchbench", "run", "--device", "cpu", "--out", str(out),
           *(["--quick"] if mode == "quick" else [])]
    with log.open("a") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
    if not (out / "results.json").exists():
        raise SystemExit(f"{out}: the run failed (exit {proc.returncode}); see {log}")


def plan(pairs: int, planted: int) -> list[str]:
    """'pair-NN' and 'planted-NN' names, the planted ones spread evenly among the others."""
    total = pairs + planted
    at = {round((k + 0.5) * total / planted) for k in range(planted)} if planted else set()
    out, u, p = [], 0, 0
    for i in range(total):
        if i in at and p < planted:
            out.append(f"planted-{p:02d}")
            p += 1
        else:
            out.append(f"pair-{u:02d}")
            u += 1
    return out


def collect(args: argparse.Namespace) -> int:
    root = Path(args.dir) / args.mode
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(json.dumps({"slowdown": args.slowdown, "mode": args.mode}))
    names = plan(args.pairs, args.planted)
    with Progress() as bar:
        task = bar.add_task(f"{args.mode} pairs", total=len(names))
        for name in names:
            d = root / name
            d.mkdir(exist_ok=True)
            first, second = ("a", "b") if name.startswith("pair") else ("base", "slow")
            if args.interleave_quick and args.mode == "default":
                _run(d / "q", "quick", d / "log.txt")
            _run(d / first, args.mode, d / "log.txt")
            if second == "slow":
                with hog(args.slowdown):
                    _run(d / second, args.mode, d / "log.txt")
            else:
                _run(d / second, args.mode, d / "log.txt")
            bar.advance(task)
    return 0


def _pairs(root: Path, kind: str) -> list[tuple[Path, Path]]:
    a, b = ("a", "b") if kind == "pair" else ("base", "slow")
    return [(d / a, d / b) for d in sorted(root.glob(f"{kind}-*"))
            if (d / a / "results.json").exists() and (d / b / "results.json").exists()]


def _compare(a: Path, b: Path, table: run_noise.Table) -> comparison.Comparison:
    return comparison.compare(align.make_sides([str(a), str(b)], []), noise=table)


def log_ratios(pairs: list[tuple[Path, Path]]) -> dict[str, list[float]]:
    """Each measurement's log(second / first), oriented so that + is better."""
    out: dict[str, list[float]] = {}
    for a, b in pairs:
        sides = align.make_sides([str(a), str(b)], [])
        for row in align.align(sides):
            if len(row.cells) < 2 or row.unit == "count" or row.statistic == "max":
                continue
            x, y = (row.cells[s.label].value for s in sides)
            if x > 0 and y > 0:
                r = math.log(y / x)
                out.setdefault(run_noise.row_id(row.probe, row.metric, row.key), []).append(
                    r if row.higher_is_better else -r)
    return out


def _table(device: str, mode: str, ratios: dict[str, list[float]]) -> run_noise.Table:
    return run_noise.parse({"calibrations": {device: {mode: run_noise.calibrate(
        ratios, run_noise.MIN_PAIRS)}}})


def _called(comp: comparison.Comparison) -> list[str]:
    return [f"{align.short_name(r)} {d.change_pct:+.1f}%" for r, _, d in
            comp.outcomes(regression.REGRESSED)] + [f"{s.probe} {s.status}" for s in comp.stopped]


def evaluate(args: argparse.Namespace) -> int:
    if getattr(args, "z", None):
        run_noise.Z = args.z  # to see what another multiple would have done; --write keeps Z's
    ok = True
    for root in sorted(p for p in Path(args.dir).iterdir() if (p / "plan.json").exists()):
        mode = json.loads((root / "plan.json").read_text())["mode"]
        device = "cpu"
        unchanged, planted = _pairs(root, "pair"), _pairs(root, "planted")
        per_pair = [log_ratios([p]) for p in unchanged]
        every = log_ratios(unchanged)
        full = _table(device, mode, every)
        print(f"## {mode}: {len(unchanged)} unchanged pairs, {len(planted)} planted")
        false_loo, false_in = [], []
        for i, pair in enumerate(unchanged):
            rest: dict[str, list[float]] = {}
            for j, r in enumerate(per_pair):
                if j != i:
                    for k, v in r.items():
                        rest.setdefault(k, []).extend(v)
            loo = _called(_compare(*pair, _table(device, mode, rest)))
            inside = _called(_compare(*pair, full))
            if loo:
                false_loo.append(f"{pair[0].parent.name}: {', '.join(loo)}")
            if inside:
                false_in.append(f"{pair[0].parent.name}: {', '.join(inside)}")
        shipped = [p for p in unchanged if _called(_compare(*p, run_noise.shipped()))]
        print(f"unchanged pairs called a regression, leave-one-out: {len(false_loo)} of "
              f"{len(unchanged)}; with every pair's table: {len(false_in)}; with the table "
              f"compare uses now ({run_noise.ENV} or the package's): {len(shipped)}")
        for line in false_loo:
            print("  ", line)
        caught = 0
        effects: dict[str, list[float]] = {}
        for pair in planted:
            called = _called(_compare(*pair, full))
            caught += bool(called)
            print(f"  {pair[0].parent.name}: " + (", ".join(called) or "not called"))
            for k, v in log_ratios([pair]).items():
                effects.setdefault(k, []).extend(v)
        if planted:
            print(f"planted slowdown called a regression: {caught} of {len(planted)}")
            headline = [k for k in effects if k.startswith("resnet50/throughput/")]
            for k in headline:
                xs = [math.expm1(x) for x in effects[k]]
                print(f"the hog's effect on {k}: median {statistics.median(xs):+.1%}, "
                      f"{min(xs):+.1%} to {max(xs):+.1%}")
        print("\nmeasurement | unchanged pairs: RMS, largest, floor | planted: median change")
        for rid, xs in sorted(every.items()):
            if len(xs) < run_noise.MIN_PAIRS:
                print(f"{rid} | {len(xs)} pairs measured it: no floor")
                continue
            c = run_noise.Calibration(*(run_noise.calibrate({rid: xs})[rid][k]
                                        for k in ("rms", "largest", "pairs")))
            eff = effects.get(rid)
            print(f"{rid} | {math.expm1(c.rms):.1%}, {math.expm1(c.largest):.1%}, "
                  f"{math.expm1(c.floor):.1%} | "
                  + (f"{math.expm1(statistics.median(eff)):+.1%}" if eff else "—"))
        agreement(root)
        ok &= not false_loo and (not planted or caught >= math.ceil(0.9 * len(planted)))
        if args.write:
            table = Path(args.table) if getattr(args, "table", None) else TABLE
            doc = json.loads(table.read_text()) if table.exists() else {}
            doc.setdefault("calibrations", {}).setdefault(device, {})[mode] = \
                run_noise.calibrate(every, run_noise.MIN_PAIRS)
            doc.setdefault("sources", {}).setdefault(device, {})[mode] = {
                "pairs": len(unchanged), "date": dt.date.today().isoformat(),
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "script": "scripts/unchanged_pairs.py"}
            table.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            print(f"wrote {table} ({device}, {mode})"
                  + ("" if table == TABLE else f": compare reads it with {run_noise.ENV}={table}"))
    return 0 if ok else 1


def capacities(run_dir: Path) -> dict[str, float]:
    """The verdict's measured capacities (samples/s), recomputed from the measurements."""
    from benchbench.analysis import verdict
    from benchbench.core import results

    v = verdict.verdict(results.load(run_dir / "results.json")).main
    return {r: c.value for r, c in v.capacity_details.items() if c.value}


def agreement(root: Path) -> None:
    """Each headline capacity of a quick run over the default runs of its pair."""
    rows = [(d, d / "q", d / "a", d / "b") for d in sorted(root.glob("pair-*"))
            if (d / "q" / "results.json").exists()]
    if not rows:
        return
    print("\nquick ÷ default, headline capacities (a pair's quick run over each default run)")
    ratios: dict[str, list[float]] = {}
    for _d, q, *defaults in rows:
        cq = capacities(q)
        for full in defaults:
            if not (full / "results.json").exists():
                continue
            cd = capacities(full)
            for r in sorted(set(cq) & set(cd)):
                ratios.setdefault(r, []).append(cq[r] / cd[r])
    # beside it, what two default runs of one pair show with nothing changed: a quick run
    # cannot agree with a default run more closely than another default run does
    same: dict[str, list[float]] = {}
    for _d, _q, a, b in rows:
        if (a / "results.json").exists() and (b / "results.json").exists():
            ca, cb = capacities(a), capacities(b)
            for r in sorted(set(ca) & set(cb)):
                same.setdefault(r, []).append(cb[r] / ca[r])
    for r, xs in ratios.items():
        again = same.get(r, [])
        print(f"{r}: median {statistics.median(xs):.3f}, range {min(xs):.3f}–{max(xs):.3f} "
              f"({len(xs)} ratios); {sum(abs(x - 1) <= 0.1 for x in xs)} within 10%"
              + (f"; the pairs' second default run ÷ their first: range {min(again):.3f}–"
                 f"{max(again):.3f}, {sum(abs(x - 1) <= 0.1 for x in again)} of {len(again)} "
                 f"within 10%" if again else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("collect")
    c.add_argument("dir")
    c.add_argument("--mode", choices=run_noise.MODES, default="quick")
    c.add_argument("--pairs", type=int, default=30)
    c.add_argument("--planted", type=int, default=10)
    c.add_argument("--slowdown", type=float, default=0.15)
    c.add_argument("--interleave-quick", action="store_true")
    e = sub.add_parser("evaluate")
    e.add_argument("dir")
    e.add_argument("--write", action="store_true")
    e.add_argument("--table", help="write here instead of into the package (your machine's "
                   f"table: compare reads it with {run_noise.ENV}=PATH)")
    e.add_argument("--z", type=float, help="judge with this multiple of the pairs' RMS instead "
                   f"of run_noise.Z ({run_noise.Z:g}); not with --write")
    args = ap.parse_args(argv)
    if args.verb == "evaluate" and args.z and args.write:
        ap.error("--z explores another multiple; the table is written with run_noise.Z")
    return collect(args) if args.verb == "collect" else evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
