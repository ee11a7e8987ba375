"""How long `benchbench history` takes on a thousand runs, and how often its change points are
false or missed. Measured on this machine.

    python scripts/history_bench.py [--runs 1000] [--keep DIR]
    python scripts/history_bench.py --noise [--series 400]

1. Scale (the default): writes --runs synthetic results.json files of a real run's shape and
   size (every probe's measurements with their samples, the telemetry and the verdict: about
   100 KB each, like a `run --quick` on a 2-core VM) to a temporary folder, a 15% drop planted
   at the middle run with a driver change, and times `benchbench history 'DIR/*' --out ...
   --junit ...` end to end in a fresh process (start-up, reading, the change points, the files
   and their figures), then the reading and analysis alone in this process. Fails (exit 1)
   above 10 s or when the planted drop is not found at its run.
2. --noise: false change points on pure noise of this VM's size (10% CV, half shared by a
   run's rounds, half per round) in --series series of 40 runs, and the planted steps found at
   their exact run (scripts/history_accuracy.py measures detection in full).
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.compare import history
from benchbench.core import results
from benchbench.core.results import Measurement, ProbeResult, RunResult

LIMIT_S = 10.0


def _m(metric: str, key: dict[str, Any], value: float, unit: str, statistic: str,
       rounds: list[float], n: int = 20) -> Measurement:
    samples = [value * (1 + 0.01 * math.sin(i)) for i in range(n)]
    return Measurement(metric=metric, key=key, value=value, unit=unit, statistic=statistic,
                       samples=samples, higher_is_better=unit != "s",
                       context={"round_values": rounds, "rounds": len(rounds)})


def synthetic_run(i: int, factor: float, driver: str, rng: random.Random) -> RunResult:
    """A CPU run of `run --quick`'s shape: the headline figures and the rest around them."""
    def rounds(v: float) -> list[float]:
        return [v * math.exp(rng.gauss(0, 0.01)) for _ in range(2)]

    f = factor * math.exp(rng.gauss(0, 0.03))
    probes = []
    mm = []
    for dt, peak in (("fp32", 2e11), ("bf16", 4e11)):
        for size in (256, 512, 1024):
            mm.append(_m("flops", {"device": "cpu", "dtype": dt, "size": size},
                         peak * f * size / 1024, "FLOP/s", "median", rounds(peak * f)))
        mm.append(_m("peak_flops", {"device": "cpu", "dtype": dt}, peak * f, "FLOP/s", "max",
                     rounds(peak * f), 3))
    probes.append(ProbeResult(name="matmul", status="ok", resource="cpu_compute",
                              measurements=mm))
    probes.append(ProbeResult(name="memory_bandwidth", status="ok", resource="host_memory",
                              measurements=[_m("copy_bandwidth", {"memory": "host",
                                               "size_bytes": 2**28}, 3.6e10 * f, "B/s",
                                               "median", rounds(3.6e10 * f), 40)]))
    for name, metric, key, v, unit in (
            ("resnet50", "throughput", {"device": "cpu", "precision": "fp32", "image_size": 64,
                                        "batch_size": 8}, 40.0, "samples/s"),
            ("transformer", "throughput", {"device": "cpu", "precision": "fp32",
                                           "preset": "small", "seq_len": 128,
                                           "batch_size": 4}, 3600.0, "tokens/s")):
        probes.append(ProbeResult(name=name, status="ok", resource="cpu_compute", measurements=[
            _m(metric, key, v * f, unit, "total_over_time", rounds(v * f), 6),
            _m("step_time", key, 0.2 / f, "s", "median", rounds(0.2 / f), 6)]))
    probes.append(ProbeResult(name="dataloader", status="ok", resource="cpu_dataloading",
                              measurements=[_m("best_throughput", {"batch_size": 64,
                                                "image_size": 224}, 520 * f, "samples/s",
                                               "max", rounds(520 * f), 1)]))
    store = []
    for job, bs in (("seq1m", 2**20), ("rand128k", 2**17), ("rand4k", 2**12)):
        key = {"job": job, "bs": bs, "engine": "io_uring", "iodepth": 32, "numjobs": 1}
        store += [_m("read_bandwidth", key, 1.2e9 * f, "B/s", "total_over_time", [1.2e9 * f], 3),
                  _m("read_iops", key, 1.2e9 * f / bs, "ops/s", "total_over_time", [1.0], 3),
                  _m("read_latency_p99", key, 1e-3, "s", "median", [1e-3], 3)]
    probes.append(ProbeResult(name="storage", status="ok", resource="storage",
                              measurements=store))
    ar = []
    for k in range(10):
        key = {"backend": "gloo", "dtype": "fp32", "world_size": 2, "nodes": 1,
               "size_bytes": 1024 * 4**k}
        ar += [_m(m, key, 1e8 * (k + 1), u, "median", [1.0], 3)
               for m, u in (("allreduce_time", "s"), ("algbw", "B/s"), ("busbw", "B/s"))]
    probes.append(ProbeResult(name="allreduce", status="ok", resource="interconnect",
                              measurements=ar))
    tel = {"interval_s": 0.1, "flags": {}, "source": {"cpu": "psutil"},
           "probes": {p.name: {"t": [0.1 * j for j in range(150)],
                               "cpu_util": [0.9] * 150,
                               "host_memory_used_B": [1.2e9] * 150} for p in probes}}
    env = {"host": {"hostname": "nightly-box", "cpu_model": "AMD EPYC", "kernel": "6.8.0",
                    "cores_usable": 2, "memory_total": 25 * 2**30},
           "versions": {"python": "3.11.7", "torch": "2.5.0", "benchbench": "0.1.0"},
           "driver": driver, "gpus": [], "torch": {"torch": "2.5.0"},
           "identity": {"hostname": "nightly-box", "dmi": {}, "dmi_unreadable": {},
                        "gpu_uuids": []}}
    day = 1796000000 + i * 86400
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(day))
    verdict = {"analysis_version": 1, "evidence": ["x" * 80] * 60}
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at=started,
                     environment=env, config={"device_resolved": "cpu", "quick": True},
                     argv=["run", "--quick"], probes=probes, verdict=verdict,
                     extra={"telemetry": tel})


