"""Fidelity check: benchbench's LoadGen system under test against a plain one written from
LoadGen's documentation alone (IssueQuery puts samples in a queue.Queue; the main thread takes
up to a batch at a time, runs the model and completes them, while StartTest runs on a helper
thread), under the same LoadGen settings, alternating in one process.

    python scripts/sut_vs_plain.py [--rounds 3] [--image-size 32] [--batch 8] [--seconds 2]
                                   [--rate QPS] [--bound SECONDS]

Each round runs, in alternating order: LoadGen Offline at --batch through both SUTs (LoadGen's
samples/s), then LoadGen Server at one fixed rate through both (VALID or not, p99). The Server
rate is --rate (else 0.6 of one image at a time on the main thread) and its bound --bound (else
5x one image's time), both fixed before the first round. Each round also holds benchbench's
SUT's calls under LoadGen (its batches of --batch in the Offline run, of 1 in a SingleStream
run) against the same calls on the main thread alone, timed just before. It prints every round,
the Offline ratio (benchbench ÷ plain) and the per-call ratios as medians and spreads, and the
Server verdicts.
Needs torch and mlcommons-loadgen.
"""

from __future__ import annotations

import argparse
import importlib
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchbench.workloads.inference import scenarios
from benchbench.workloads.inference.loadgen_sut import (
    LoadGenHarness,
    official_settings,
    read_detail,
)
from benchbench.workloads.inference.models import TorchModels
from benchbench.workloads.inference.search import EARLY_STOPPING_QUERIES, Settings

Serve = Callable[[Sequence[int]], object]


class PlainSUT:
    """IssueQuery queues the samples; the main thread serves them, up to a batch at a time."""

    def __init__(self, lg: Any, serve: Serve, samples: int) -> None:
        self.lg, self.serve, self.batch = lg, serve, 1
        self.queue: queue.Queue[Any] = queue.Queue()
        self.sut = lg.ConstructSUT(self.issue, lambda: None)
        self.qsl = lg.ConstructQSL(samples, samples, lambda _: None, lambda _: None)

    def issue(self, queries: Sequence[Any]) -> None:
        for q in queries:
            self.queue.put(q)

    def _serve_until(self, done: threading.Event) -> None:
        while not (done.is_set() and self.queue.empty()):
            try:
                take = [self.queue.get(timeout=0.01)]
            except queue.Empty:
                continue
            while len(take) < self.batch and not self.queue.empty():
                take.append(self.queue.get_nowait())
            self.serve([q.index for q in take])
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, 0, 0)
                                          for q in take])

    def run(self, settings: Settings, outdir: str) -> dict[str, Any]:
        lg = self.lg
        self.batch = settings.batch
        ts, _ = official_settings(lg, settings.scenario)
        ts.mode = lg.TestMode.PerformanceOnly
        ts.performance_sample_count_override = 0
        ts.min_duration_ms = round(settings.min_duration_s * 1e3)
        ts.min_query_count = settings.min_query_count
        if settings.scenario == "Server":
            ts.scenario = lg.TestScenario.Server
            ts.server_target_qps = settings.rate
            ts.server_target_latency_ns = round(settings.bound_s * 1e9)
        else:
            ts.scenario = lg.TestScenario.Offline
            ts.offline_expected_qps = settings.rate
        log = lg.LogSettings()
        log.log_output.outdir = outdir
        log.log_output.prefix = f"plain_{settings.name}_"
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        done = threading.Event()

        def test() -> None:
            lg.StartTestWithLogSettings(self.sut, self.qsl, ts, log)
            done.set()

        loadgen = threading.Thread(target=test)
        loadgen.start()
        self._serve_until(done)
        loadgen.join()
        out = read_detail(f"{outdir}/plain_{settings.name}_detail.txt")
        out["valid"] = out.get("validity") == "VALID"
        return out


def _per_call(serve: Serve, batch: int, calls: int = 20) -> float:
    """The median seconds of `calls` warm calls at `batch` on this (the main) thread."""
    indices = list(range(batch))
    serve(indices)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        serve(indices)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _under_loadgen(service: list[tuple[int, float]], batch: int) -> float:
    """The median seconds of the SUT's batches of `batch` samples in one LoadGen run."""
    return statistics.median(t for k, t in service if k == batch)


