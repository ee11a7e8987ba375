"""Run one fio read job as a subprocess; its JSON report gives a ReadRun, runs give measurements.

fio writes its JSON with --output=FILE because it may print notes ("queue depth will be capped
at 1") before the JSON on stdout; the parser still tolerates leading text, for files written
by hand or by older fio versions. Every job is read-only (--readonly): fio itself refuses to
write, whatever the file is.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.results import Measurement
from benchbench.engine.isolation import die_with_parent
from benchbench.probes.api import median_of, total_over_time

KiB, MiB = 1024, 1024**2
# job name -> (fio rw, block size). 128 KiB is about one ImageNet JPEG (~110 KB).
JOBS: dict[str, tuple[str, int]] = {
    "seq1m": ("read", MiB),
    "rand128k": ("randread", 128 * KiB),
    "rand4k": ("randread", 4 * KiB),
}
# Preference order: io_uring and libaio keep `iodepth` I/Os in flight; psync has one at a time.
ENGINES = ("io_uring", "libaio", "psync")
QUEUED_ENGINES = frozenset({"io_uring", "libaio"})


class FioError(RuntimeError):
    """fio failed, or what it wrote is not a report of a successful read."""


@dataclass(frozen=True)
class ReadRun:
    """One timed read run: how much was read, in how long, and its latency percentiles."""

    io_bytes: int
    seconds: float
    ios: int
    lat_p50_s: float | None = None
    lat_p99_s: float | None = None


@dataclass(frozen=True)
class FioJob:
    """One fio invocation. `runtime_s` None means "read io_size bytes, then stop" (a trial)."""

    name: str
    filename: str
    size: int
    engine: str
    iodepth: int
    numjobs: int = 1
    runtime_s: float | None = None
    direct: bool = True
    ramp_s: float = 0.0
    io_size: int | None = None

    def args(self, binary: str, output: str) -> list[str]:
        rw, bs = JOBS[self.name]
        # fio splits --filename on ':' (several files); a path with a colon must escape it.
        filename = self.filename.replace(":", "\\:")
        args = [binary, f"--name={self.name}", f"--filename={filename}", f"--size={self.size}",
                f"--rw={rw}", f"--bs={bs}", f"--direct={int(self.direct)}",
                f"--ioengine={self.engine}", f"--iodepth={effective_iodepth(self)}",
                f"--numjobs={self.numjobs}", "--readonly", "--lat_percentiles=1",
                # Threads, not forked processes: each forked fio job starts a session of its
                # own, so killing fio would orphan them, still reading the scratch file.
                "--thread",
                # A fresh random sequence per run: a repeat must not re-read blocks that a
                # device or hypervisor cache kept from the previous run.
                "--randrepeat=0", "--output-format=json", f"--output={output}"]
        if self.numjobs > 1:
            args.append("--group_reporting")
        if self.runtime_s is not None:
            args += ["--time_based", f"--runtime={round(self.runtime_s * 1000)}ms"]
        if self.ramp_s > 0:
            args.append(f"--ramp_time={round(self.ramp_s * 1000)}ms")
        if self.io_size is not None:
            args.append(f"--io_size={self.io_size}")
        return args


def find_fio() -> str | None:
    return shutil.which("fio")


def fio_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().removeprefix("fio-") or None


def effective_iodepth(job: FioJob) -> int:
    """The queue depth fio really keeps: a synchronous engine caps it at 1."""
    return job.iodepth if job.engine in QUEUED_ENGINES else 1


def parse_output(text: str) -> dict[str, Any]:
    """The fio JSON report inside `text`, skipping any notes printed before it."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", text, re.MULTILINE):
        try:
            doc, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "jobs" in doc:
            return doc
    head = text.strip().splitlines()[:1]
    raise FioError(f"no fio JSON report found (output starts {head[0][:80]!r})" if head
                   else "fio wrote no report")


def _percentile_s(stats: dict[str, Any], q: str) -> float | None:
    pct = stats.get("percentile") or {}
    return pct[q] / 1e9 if q in pct else None


