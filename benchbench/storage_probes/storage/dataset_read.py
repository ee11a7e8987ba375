"""Read the dataset's own files once, cold and read-only: the files/s and B/s a loader gets.

A large dataset is sampled, not read whole: files are picked evenly across the sorted listing
(so every class folder is represented) until the byte limit. Before timing, each picked file's
cached pages are dropped with posix_fadvise(DONTNEED), so the reads come from the disk. The
files are then read the way a data loader reads them: open, buffered read to the end, close.

Where DONTNEED does nothing (gVisor accepts the call and ignores it) the "cold" read would
measure the page cache. So after the drop, mincore(2) asks how many of the picked files'
pages are still cached; where most are, or where the run is inside gVisor, the figure is
keyed and labelled as a page-cache read, and the verdict does not take it for storage.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import mmap
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.results import Measurement
from benchbench.machine.environment import storage_snapshot
from benchbench.machine.virtualisation import detect
from benchbench.probes.api import ProbeContext, ProbeOutput, total_over_time
from benchbench.probes.dataset import first_gone, vanished

CACHE_BYPASS = "posix_fadvise(DONTNEED)"
# Filesystems whose storage is RAM: neither O_DIRECT nor DONTNEED reaches a disk there.
RAM_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
CHUNK = 1024**2  # read() size: large enough that syscalls do not dominate a ~110 KB JPEG


@dataclass(frozen=True)
class DatasetRead:
    """What a cold read of the sampled files gave, with one (files, bytes, seconds) per chunk."""

    files: int
    io_bytes: int
    seconds: float
    chunks: list[tuple[int, int, float]] = field(default_factory=list)
    stopped_by: str = "done"  # "done" or "deadline"


def list_files(root: str, skip_prefix: str = "") -> list[tuple[str, int]]:
    """Every regular file under `root` (path, size), sorted, hidden `skip_prefix` files left out."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if skip_prefix and name.startswith(skip_prefix):
                continue
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError:
                continue  # a dangling symlink or a file removed meanwhile
            if st.st_size > 0 and stat.S_ISREG(st.st_mode):
                found.append((path, st.st_size))
    return found


