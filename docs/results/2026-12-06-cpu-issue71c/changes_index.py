"""Nodes measured twice, three headline figures: how often a node slower since its earlier run
in all three is flagged by each figure's change and by the index of the changes.

    python docs/results/2026-12-06-cpu-issue71c/changes_index.py [FLEETS]

Each node's level in each figure N(1, 0.03), the same both times; between the runs each figure
of each node moves by N(1, MOVE) of its own; rounds 0.3%. One node is SLOW × in all three
figures the second time. The changes (now's rounds over then's mean) are judged as fleet judges
them (scripts/fleet_bench.py's headline_judged: each figure's changes and their index, alpha
0.005, the changes' half of a fleet that pays for its levels too). Seeded.
"""

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import fleet_bench  # noqa: E402

fleets = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for n in (32, 256):
    for move in (0.01, 0.03):
        for slow in (0.92, 0.95, 1.0):
            rng = random.Random(f"changes {n} {move} {slow}")
            by_figure = by_index = figures = healthy = 0
            for _ in range(fleets):
                cols = []
                for _ in range(3):
                    col = []
                    for i in range(n):
                        level = rng.gauss(1, 0.03)
                        then = statistics.fmean(level * rng.gauss(1, 0.003) for _ in range(3))
                        now = level * rng.gauss(1, move) * (slow if i == 0 else 1.0)
                        col.append(tuple(now * rng.gauss(1, 0.003) / then for _ in range(3)))
                    cols.append(col)
                lows, low_index = fleet_bench.headline_judged(cols, alpha=0.005)
                hit = sum(0 in low for low in lows)
                figures += hit
                by_figure += hit > 0
                by_index += 0 in low_index
                healthy += not any(low - {0} for low in lows) and not (low_index - {0})
            print(f"{n:3d} nodes, moves {move:.0%}, node 0 × {slow}: flagged by a figure's change "
                  f"in {by_figure} of {fleets} ({figures} of {3 * fleets} node-figures), by the "
                  f"index of the changes in {by_index}; no other node flagged in {healthy}",
                  flush=True)
