"""How long a whole `benchbench run --quick` (or a default run) takes here, and where the time
goes: python start-up, the forkserver and the torch facts, the dataset, each probe, the reports.

    python scripts/run_time_bench.py [--runs 3] [--default] [--fresh-cache] [-- RUN_ARGS]

Runs the command `--runs` times, one after another, each into a fresh folder, and prints every
part of every run, then the medians. Fails (exit 1) when the median wall time is over the
target (60 s quick, 240 s default) or a core probe did not end ok. `--fresh-cache` gives
each run an empty cache, so the synthetic dataset is generated inside the timed run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORE = ("matmul", "memory_bandwidth", "stability", "resnet50", "transformer", "memory_fit",
        "inference", "dataloader", "storage", "pipeline", "allreduce", "ddp_scaling")
TARGET_S = {"quick": 60.0, "default": 240.0}


def one(out: Path, quick: bool, extra: list[str], cache: str | None) -> dict:
    env = dict(os.environ)
    if cache:
        env["BENCHBENCH_CACHE"] = cache
    cmd = [sys.executable, "-m", "benchbench", "run", "--device", "cpu", "--out", str(out),
           *(["--quick"] if quick else []), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    data = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() \
        else {"probes": []}
    return {"wall": wall, "code": proc.returncode, "timings": data.get("timings") or {},
            "probes": {p["name"]: (p["status"], p["duration_s"] or 0.0, p.get("reason"))
                       for p in data["probes"]},
            "left_out": [f"{o['probe']} round {o['round']}"
                         for o in (data.get("pacing") or {}).get("left_out", [])],
            "stderr": proc.stderr[-2000:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3,
                    help="runs, one after another (default 3)")
    ap.add_argument("--default", action="store_true", help="the default run, not --quick")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="an empty cache per run: dataset generation is timed too")
    ap.add_argument("extra", nargs="*", help="more flags for `benchbench run`, after --")
    a = ap.parse_args()
    kind = "default" if a.default else "quick"
    runs = []
    with tempfile.TemporaryDirectory(prefix="benchbench-time-") as tmp:
        for i in range(a.runs):
            cache = tempfile.mkdtemp(dir=tmp) if a.fresh_cache else None
            r = one(Path(tmp) / f"run-{i}", not a.default, a.extra, cache)
            runs.append(r)
            parts = ", ".join(f"{k} {v:.1f}" for k, v in r["timings"].items())
            probes = ", ".join(f"{n} {d:.1f}{'' if s == 'ok' else ' ' + s.upper()}"
                               for n, (s, d, _) in r["probes"].items())
            paced = ", ".join(r["left_out"]) or "none"
            print(f"run {i + 1}: {r['wall']:.1f} s wall, exit {r['code']}\n  parts: {parts}\n"
                  f"  probes: {probes}\n  left out to keep the minute: {paced}", flush=True)
    walls = [r["wall"] for r in runs]
    print(f"\n{kind} run: median {statistics.median(walls):.1f} s of {len(walls)} "
          f"(min {min(walls):.1f}, max {max(walls):.1f}); target ≤ {TARGET_S[kind]:.0f} s")
    names = sorted({k for r in runs for k in r["timings"]})
    for k in names:
        vals = [r["timings"].get(k, 0.0) for r in runs]
        print(f"  {k:32} median {statistics.median(vals):6.1f} s")
    for name in CORE:
        vals = [r["probes"].get(name, ("missing", 0.0, None))[1] for r in runs]
        print(f"  probe {name:26} median {statistics.median(vals):6.1f} s")
    bad = [(i + 1, n, r["probes"].get(n, ("missing", 0, None))) for i, r in enumerate(runs)
           for n in CORE if r["probes"].get(n, ("missing",))[0] != "ok"]
    for i, n, (status, _, reason) in bad:
        print(f"run {i}: {n} {status}: {reason}")
    ok = statistics.median(walls) <= TARGET_S[kind] and not bad
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