def _spread(name: str, xs: list[float]) -> str:
    return (f"{name}: median {statistics.median(xs):.3f}, spread {min(xs):.3f}-{max(xs):.3f} "
            f"over {len(xs)} rounds")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--image-size", type=int, default=32,
                    help="ResNet50's input, pixels a side (default 32)")
    ap.add_argument("--batch", type=int, default=8, help="the Offline batch (default 8)")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="each Offline run's min duration (default 2)")
    ap.add_argument("--rate", type=float, default=None,
                    help="the Server target, queries/s (default 0.6 of one image at a time)")
    ap.add_argument("--bound", type=float, default=None,
                    help="the Server p99 bound, seconds (default 5x one image, rounded up)")
    args = ap.parse_args()
    lg = importlib.import_module("mlperf_loadgen")
    models = TorchModels("cpu", args.image_size, False, "small")
    serve = models.library("fp32", scenarios.LIBRARY_SAMPLES, scenarios.buckets(args.batch))
    mine = LoadGenHarness(serve, scenarios.LIBRARY_SAMPLES, None, time.perf_counter)
    plain = PlainSUT(lg, serve, scenarios.LIBRARY_SAMPLES)
    one = _per_call(serve, 1)
    expected = args.batch / _per_call(serve, args.batch)
    rate = args.rate or 0.6 / one
    bound = args.bound or scenarios.choose_bound(None, "cpu", one)[0]
    server_s = max(1.0, 1.2 * EARLY_STOPPING_QUERIES / rate)
    print(f"ResNet50 fp32 at {args.image_size} px on the CPU: one image {one * 1e3:.1f} ms, "
          f"batch {args.batch} {expected:,.0f} samples/s; Server at {rate:,.1f} queries/s "
          f"for {server_s:.1f} s, p99 bound {bound * 1e3:g} ms")
    offline: list[float] = []
    calls: dict[int, list[float]] = {1: [], args.batch: []}
    verdicts: dict[str, list[bool]] = {"benchbench": [], "plain": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("benchbench", "plain") if r % 2 == 0 else ("plain", "benchbench")
            got: dict[str, dict[str, Any]] = {}
            off = Settings("Offline", expected * 1.2, args.batch, args.seconds, 1,
                           name=f"offline_{r}", deadline_s=10 * args.seconds)
            srv = Settings("Server", rate, args.batch, server_s, EARLY_STOPPING_QUERIES, bound,
                           name=f"server_{r}", deadline_s=4 * server_s)
            for who in order:
                if who == "benchbench":
                    alone = _per_call(serve, args.batch)
                    o, s = mine.run(off), mine.run(srv)
                    calls[args.batch].append(_under_loadgen(o.service_s, args.batch) / alone)
                    alone = _per_call(serve, 1)
                    single = mine.run(Settings("SingleStream", 1 / one, 1, 1.0, 1,
                                               name=f"single_{r}", deadline_s=10.0))
                    calls[1].append(_under_loadgen(single.service_s, 1) / alone)
                    got[who] = {"offline": o.result.get("samples_per_s"), "ovalid": o.valid,
                                "valid": s.valid, "p99": s.result.get("p99_s")}
                else:
                    o2, s2 = plain.run(off, tmp), plain.run(srv, tmp)
                    got[who] = {"offline": o2.get("samples_per_s"), "ovalid": o2["valid"],
                                "valid": s2["valid"], "p99": s2.get("p99_s")}
            for who, g in got.items():
                verdicts[who].append(bool(g["valid"]))
            offline.append(got["benchbench"]["offline"] / got["plain"]["offline"])
            print(f"round {r + 1}: " + "; ".join(
                f"{who} Offline {g['offline']:,.1f}/s ({'VALID' if g['ovalid'] else 'INVALID'}),"
                f" Server {'VALID' if g['valid'] else 'INVALID'} p99 {g['p99'] * 1e3:,.1f} ms"
                for who, g in got.items()))
    print(_spread("Offline, benchbench ÷ plain", offline))
    for batch, ratios in calls.items():
        print(_spread(f"a call at batch {batch} under LoadGen ÷ on the main thread alone",
                      ratios))
    print("Server VALID: " + ", ".join(f"{who} {sum(v)} of {len(v)}"
                                        for who, v in verdicts.items()))
    mine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
