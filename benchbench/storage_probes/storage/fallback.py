"""Read a file with O_DIRECT from Python when fio is missing: one thread, one I/O in flight.

It measures what a single synchronous reader gets, which is a lower bound for a device that
needs queue depth (NVMe, network block storage). Where the filesystem refuses O_DIRECT it
reads buffered, after dropping the file's cached pages with posix_fadvise(DONTNEED).
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import time
from collections.abc import Callable

from benchbench.core.stats import quantile
from benchbench.storage_probes.storage.fio import JOBS, ReadRun

ENGINE = "python-odirect-fallback"
NOTE = ("fio not found: measured with the Python O_DIRECT fallback reader; install fio for "
        "queue depth and parallel jobs (apt-get install fio)")
DIRECT = "O_DIRECT"
BUFFERED = "buffered+posix_fadvise(DONTNEED)"
# O_DIRECT needs buffer, offset and length aligned to the logical block size; 4 KiB covers
# both 512-byte and 4K-native devices.
ALIGN = 4096


def _drop_cache(fd: int) -> None:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def open_for_reading(path: str, direct: bool = True) -> tuple[int, str]:
    """A read-only descriptor for `path` and the cache mode it got: DIRECT or BUFFERED.

    Some filesystems accept O_DIRECT at open and refuse it at the first read (EINVAL), so a
    trial read settles it.
    """
    if direct and hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
        else:
            with mmap.mmap(-1, ALIGN) as buf:
                try:
                    os.preadv(fd, [buf], 0)
                    return fd, DIRECT
                except OSError as exc:
                    os.close(fd)
                    if exc.errno != errno.EINVAL:
                        raise
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    _drop_cache(fd)
    return fd, BUFFERED


def read_job(path: str, size: int, job: str, seconds: float, direct: bool = True,
             clock: Callable[[], float] = time.perf_counter) -> tuple[ReadRun, str]:
    """Read the first `size` bytes of `path` with `job`'s pattern for about `seconds`.

    Returns the run and the cache mode used. Each read is timed for the latency percentiles.
    """
    rw, bs = JOBS[job]
    blocks = size // bs
    if blocks < 1:
        raise ValueError(f"{job}: {size} bytes hold no {bs}-byte block")
    fd, mode = open_for_reading(path, direct)
    rng = random.Random()  # seeded from the OS: a repeat reads other blocks than the last
    latencies: list[float] = []
    io_bytes = 0
    # An anonymous mmap is page-aligned, which O_DIRECT requires of the buffer.
    with mmap.mmap(-1, bs) as buf:
        try:
            start = clock()
            end = start + seconds
            now = start
            while now < end:
                n = len(latencies)
                if rw == "read":
                    block = n % blocks
                    if block == 0 and n and mode == BUFFERED:
                        _drop_cache(fd)  # a second pass must not come from the page cache
                else:
                    block = rng.randrange(blocks)
                t0 = clock()
                got = os.preadv(fd, [buf], block * bs)
                now = clock()
                if got <= 0:
                    raise OSError(errno.EIO, f"short read at offset {block * bs} of {path}")
                latencies.append(now - t0)
                io_bytes += got
        finally:
            os.close(fd)
    run = ReadRun(io_bytes=io_bytes, seconds=now - start, ios=len(latencies),
                  lat_p50_s=quantile(latencies, 0.5), lat_p99_s=quantile(latencies, 0.99))
    return run, mode
