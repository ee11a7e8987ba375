"""benchbench's system under test for MLPerf's LoadGen (the `mlperf_loadgen` bindings of the
`mlcommons-loadgen` wheel): LoadGen sends queries, times them, takes the percentiles, applies
its early stopping and says VALID or INVALID; benchbench serves them.

- The sample library (QSL): `samples` images resident on the device (`Serve` holds them), as
  many as LoadGen's performance set, so loading one is a no-op: MLPerf's rules let the QSL
  load its performance samples before the timed run.
- The SUT: IssueQuery queues each sample with the time it arrived and returns at once; the
  probe's own thread takes whatever is queued, up to the batch limit, runs the model on it and
  answers each sample with QuerySamplesComplete, while LoadGen's StartTest runs on a helper
  thread. That is dynamic batching: a sample that arrives while the model runs waits for the
  next batch. The model runs on the thread that built it and ran the batch sweep: a second
  thread's calls get an OpenMP team of their own, and once libgomp's threads outnumber the
  CPUs it stops spinning between parallel regions (GOMP_SPINCOUNT's throttle), so on a 2-core
  VM ResNet50 ran 1.6-1.9x slower there than on the main thread, measured.

LoadGen writes its summary and detail logs into the run folder (the trace and the accuracy log
are empty in a performance run, and are removed); the figures are read back from the detail
log, the one LoadGen writes for machines.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from benchbench.core.timing import Clock
from benchbench.workloads.inference.config import LOADGEN_MODULE
from benchbench.workloads.inference.search import Outcome, Settings

# Serve(indices): classify the library's images at these indices as one batch; returns once the
# answers are on the host (so the device is done).
Serve = Callable[[Sequence[int]], object]
KEPT_LOGS = ("summary.txt", "detail.txt")
# LoadGen's detail-log keys (MLLOG lines) -> benchbench's names; latencies in ns become s.
RESULT_KEYS = {
    "result_validity": "validity", "result_query_count": "queries",
    "result_completed_samples_per_sec": "completed_per_s",
    "result_scheduled_samples_per_sec": "scheduled_per_s",
    "result_samples_per_second": "samples_per_s",
    "result_50.00_percentile_latency_ns": "p50_s", "result_90.00_percentile_latency_ns": "p90_s",
    "result_99.00_percentile_latency_ns": "p99_s", "result_max_latency_ns": "max_s",
    "result_mean_latency_ns": "mean_s", "result_overlatency_query_count": "over_bound",
    "result_min_duration_met": "min_duration_met", "result_min_queries_met": "min_queries_met",
    "result_perf_constraints_met": "latency_met", "early_stopping_met": "early_stopping_met",
    "early_stopping_result": "early_stopping", "generated_samples_per_query":
    "samples_per_query", "effective_min_duration_ms": "min_duration_ms",
    "effective_min_query_count": "min_query_count", "loadgen_version": "loadgen_version",
    "num_errors": "errors",
}
# MLPerf's official settings come with LoadGen (its built-in mlperf.conf, FromConfig with
# conf_type 0): the random seeds that pick the samples and the schedule, for ResNet-50. The
# run's own durations and counts then replace the submission's.
MLPERF_MODEL = "resnet50"
SEEDS = ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")
WHY = (("min_duration_met", "its min duration was not met"),
       ("min_queries_met", "too few queries"),
       ("latency_met", "p99 over the bound"),
       ("early_stopping_met", "too few queries for early stopping"))


def read_detail(path: str) -> dict[str, Any]:
    """LoadGen's figures from its detail log (`:::MLLOG {json}` lines), in benchbench's names
    and units, with why_invalid: the unmet conditions, in LoadGen's order."""
    out: dict[str, Any] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.startswith(":::MLLOG "):
                continue
            entry = json.loads(line[len(":::MLLOG "):])
            name = RESULT_KEYS.get(entry.get("key"))
            if name is not None:
                value = entry["value"]
                out[name] = value / 1e9 if entry["key"].endswith("latency_ns") else value
    out["why_invalid"] = "; ".join(why for key, why in WHY if out.get(key) is False) or None
    return out


