"""Judge collected pairs by the floors benchbench ships (not by the pairs' own):

    python docs/results/2026-12-06-cpu-issue70c/shipped_floors.py DIR/quick

DIR is what `scripts/unchanged_pairs.py collect DIR` wrote. Prints the unchanged pairs called a
regression and what each planted pair was called for.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import unchanged_pairs as u  # noqa: E402

from benchbench.analysis import run_noise  # noqa: E402

root = Path(sys.argv[1])
unchanged, planted = u._pairs(root, "pair"), u._pairs(root, "planted")
table = run_noise.shipped()
false = [(p[0].parent.name, c) for p in unchanged if (c := u._called(u._compare(*p, table)))]
caught = [(p[0].parent.name, u._called(u._compare(*p, table))) for p in planted]
print(f"{len(unchanged)} unchanged pairs judged by the shipped floors: {len(false)} called", false)
print(f"{len(planted)} planted: {sum(bool(c) for _, c in caught)} called", caught)
