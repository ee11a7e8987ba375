"""The history gate alone on the seeded families of scripts/_history_series.py, through the
benchbench at REPO: exits 3 per cell, nothing recorded and the change recorded.

    python gate_cells.py REPO run|rounds 300
"""

import random
import sys

repo = sys.argv[1]
sys.path[:0] = [repo, repo + "/scripts"]

import _history_series as hs  # noqa: E402

from benchbench.analysis import change_points as cp  # noqa: E402
from benchbench.analysis import history_gate as hg  # noqa: E402

assert hg.__file__.startswith(repo), hg.__file__
fam = dict(hs.families())
mix, count = sys.argv[2], int(sys.argv[3])
kinds = ("step -3%", "step -5%", "drift", "staircase", "noise", "recover", "step -10%")
for name in [k for k in fam if k.startswith(kinds)]:
    p = fam[name]
    n = count if not name.startswith("noise") else 2 * count
    exits = [0, 0]
    rng = random.Random(f"{name} {mix}")
    for _ in range(n):
        pts = hs.draw(p, mix, rng)
        for k, rec in enumerate(([], p.recorded())):
            found = cp.detect(pts, alpha=hs.ALPHA[0], changes=rec)
            g = hg.judge(pts, found, True, 5.0, hs.ALPHA[0])
            exits[k] += bool(g and g.regressed)
    print(mix, f"{name:32s}", n, exits[0], exits[1], flush=True)