def official_settings(lg: Any, scenario: str) -> tuple[Any, str]:
    """LoadGen's TestSettings with MLPerf's official ResNet-50 settings for `scenario` (its
    built-in mlperf.conf: the seeds among them), and what they came from; a LoadGen too old to
    carry mlperf.conf leaves its defaults (seeds 0), and says so."""
    ts = lg.TestSettings()
    try:
        failed = ts.FromConfig("", MLPERF_MODEL, scenario, 0)
    except TypeError:  # FromConfig(path, model, scenario) only: no built-in mlperf.conf
        failed = 1
    if failed:
        return lg.TestSettings(), "LoadGen's defaults (seeds 0): this LoadGen has no mlperf.conf"
    seeds = ", ".join(f"{k} {getattr(ts, k)}" for k in SEEDS)
    return ts, f"mlperf.conf's {MLPERF_MODEL} {scenario} settings ({seeds}), durations shortened"


class Server:
    """The SUT's queue and the loop that serves it on the caller's thread (see the module's
    docstring)."""

    def __init__(self, lg: Any, serve: Serve, clock: Clock) -> None:
        self.lg, self.serve, self.clock = lg, serve, clock
        self.batch = 1
        self._queue: deque[tuple[int, int, float]] = deque()  # (LoadGen id, index, arrived)
        self._ready = threading.Condition()
        self._stop = False
        self.latencies: list[float] = []
        self.service: list[tuple[int, float]] = []  # (batch, seconds) of each batch run
        self.abandoned = 0
        self.deadline = math.inf  # clock time past which queued samples are answered unserved
        self.error: BaseException | None = None

    def issue(self, samples: Sequence[Any]) -> None:
        now = self.clock()
        with self._ready:
            self._queue.extend((s.id, s.index, now) for s in samples)
            self._ready.notify()

    def flush(self) -> None:
        """LoadGen's FlushQueries: nothing is held back, every batch runs as soon as it can."""

    def serve_during(self, batch: int, deadline: float, test: Callable[[], object]) -> None:
        """Serve on this thread while `test` (LoadGen's StartTest, which returns once every
        sample it issued is answered) runs on a helper thread; raise what either raised."""
        self.batch, self.deadline, self._stop, self.error = batch, deadline, False, None
        self.latencies, self.service, self.abandoned = [], [], 0
        failed: list[BaseException] = []

        def run() -> None:
            try:
                test()
            except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller
                failed.append(exc)
            finally:
                with self._ready:
                    self._stop = True
                    self._ready.notify()

        loadgen = threading.Thread(target=run, name="benchbench-loadgen", daemon=True)
        loadgen.start()
        self._loop()  # an interrupt leaves LoadGen's daemon thread to the process's end
        loadgen.join()
        if failed:
            raise failed[0]
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stop:
                    self._ready.wait()
                if not self._queue:
                    return
                late = self.clock() > self.deadline
                take = [self._queue.popleft() for _ in range(
                    len(self._queue) if late else min(self.batch, len(self._queue)))]
            if late or self.error is not None:
                # LoadGen waits for every sample it issued: answered, so that the run ends.
                self.abandoned += len(take)
                self._complete(take)
                continue
            began = self.clock()
            try:
                self.serve([index for _, index, _ in take])
            except BaseException as exc:  # noqa: BLE001 - raised again by stop(), in the caller
                self.error = exc
            done = self.clock()
            self._complete(take)
            self.latencies += [done - arrived for _, _, arrived in take]
            self.service.append((len(take), done - began))

    def _complete(self, take: list[tuple[int, int, float]]) -> None:
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(i, 0, 0) for i, _, _ in take])