def read_run(doc: dict[str, Any]) -> ReadRun:
    """Sum a report's read side into one ReadRun.

    With group_reporting there is one entry per group and its percentiles cover every job.
    Without it, several entries are summed and the worst job's percentiles are kept: fio gives
    no way to merge percentiles afterwards.
    """
    jobs = doc.get("jobs") or []
    if not jobs:
        raise FioError("fio report has no jobs")
    failed = [j for j in jobs if j.get("error")]
    if failed:
        raise FioError(f"fio job {failed[0].get('jobname')} failed with error "
                       f"{failed[0]['error']}")
    reads = [j["read"] for j in jobs]
    io_bytes = sum(r["io_bytes"] for r in reads)
    ios = sum(r["total_ios"] for r in reads)
    seconds = max(r["runtime"] for r in reads) / 1000.0  # fio reports runtime in ms
    if io_bytes <= 0 or seconds <= 0:
        raise FioError("fio read nothing (0 bytes or 0 s)")
    # Total latency (submission + completion) when --lat_percentiles gave it, else completion.
    lat = [r["lat_ns"] if "percentile" in r.get("lat_ns", {}) else r.get("clat_ns", {})
           for r in reads]
    p50 = [_percentile_s(s, "50.000000") for s in lat]
    p99 = [_percentile_s(s, "99.000000") for s in lat]
    return ReadRun(io_bytes=io_bytes, seconds=seconds, ios=ios, lat_p50_s=_worst(p50),
                   lat_p99_s=_worst(p99))


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if len(known) == len(values) else None


def read_measurements(runs: list[ReadRun], key: dict[str, Any],
                      context: dict[str, Any]) -> list[Measurement]:
    """Bandwidth and IOPS as totals over time, latency percentiles as medians over runs."""
    seconds = sum(r.seconds for r in runs)
    found = [
        total_over_time("read_bandwidth", key, sum(r.io_bytes for r in runs) / seconds,
                        [r.io_bytes / r.seconds for r in runs], "B/s", context),
        total_over_time("read_iops", key, sum(r.ios for r in runs) / seconds,
                        [r.ios / r.seconds for r in runs], "ops/s", context),
    ]
    for metric, values in (("read_latency_p50", [r.lat_p50_s for r in runs]),
                           ("read_latency_p99", [r.lat_p99_s for r in runs])):
        known = [v for v in values if v is not None]
        if known and len(known) == len(values):
            found.append(median_of(metric, key, known, "s", higher_is_better=False,
                                   context=context))
    return found


def _call(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    # Stop fio (and anything it started) when this worker is being stopped (SIGTERM raises
    # here) or the timeout passes; a session of its own keeps our signals to ourselves.
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Runs in the child before exec: when the worker dies without
                            # unwinding (SIGKILL, the OOM killer), fio gets SIGKILL too, so no
                            # orphan keeps reading.
                            start_new_session=True,
                            preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def run_job(binary: str, job: FioJob, output: str | os.PathLike[str]) -> ReadRun:
    """Run `job`, keep fio's JSON in `output`, and return what it read."""
    # Generous: fio may take a while to open a file on a slow network filesystem.
    timeout_s = 60 + 3 * ((job.runtime_s or 0) + job.ramp_s)
    try:
        done = _call(job.args(binary, str(output)), timeout_s)
    except BaseException as exc:
        Path(output).unlink(missing_ok=True)  # an interrupted run leaves a partial report
        if isinstance(exc, subprocess.TimeoutExpired):
            raise FioError(f"fio {job.name} did not finish within {timeout_s:.0f} s") from None
        raise
    try:
        text = Path(output).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    if done.returncode != 0 or not text.strip():
        why = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise FioError(f"fio {job.name} exited with code {done.returncode}: {why}")
    return read_run(parse_output(text))


def choose_engine(binary: str, filename: str, size: int) -> tuple[str, bool, list[str]]:
    """The first engine that reads `filename` in a tiny trial, and whether O_DIRECT worked.

    fio lists io_uring in --enghelp even where a container's seccomp profile or the kernel
    forbids it, so only a real read settles the question. Returns (engine, direct, why_not)
    where why_not says why each better engine failed.
    """
    why_not: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchbench-fio-") as tmp:
        # Buffered reads are the last resort: a filesystem without O_DIRECT support.
        for direct in (True, False):
            for engine in ENGINES:
                trial = FioJob("rand4k", filename, size, engine, iodepth=4, direct=direct,
                               io_size=256 * KiB)
                try:
                    run_job(binary, trial, Path(tmp) / f"{engine}-{int(direct)}.json")
                    return engine, direct, why_not
                except FioError as exc:
                    why_not.append(f"{engine} (direct={int(direct)}): {exc}")
    raise FioError("no fio engine could read the file: " + "; ".join(why_not))
