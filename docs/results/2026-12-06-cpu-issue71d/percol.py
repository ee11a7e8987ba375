"""Healthy fleets of issue 71's three headline figures: how often each of fleet's four tests
(the figures and their index) calls a node low, and how often the fleet fails.

    python percol.py node 32 4000 a
"""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import fleet_bench as fb  # noqa: E402

mix, n, fleets, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)
per_test = [0] * 4
union = 0
for _ in range(fleets):
    lows, low_index = fb.headline_judged(fb.headline_fleet(rng, n, mix, 3))
    for j, low in enumerate(lows):
        per_test[j] += bool(low)
    per_test[3] += bool(low_index)
    union += bool(low_index or any(lows))
print(mix, n, fleets, seed, "per col", per_test, "union", union, flush=True)