def sample_evenly(files: list[tuple[str, int]], limit_bytes: int) -> list[tuple[str, int]]:
    """Files spread evenly over the listing whose sizes add up to at most `limit_bytes`."""
    total = sum(size for _, size in files)
    if total <= limit_bytes:
        return list(files)
    want = max(1, len(files) * limit_bytes // total)
    picked: list[tuple[str, int]] = []
    used = 0
    for i in range(want):
        path, size = files[i * len(files) // want]
        # Skip, not stop, at a file over the limit: the picks must reach the listing's end.
        if picked and used + size > limit_bytes:
            continue
        picked.append((path, size))
        used += size
    return picked


def drop_cached(files: list[tuple[str, int]]) -> None:
    """Ask the kernel to forget the cached pages of `files` (opened read-only).

    DONTNEED drops clean pages only. A dataset written moments ago (the synthetic one a first
    run makes) is still dirty for up to dirty_expire_centisecs (30 s by default), so its
    "cold" read was a page-cache read and the first run on a fresh machine judged no storage.
    fdatasync writes back what was already written, changing nothing in the files, and is
    free where nothing is dirty. Some filesystems refuse it (a FUSE mount such as gcsfuse or
    s3fs may answer ENOSYS, a read-only one EROFS): the drop goes ahead, and the mincore check
    after it says whether the read is still cold."""
    for path, _ in files:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            with contextlib.suppress(OSError):
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# Past this share of the picked files' pages still cached after the drop, the read is a
# page-cache read whatever the rate says.
CACHED_SHARE = 0.5
_CHECKED_FILES = 32  # mincore on this many of the picked files (spread over them) is enough


def cached_share(files: list[tuple[str, int]]) -> float | None:
    """The share of the files' pages in the page cache now, by mincore(2) over read-only
    mappings of a sample of them; None where mincore cannot be asked (not Linux, no libc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    except (OSError, AttributeError):
        return None
    page = mmap.PAGESIZE
    step = max(1, len(files) // _CHECKED_FILES)
    cached = total = 0
    for path, size in files[::step]:
        if size <= 0:
            continue
        pages = -(-size // page)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                vec = ctypes.create_string_buffer(pages)
                if libc.mincore(addr, size, vec) != 0:
                    return None
                cached += sum(b & 1 for b in vec.raw[:pages])
                total += pages
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
    return cached / total if total else None


def _read_whole(path: str, buf: bytearray) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        total = 0
        while (got := os.readv(fd, [buf])) > 0:
            total += got
        return total
    finally:
        os.close(fd)


def cold_read(files: list[tuple[str, int]], chunks: int, deadline: float,
              clock: Callable[[], float] = time.perf_counter
              ) -> tuple[DatasetRead, float | None]:
    """Drop the files from the page cache, then read them in order, timing each chunk.

    Stops after the chunk in progress once `deadline` (a clock() value) has passed. Returns
    the read and the share of the files' pages still cached after the drop (cached_share).
    """
    drop_cached(files)
    left = cached_share(files)
    per_chunk = max(1, math.ceil(len(files) / max(1, chunks)))
    buf = bytearray(CHUNK)
    done: list[tuple[int, int, float]] = []
    stopped_by = "done"
    for first in range(0, len(files), per_chunk):
        group = files[first:first + per_chunk]
        t0 = clock()
        got = sum(_read_whole(path, buf) for path, _ in group)
        done.append((len(group), got, clock() - t0))
        if clock() > deadline and first + per_chunk < len(files):
            stopped_by = "deadline"
            break
    return DatasetRead(files=sum(c[0] for c in done), io_bytes=sum(c[1] for c in done),
                       seconds=sum(c[2] for c in done), chunks=done, stopped_by=stopped_by), left


def measurements(read: DatasetRead, context: dict[str, Any], access: str = "cold"
                 ) -> list[Measurement]:
    """dataset_read_rate (files/s) and dataset_read_bandwidth (B/s): totals over time, keyed
    "cold", or "page_cache" where the drop left the files cached."""
    timed = [c for c in read.chunks if c[2] > 0]
    if not timed or read.seconds <= 0:
        return []
    key = {"access": access, "cache_bypass": CACHE_BYPASS}
    ctx = {**context, "files_read": read.files, "bytes_read": read.io_bytes,
           "seconds": read.seconds, "stopped_by": read.stopped_by}
    return [
        total_over_time("dataset_read_rate", key, read.files / read.seconds,
                        [n / s for n, _, s in timed], "files/s", ctx),
        total_over_time("dataset_read_bandwidth", key, read.io_bytes / read.seconds,
                        [b / s for _, b, s in timed], "B/s", ctx),
    ]


def measure(ctx: ProbeContext, limit_bytes: int, skip_prefix: str,
            out: ProbeOutput) -> list[Measurement]:
    """The cold read of ctx.inputs.data_dir, with its notes and params added to `out`."""
    data_dir = ctx.inputs.data_dir
    if not data_dir:
        out.notes.append("dataset read skipped, because the run has no dataset folder")
        return []
    files = list_files(data_dir, skip_prefix)
    if not files:  # the run scanned images there before the first probe
        what = (f"the dataset {data_dir} lost all its files" if os.path.isdir(data_dir) else
                f"the dataset {data_dir} was removed")
        out.notes.append(f"dataset read skipped, because {vanished(what)}")
        return []
    picked = sample_evenly(files, limit_bytes)
    ctx.progress("reading the dataset cold", 0, 1)
    # At most a third of what is left: the read jobs need the rest.
    deadline = ctx.clock() + max(5.0, ctx.budget.remaining() / 3)
    try:
        read, left = cold_read(picked, max(10, ctx.policy.min_repeats), deadline, ctx.clock)
    except FileNotFoundError as exc:  # removed since the listing: fio's figures still stand
        gone = first_gone(path for path, _ in picked) or exc.filename
        what = f"the dataset's file {gone} was removed"
        out.notes.append(f"dataset read skipped, because {vanished(what)}")
        return []
    sandbox = detect().get("sandbox")
    access = "cold"
    if (left is not None and left > CACHED_SHARE) or sandbox == "gVisor":
        access = "page_cache"
        why = (f"{left:.0%} of its pages were still cached after posix_fadvise(DONTNEED)"
               if left is not None and left > CACHED_SHARE else
               "the run is inside gVisor, which accepts posix_fadvise(DONTNEED) and ignores it")
        out.notes.append(f"the dataset read measures the page cache, not storage: {why}; its "
                         "figure is labelled page_cache and the verdict does not use it")
    snap = storage_snapshot(data_dir)
    if snap.get("fstype") in RAM_FILESYSTEMS:
        out.notes.append(f"the dataset is on {snap['fstype']}: its cold read measures RAM")
    if read.stopped_by == "deadline":
        out.notes.append(f"dataset read stopped after {read.files} of {len(picked)} sampled "
                         "files, because of the time budget")
    out.params.update(dataset_cache_bypass=CACHE_BYPASS, dataset_files=len(files),
                      dataset_files_sampled=len(picked))
    return measurements(read, {
        "path": data_dir, "filesystem": snap.get("fstype"), "device": snap.get("device"),
        "files_in_dataset": len(files), "files_sampled": len(picked),
        "cache_bypass": CACHE_BYPASS, "cached_after_drop": left, "sandbox": sandbox},
        access)
