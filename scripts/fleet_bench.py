"""How often `benchbench fleet` calls a healthy node an outlier, whether it finds a sick one, and
how long 64 nodes take. Measured on this machine.

    python scripts/fleet_bench.py [--fleets 400]

1. False outliers: --fleets fleets of 32 healthy nodes whose figure varies by 3% (σ, normal)
   from node to node, and each of their 8 GPUs by 1% more; how many fleets show an outlier,
   at the node level and among the GPUs inside their nodes (analysis/outliers.py's rule,
   |z| > 3.5 against the median and 1.4826 · MAD, or 5% where that is tighter).
2. Found: a node 14% slow, and one GPU 20% slow in an otherwise healthy node, in each fleet.
3. Time: 64 nodes of 8 GPUs written as results.json files, `benchbench fleet` end to end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchbench.analysis import outliers

TESTS = Path(__file__).resolve().parents[1] / "tests" / "support"


def fleet(rng: random.Random, n: int = 32, slow_node: int | None = None,
          slow_gpu: int | None = None) -> list[list[float]]:
    nodes = []
    for i in range(n):
        f = rng.gauss(1, 0.03) * (0.86 if i == slow_node else 1.0)
        nodes.append([f * rng.gauss(1, 0.01) * (0.8 if i == slow_gpu and g == 3 else 1.0)
                      for g in range(8)])
    return nodes


def judged(nodes: list[list[float]]) -> tuple[set[int], set[tuple[int, int]]]:
    """(the outlier nodes, the outlier (node, GPU)s inside their node)."""
    by_node = outliers.score([statistics.median(g) for g in nodes])
    odd = {i for i, s in enumerate(by_node.scores) if s.outlier}
    inside = {(i, j) for i, g in enumerate(nodes)
              for j, s in enumerate(outliers.score(g).scores) if s.outlier}
    return odd, inside


def rates(count: int) -> None:
    rng = random.Random(24)
    node_fp = gpu_fp = found_node = found_gpu = 0
    for _ in range(count):
        odd, inside = judged(fleet(rng))
        node_fp += bool(odd)
        gpu_fp += bool(inside)
        odd, inside = judged(fleet(rng, slow_node=17, slow_gpu=5))
        found_node += 17 in odd
        found_gpu += (5, 3) in inside
    print(f"32 healthy nodes, 3% spread, one measurement: a false outlier node in {node_fp} of "
          f"{count} fleets, a false outlier GPU inside its node in {gpu_fp}")
    print(f"found: the 14% slow node in {found_node} of {count}, the 20% slow GPU in "
          f"{found_gpu}")


def timed(n: int = 64) -> None:
    sys.path.insert(0, str(TESTS))
    from synthetic_runs import gpu_node

    from benchbench.core import results

    rng = random.Random(24)
    with tempfile.TemporaryDirectory(prefix="benchbench-fleet-bench-") as tmp:
        root = Path(tmp)
        for i in range(n):
            d = root / "nodes" / f"node{i:02d}"
            d.mkdir(parents=True)
            results.save(gpu_node(f"node{i:02d}", factor=rng.gauss(1, 0.03),
                                  per_gpu={g: rng.gauss(1, 0.01) for g in range(8)}),
                         d / "results.json")
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "benchbench", "fleet",
                               str(root / "nodes" / "*"), "--out", str(root / "out"),
                               "--junit", str(root / "fleet.xml")], capture_output=True,
                              text=True)
        print(f"benchbench fleet, {n} nodes of 8 GPUs, end to end with --out and --junit: "
              f"{time.perf_counter() - started:.1f} s (exit {proc.returncode})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleets", type=int, default=400)
    a = ap.parse_args()
    rates(a.fleets)
    timed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
