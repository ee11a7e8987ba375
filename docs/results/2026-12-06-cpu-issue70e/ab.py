"""Old and new code's `run --quick`, interleaved, beside a CPU hog of a given duty: does the
dataloader probe measure DALI (CPU), and in how many rounds?

    git worktree add /tmp/old <old commit>
    python ab.py OUT PAIRS DUTY /tmp/old /path/to/new > ab.jsonl

One JSON line a run: its code, exit status, wall seconds, the rounds each loader was measured
in, the best loader's figure and whether it is a floor (a loader not measured)."""

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    root, pairs, duty = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    trees = {"old": sys.argv[4], "new": sys.argv[5]}
    sys.path.insert(0, str(Path(trees["new"]) / "scripts"))
    from unchanged_pairs import hog

    for i in range(pairs):
        for which in (["old", "new"] if i % 2 == 0 else ["new", "old"]):
            out = root / f"{i:02d}-{which}"
            env = {**os.environ, "PYTHONPATH": trees[which]}
            t0 = time.time()
            with hog(duty) if duty > 0 else contextlib.nullcontext():
                r = subprocess.run([sys.executable, "-m", "benchbench", "run", "--quick",
                                    "--out", str(out)], cwd=trees[which], env=env,
                                   capture_output=True, text=True)
            wall = time.time() - t0
            probe = next(p for p in json.loads((out / "results.json").read_text())["probes"]
                         if p["name"] == "dataloader")
            ms = probe["measurements"]
            best = next(m for m in ms if m["metric"] == "best_throughput")
            print(json.dumps({
                "pair": i, "code": which, "rc": r.returncode, "wall_s": round(wall, 1),
                "rounds_by_loader": {m["key"]["loader"]: m["context"].get("rounds")
                                     for m in ms if m["metric"] == "throughput"},
                "best": round(best["value"], 1), "floor": "not_measured" in best["context"],
                "reason": probe.get("reason")}), flush=True)


if __name__ == "__main__":
    main()
