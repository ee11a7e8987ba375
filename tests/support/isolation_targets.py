"""Functions run by the isolation tests inside worker processes."""

import ctypes
import os
import signal
import time


def echo(payload, progress):
    progress("half", 1, 2)
    return {"got": payload, "pid": os.getpid()}


def boom(payload, progress):
    raise ValueError("bad thing\nsecond line")


def segfault(payload, progress):
    ctypes.string_at(0)


def killed(payload, progress):
    os.kill(os.getpid(), signal.SIGKILL)


def sleepy(payload, progress):
    time.sleep(payload)
    return "woke"


def echo_rank(comm, payload):
    """A rank function: every rank answers; the launcher returns rank 0's."""
    return {"rank": comm.rank, "world": comm.world_size}


def frozen_objects(comm, payload):
    """A rank function: how many objects this rank's process left out of garbage collection."""
    import gc

    return gc.get_freeze_count()


def rank_one_hangs(comm, payload):
    """Rank 0 all-reduces; rank 1 never does, as a rank stuck in a dead peer would."""
    import torch
    import torch.distributed as dist

    if comm.rank == 1:
        time.sleep(3600)
    dist.all_reduce(torch.ones(4))
    return "unreachable"


def terminated(payload, progress):
    """Dies of SIGTERM, as a worker does when `timeout` or Slurm stops the whole run."""
    os.kill(os.getpid(), signal.SIGTERM)


def terminated_with_forkserver(payload, progress):
    """Dies of SIGTERM with the forkserver it was forked from, as when `timeout` or Slurm
    signals the whole process group: the parent reads no exit status, only code 255."""
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(0.2)  # the forkserver is gone before this worker is
    os.kill(os.getpid(), signal.SIGTERM)


def boom_marked(path, progress):
    """Marks `path`, then raises: the parent's stop flag reads the mark, so it is set by the
    time the error arrives, as a SIGTERM to the process group sets it."""
    open(path, "w").close()
    raise ValueError("stopped by SIGTERM")


def leaves_a_process(payload, progress):
    """Starts a process that would outlive its probe (as a DataLoader's forkserver tearing
    torch down does), and returns its pid."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    return child.pid