class LoadGenHarness:
    """LoadGen's SUT and QSL around a Serve, for any number of runs (search.Harness)."""

    def __init__(self, serve: Serve, samples: int, run_dir: str | None, clock: Clock) -> None:
        self.lg = importlib.import_module(LOADGEN_MODULE)
        self.server = Server(self.lg, serve, clock)
        self.clock, self.samples = clock, samples
        self.run_dir = run_dir
        self.sut = self.lg.ConstructSUT(self.server.issue, self.server.flush)
        self.qsl = self.lg.ConstructQSL(samples, samples, _resident, _resident)

    def service_s(self, batch: int) -> float:
        """A batch of `batch` samples through Serve on the thread that serves LoadGen's
        queries (this one), warm, alone: the fastest of three timed calls (a floor that a busy
        VM moves least)."""
        indices = [i % self.samples for i in range(batch)]
        self.server.serve(indices)
        times = []
        for _ in range(3):
            t = self.clock()
            self.server.serve(indices)
            times.append(self.clock() - t)
        return min(times)

    def run(self, settings: Settings) -> Outcome:
        lg = self.lg
        ts, official = official_settings(lg, settings.scenario)
        ts.mode = lg.TestMode.PerformanceOnly
        ts.performance_sample_count_override = 0  # the library's own count (samples)
        ts.min_duration_ms = max(1, round(settings.min_duration_s * 1e3))
        ts.min_query_count = settings.min_query_count
        if math.isfinite(settings.deadline_s):
            ts.max_duration_ms = max(1, round(settings.deadline_s * 1e3))
        if settings.scenario == "Server":
            ts.scenario = lg.TestScenario.Server
            ts.server_target_qps = settings.rate
            ts.server_target_latency_ns = round(settings.bound_s * 1e9)
        elif settings.scenario == "SingleStream":
            ts.scenario = lg.TestScenario.SingleStream
            ts.single_stream_expected_latency_ns = round(1e9 / settings.rate)
        else:
            ts.scenario = lg.TestScenario.Offline
            ts.offline_expected_qps = settings.rate
        with tempfile.TemporaryDirectory(prefix="benchbench-loadgen-") as tmp:
            log = lg.LogSettings()
            log.log_output.outdir = tmp
            log.log_output.prefix = f"{settings.name}_"
            log.log_output.copy_summary_to_stdout = False
            log.enable_trace = False
            start = self.clock()
            self.server.serve_during(settings.batch, start + settings.deadline_s,
                                     lambda: lg.StartTestWithLogSettings(self.sut, self.qsl, ts,
                                                                         log))
            wall = self.clock() - start
            result = read_detail(os.path.join(tmp, f"{settings.name}_detail.txt"))
            files = self._keep(tmp, settings.name)
        result["settings_from"] = official
        sut = self.server
        if sut.abandoned:
            result["why_invalid"] = (f"the SUT answered {sut.abandoned} samples unserved past "
                                     f"the run's {settings.deadline_s:,.3g} s deadline")
        return Outcome(settings, result.get("validity") == "VALID" and not sut.abandoned,
                       result, sut.latencies, len(sut.service), len(sut.latencies), wall,
                       files, abandoned=sut.abandoned, service_s=sut.service)

    def _keep(self, tmp: str, name: str) -> list[str]:
        """The summary and detail logs, moved into <run folder>/inference/; their paths
        relative to the run folder (none without one)."""
        if not self.run_dir:
            return []
        folder = os.path.join(self.run_dir, "inference")
        os.makedirs(folder, exist_ok=True)
        kept = []
        for suffix in KEPT_LOGS:
            shutil.move(os.path.join(tmp, f"{name}_{suffix}"),
                        os.path.join(folder, f"{name}_{suffix}"))
            kept.append(f"inference/{name}_{suffix}")
        return kept

    def close(self) -> None:
        self.lg.DestroyQSL(self.qsl)
        self.lg.DestroySUT(self.sut)


def _resident(indices: Sequence[int]) -> None:
    """Load or unload samples: all of them stay resident on the device (the module's
    docstring)."""
