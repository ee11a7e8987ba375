"""Probe `storage`: read bandwidth, IOPS and latency of the disk under the run's data.

Where: a scratch file this probe creates (never a user's file) in --storage-path, else in the
dataset folder (its filesystem is the one a loader reads), else the run folder, else a temp
folder; or a block device, read-only, but only one that storage.raw_device names. What: fio's
seq1m, rand128k and rand4k read jobs, each run min_repeats times so that every run gives one
sample, or a Python O_DIRECT reader without fio; then the dataset's own files, read cold.
The scratch file is removed at the end, on error, and on SIGTERM (the runner's stop signal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import stat
import struct
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from benchbench.core.config import ConfigError
from benchbench.machine.environment import storage_snapshot
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, resolved
from benchbench.storage_probes.storage import dataset_read, fallback, fio
from benchbench.storage_probes.storage.config import StorageConfig

MiB, GiB = 1024**2, 1024**3
SCRATCH_PREFIX = ".benchbench-scratch-"
MIN_SCRATCH = 16 * MiB
# A timed fio run shorter than this is dominated by its first I/Os; a drive's queue fills in
# milliseconds, so half a second holds thousands of reads even on a slow disk.
MIN_RUN_S = 0.5


class Terminated(BaseException):
    """SIGTERM arrived; unwinding (not dying) lets the finally blocks remove the scratch file."""


def _fmt(n: float) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def _is_block(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def _folder_problem(path: str) -> str | None:
    """Why no scratch file can be created in `path` (one line), or None when it can."""
    if not os.path.exists(path):
        return "no such directory"
    if _is_block(path):
        return ("a block device; the probe reads one only when storage.raw_device names it, "
                f"and then read-only (--set storage.raw_device={path})")
    if not os.path.isdir(path):
        return "not a directory"
    # os.access alone is not enough: root passes permission checks but not a read-only mount.
    if not os.access(path, os.W_OK | os.X_OK):
        return "cannot create a file there (permission denied)"
    try:
        fd, name = tempfile.mkstemp(prefix=SCRATCH_PREFIX, dir=path)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"cannot create a file there ({exc.strerror or exc})"
    return None


def validate_storage_path(path: str, need_bytes: int) -> None:
    """Refuse a --storage-path that cannot hold a scratch file of `need_bytes`, in one line."""
    problem = _folder_problem(path)
    if problem:
        raise ConfigError(f"storage path {path}: {problem}")
    free = shutil.disk_usage(path).free
    if free < need_bytes:
        raise ConfigError(f"storage path {path}: {_fmt(free)} free, the scratch file needs "
                          f"{_fmt(need_bytes)}; free space or lower --set storage.size")


def _where(ctx: ProbeContext, cfg: StorageConfig, notes: list[str]) -> tuple[str, bool]:
    """The folder for the scratch file, or the raw device to read: (path, is_raw_device)."""
    given = ctx.inputs.storage_path
    if cfg.raw_device:
        raw = os.path.realpath(cfg.raw_device)
        if given and _is_block(given) and os.path.realpath(given) != raw:
            raise ProbeSkipped(f"storage path {given}: {_folder_problem(given)}")
        if not _is_block(raw):
            raise ProbeSkipped(f"raw_device {cfg.raw_device} is not a block device")
        return raw, True
    if given:
        problem = _folder_problem(given)
        if problem:
            raise ProbeSkipped(f"storage path {given}: {problem}")
        return given, False
    data = ctx.inputs.dataset or {}
    # The user's dataset folder is never written to, not even a hidden scratch file: only the
    # generated dataset's cache folder (benchbench's own) is used on the dataset's filesystem.
    ours = os.path.dirname(ctx.inputs.data_dir) if (
        ctx.inputs.data_dir and data.get("source") == "generated") else None
    devices = ({_device_of(ctx.inputs.data_dir), _device_of(ctx.inputs.run_dir)}
               if ctx.inputs.data_dir and ours is None and ctx.inputs.run_dir else set())
    if len(devices) == 2 and None not in devices:  # None: a dataset removed is said elsewhere
        notes.append(f"the dataset {ctx.inputs.data_dir} is on another filesystem than the run "
                     "folder and is never written to, so fio measured the run folder's disk; "
                     "pass --storage-path DIR on the dataset's filesystem to measure that one "
                     "(the dataset's cold read below does read its own disk)")
    for folder, what in ((ours, "dataset cache folder"),
                         (ctx.inputs.run_dir, "run folder"),
                         (tempfile.gettempdir(), "temp folder")):
        if folder and os.path.isdir(folder):
            problem = _folder_problem(folder)
            if problem is None:
                return folder, False
            notes.append(f"scratch file not put in the {what} {folder}: {problem}")
    raise ProbeSkipped("no folder can hold the scratch file; give one with --storage-path")


def _device_of(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _fit(folder: str, want: int, notes: list[str]) -> int:
    """`want` rounded to MiB, reduced to leave 5% (at least 64 MiB) of the free space free."""
    free = shutil.disk_usage(folder).free
    fit = (free - max(64 * MiB, free // 20)) // MiB * MiB
    if fit < MIN_SCRATCH:
        raise ProbeSkipped(f"only {_fmt(free)} free in {folder}, too little for a scratch file")
    if want > fit:
        notes.append(f"scratch file reduced from {_fmt(want)} to {_fmt(fit)}, because only "
                     f"{_fmt(free)} is free in {folder}")
        return fit
    return max(MiB, want // MiB * MiB)


def _fill(fd: int, size: int, ctx: ProbeContext) -> None:
    # os.urandom for every byte can be slower than the disk, so 1 MiB windows of a random
    # pool are written, each 4 KiB sector stamped with its own number: no two blocks are
    # alike (nothing to deduplicate) and nothing compresses.
    pool = os.urandom(17 * MiB)
    for i in range(size // MiB):
        start = (i * 7919 % 4096) * 4096
        block = bytearray(pool[start:start + MiB])
        for sector in range(0, MiB, 4096):
            struct.pack_into("<Q", block, sector, i * MiB + sector)
        view = memoryview(block)
        while view:
            view = view[os.write(fd, view):]
        if i % 256 == 0:
            ctx.progress("writing the scratch file", i, size // MiB)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


@contextlib.contextmanager
def scratch_file(folder: str, size: int, ctx: ProbeContext) -> Iterator[str]:
    """Create and fill a scratch file of `size` bytes in `folder`; remove it on the way out."""
    path = os.path.join(folder, f"{SCRATCH_PREFIX}{os.getpid()}.bin")
    # O_EXCL: fail rather than open (or later delete) a file this probe did not create.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            _fill(fd, size, ctx)
        finally:
            os.close(fd)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated("the storage probe was stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _device_size(device: str) -> int:
    fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def run(ctx: ProbeContext, cfg: StorageConfig) -> ProbeOutput:
    want = resolved(cfg.size, "size")
    notes: list[str] = []
    where, raw = _where(ctx, cfg, notes)
    # A device node's own "mount" would be /dev (devtmpfs): say only which device it is.
    snap = {"device": where} if raw else storage_snapshot(where)
    if raw:
        whole = _device_size(where)
        size = min(whole, want)
    else:
        size = _fit(where, want, notes)  # before any work
    params: dict[str, Any] = {"path": where, "raw_device": raw, "size": size,
                              "filesystem": snap.get("fstype"), "device": snap.get("device"),
                              "mountpoint": snap.get("mountpoint"),
                              "rotational": snap.get("rotational"), "model": snap.get("model")}
    if snap.get("fstype") in dataset_read.RAM_FILESYSTEMS:
        notes.append(f"{where} is on {snap['fstype']}: O_DIRECT reads there measure RAM, "
                     "not a disk")
    out = ProbeOutput([], params=params, notes=notes)
    with _sigterm_raises():
        out.measurements += dataset_read.measure(ctx, cfg.dataset_read_limit, SCRATCH_PREFIX,
                                                 out)
        if raw:
            _read_jobs(ctx, cfg, where, size, snap, out)
        else:
            with scratch_file(where, size, ctx) as path:
                params["scratch_file"] = os.path.basename(path)
                _read_jobs(ctx, cfg, path, size, snap, out)
    ctx.progress("done", 1, 1)
    return out


def _reader(path: str, size: int, out: ProbeOutput) -> tuple[str | None, str, bool]:
    """fio's path, engine and O_DIRECT support, or (None, the fallback, True) without fio."""
    binary = fio.find_fio()
    if not binary:
        out.notes.append(fallback.NOTE)
        return None, fallback.ENGINE, True
    try:
        engine, direct, why_not = fio.choose_engine(binary, path, size)
    except fio.FioError as exc:
        out.notes.append(f"fio skipped, because it could not read {path} ({exc}); "
                         "measured with the Python fallback reader")
        return None, fallback.ENGINE, True
    out.params["engines_refused"] = why_not
    return binary, engine, direct


