"""The ceiling for a gate that must hold a drift beyond the threshold: a line known to be the
model, over the drift's runs (the last min(n, 30); for longer histories the runs before it
are the reference), Student's t of its end beyond -5% at 0.05, on the seeds of
scripts/history_accuracy.py --gate.

    python oracle.py run 300 "drift n=30 cv=3" "drift n=100 cv=5"
"""

import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.stats import t as student

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from _history_series import draw, families, run_values  # noqa: E402

mix, count = sys.argv[1], int(sys.argv[2])
planted = dict(families())
for name in sys.argv[3:]:
    rng = random.Random(f"{name} {mix}")
    hits = 0
    for _ in range(count):
        y = np.log(run_values(draw(planted[name], mix, rng)))
        n = len(y)
        k = min(n, 30)
        x = np.arange(k)
        slope, start = np.polyfit(x, y[-k:], 1)
        res = y[-k:] - (start + slope * x)
        se = math.sqrt(res @ res / (k - 2) / ((x - x.mean()) @ (x - x.mean()))) * (k - 1)
        if n > k:  # the runs before the drift are the reference
            ref = statistics.fmean(y[:-k])
            se = math.hypot(se, math.sqrt(np.var(y[:-k], ddof=1) / (n - k)))
        else:
            ref = start
        change = start + slope * (k - 1) - ref
        beyond = student.sf((math.log(0.95) - change) / se, k - 2)
        hits += bool(beyond <= 0.05 and change < math.log(0.95))
    print(f"{name} {mix}: oracle line beyond 5% at 0.05: {hits} of {count}")