def scale(n: int, keep: Path | None) -> int:
    """The runs go to a temporary folder, removed at the end (even on Ctrl-C: about 80 MB a
    thousand runs), unless --keep names one."""
    root = keep or Path(tempfile.mkdtemp(prefix="benchbench-history-bench-"))
    try:
        return _scale(n, root)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _scale(n: int, root: Path) -> int:
    rng = random.Random(24)
    runs = root / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    drop = n // 2
    sizes = 0
    for i in range(n):
        run = synthetic_run(i, 0.85 if i >= drop else 1.0,
                            "560.28.03" if i >= drop else "550.54.15", rng)
        d = runs / f"run-{i:04d}"
        d.mkdir(exist_ok=True)
        results.save(run, d / "results.json")
        sizes += (d / "results.json").stat().st_size
    print(f"{n} results.json files, {sizes / n / 1024:.0f} KiB each, in {runs}")
    out = root / "out"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchbench", "history", str(runs / "*"),
                           "--out", str(out), "--junit", str(root / "history.xml")],
                          capture_output=True, text=True)
    whole = time.perf_counter() - started
    started = time.perf_counter()
    h = history.build([str(runs / "*")])
    analysed = time.perf_counter() - started
    found = {s.name: [s.run_at(x.at) for x in s.shifts] for s in h.series}
    print(f"benchbench history, {n} runs, end to end with --out and --junit: {whole:.1f} s "
          f"(exit {proc.returncode}); reading and analysis alone: {analysed:.1f} s")
    print(f"change points (run numbers; planted at {drop + 1}): {found}")
    ok = whole < LIMIT_S and proc.returncode == 3 and all(v == [drop + 1]
                                                          for v in found.values())
    print("ok" if ok else f"NOT OK: over {LIMIT_S:g} s, or the planted drop missed")
    return 0 if ok else 1


def _series(n: int, at: int | None, factor: float, run_cv: float, round_cv: float,
            rng: random.Random) -> list[list[float]]:
    out = []
    for i in range(n):
        level = 100 * (factor if at is not None and i >= at else 1.0)
        run = level * math.exp(rng.gauss(0, run_cv))
        out.append([run * math.exp(rng.gauss(0, round_cv)) for _ in range(2)])
    return out


def noise(count: int) -> int:
    rng = random.Random(24)
    false = sum(bool(cp.find(_series(40, None, 1, 0.07, 0.07, rng))) for _ in range(count))
    big = sum([x.at for x in cp.find(_series(40, 25, 0.65, 0.07, 0.07, rng))] == [25]
              for _ in range(count))
    small = sum([x.at for x in cp.find(_series(40, 25, 0.85, 0.02, 0.01, rng))] == [25]
                for _ in range(count))
    print(f"pure noise, 10% CV, 40 runs: a false change point in {false} of {count} series")
    print(f"a 35% drop in that noise found at its exact run in {big} of {count}")
    print(f"a 15% drop in 2% noise found at its exact run in {small} of {count}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000,
                    help="results.json files in the history (default 1000)")
    ap.add_argument("--keep", type=Path, help="write the runs here and keep them")
    ap.add_argument("--noise", action="store_true", help="the false and missed change points")
    ap.add_argument("--series", type=int, default=400,
                    help="with --noise: series of 40 runs (default 400)")
    a = ap.parse_args()
    return noise(a.series) if a.noise else scale(a.runs, a.keep)


if __name__ == "__main__":
    sys.exit(main())