def plan_runtime(cfg: StorageConfig, remaining_s: float, min_repeats: int
                 ) -> tuple[float, int, float]:
    """(seconds per job, runs per job, seconds per run). Auto: up to max_runtime a job,
    shorter when the budget is short, so that the random reads the verdict needs run too, not
    only the first (sequential) job; each job runs min_repeats times, one sample per run, of
    at least MIN_RUN_S (fio's own start-up, ~0.1 s, is outside its runtime)."""
    per_job = cfg.runtime or max(1.0, min(resolved(cfg.max_runtime, "max_runtime"),
                                          remaining_s / (len(cfg.jobs) + 0.5)))
    repeats = max(1, min_repeats)
    return per_job, repeats, max(MIN_RUN_S, per_job / repeats)


def _read_jobs(ctx: ProbeContext, cfg: StorageConfig, path: str, size: int,
               snap: dict[str, Any], out: ProbeOutput) -> None:
    runtime, repeats, run_s = plan_runtime(cfg, ctx.budget.remaining(), ctx.policy.min_repeats)
    binary, engine, direct = _reader(path, size, out)
    version = fio.fio_version(binary) if binary else None
    mode = fallback.DIRECT if direct else fallback.BUFFERED
    out.params.update(engine=engine, fio_version=version, runtime=runtime, runs_per_job=repeats,
                      run_seconds=run_s, iodepth=cfg.iodepth if engine in fio.QUEUED_ENGINES
                      else 1, numjobs_random=cfg.numjobs if binary else 1)
    keep = ctx.inputs.run_dir
    with contextlib.ExitStack() as stack:
        folder = os.path.join(keep, "storage") if keep else \
            stack.enter_context(tempfile.TemporaryDirectory(prefix="benchbench-fio-"))
        os.makedirs(folder, exist_ok=True)
        for j, name in enumerate(cfg.jobs):
            if j and ctx.budget.remaining() < repeats * run_s / 2:  # loosely: ≥1 job runs
                out.notes.append(f"{name} skipped, because the time budget ran out")
                continue
            numjobs = cfg.numjobs if binary and name != "seq1m" else 1
            job = fio.FioJob(name, path, size, engine, cfg.iodepth, numjobs, run_s, direct)
            runs, files = [], []
            for i in range(repeats):
                ctx.progress(f"{name} run {i + 1}/{repeats}", j * repeats + i,
                             len(cfg.jobs) * repeats)
                if binary:
                    # The first run of each job ramps up for warmup_s before it counts.
                    ramped = dataclasses.replace(job, ramp_s=ctx.policy.warmup_s if i == 0 else 0)
                    raw_name = f"fio-{name}-{i + 1}.json"
                    runs.append(fio.run_job(binary, ramped, os.path.join(folder, raw_name)))
                    files.append(f"storage/{raw_name}")
                else:
                    run, mode = fallback.read_job(path, size, name, run_s, direct)
                    runs.append(run)
            files = files if keep else []
            out.artifacts += files
            key = {"job": name, "bs": fio.JOBS[name][1], "engine": engine,
                   "iodepth": fio.effective_iodepth(job) if binary else 1, "numjobs": numjobs}
            context = {"path": path, "device": snap.get("device"),
                       "filesystem": snap.get("fstype"), "fio_version": version,
                       "engine": engine, "cache_mode": mode, "runs": len(runs),
                       "run_seconds": run_s, "raw_files": files}
            out.measurements += fio.read_measurements(runs, key, context)
    out.params["cache_mode"] = mode
    if mode == fallback.BUFFERED:
        out.notes.append("O_DIRECT is not supported here: reads were buffered after dropping "
                         "the page cache, and repeated blocks may still come from it")
