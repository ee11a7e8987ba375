"""Run a function in its own process, so a CUDA error, an OOM kill or a segfault stays there.

Processes come from a forkserver that has imported torch once (without initialising CUDA), so
each isolated call starts in milliseconds instead of paying the ~2 s torch import again. The
child reports progress and its result over a pipe; the parent can cancel it at any time.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

# Imported once by the forkserver; children forked from it inherit the loaded modules.
# torchvision too: four probes build ResNet50 or a loader, each in every round, and importing
# it costs about a second a time on a small machine.
PRELOAD = ["torch", "torchvision", "benchbench.probes.api", "benchbench.machine.environment"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    value: Any = None  # the function's return value when ok
    error: str | None = None  # one line: what went wrong
    detail: str | None = None  # the child's traceback, for the log


class Cancelled(Exception):
    """The parent stopped waiting: interrupted by a signal."""


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Linux: get `signum` when our parent exits (for a worker, the forkserver, which exits
    when the benchbench process dies), so a child never outlives a crashed or killed run."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signum)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn: Connection, target: str, payload: Any) -> None:
    # A process group of its own, which every process it starts joins (a DataLoader's
    # forkserver and workers, ranks): the parent stops them all once the call is over
    # (stop_group), so that none still runs when the next probe is measured.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    # The parent owns Ctrl-C: it decides whether to stop us, and keeps what finished.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    try:
        module, _, func = target.partition(":")
        fn = getattr(importlib.import_module(module), func)

        def progress(desc: str, done: int, total: int) -> None:
            conn.send(("progress", (desc, done, total)))

        conn.send(("result", fn(payload, progress)))
    except BaseException as exc:  # report everything, SystemExit and MemoryError included
        last = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        conn.send(("error", (last, traceback.format_exc())))
    finally:
        conn.close()


def describe_exit(code: int | None) -> str:
    """How a process ended without sending its result: 'died from SIGKILL (…)', 'exited with
    code 1 without a result'."""
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the OOM killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"died from {name}{hint}"
    return f"exited with code {code} without a result"


def poll_message(conn: Connection, wait_s: float, on_progress: Callable[..., None]
                 ) -> tuple[str, Any] | None:
    """The next message from a child within wait_s: ('result', value) or its error, or None
    when none came (a progress message is passed to on_progress). EOFError: the child closed
    its end, most likely by dying."""
    if not conn.poll(wait_s):
        return None
    kind, body = conn.recv()
    if kind == "progress":
        on_progress(*body)
        return None
    return kind, body


class Isolator:
    """Starts isolated calls. One per run; the forkserver lives as long as this process."""

    def __init__(self, preload: list[str] | None = None) -> None:
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD if preload is None else preload)

    def call(self, target: str, payload: Any, *,
             on_progress: Callable[[str, int, int], None] = lambda d, i, n: None,
             timeout_s: float | None = None,
             should_stop: Callable[[], bool] = lambda: False) -> Outcome:
        """Run target ('module:function', called as fn(payload, progress)) in a fresh process.

        Raises Cancelled when should_stop() turns true; the child is terminated first.
        """
        parent_conn, child_conn = self._ctx.Pipe(duplex=False)
        # Not daemonic: a daemonic process may not start children, and probes need DataLoader
        # workers. _stop() and PR_SET_PDEATHSIG make sure it never outlives us.
        proc = self._ctx.Process(target=_child, args=(child_conn, target, payload),
                                 daemon=False)
        proc.start()
        child_conn.close()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                if should_stop():
                    raise Cancelled()
                if deadline is not None and time.monotonic() > deadline:
                    return Outcome(False, error=f"exceeded its hard time limit of "
                                                f"{timeout_s:.0f} s and was stopped")
                try:
                    message = poll_message(parent_conn, 0.1, on_progress)
                except EOFError:
                    proc.join(5)
                    return _died(proc, should_stop)
                if message is not None:
                    kind, body = message
                    if kind == "result":
                        return Outcome(True, value=body)
                    if should_stop():  # it stopped with the run (a probe's SIGTERM handler)
                        raise Cancelled()
                    return Outcome(False, error=body[0], detail=body[1])
                if not proc.is_alive() and not parent_conn.poll(0):  # drained: nothing more
                    return _died(proc, should_stop)
        finally:
            stop_processes([proc])
            if proc.pid is not None:
                stop_group(proc.pid)
            parent_conn.close()


# Signals that stop a whole run: `timeout`, Slurm and Ctrl-C send them to the process group,
# so a worker may die of one (or of its forkserver's death) a moment before the parent's own
# handler has run: one whose setpgid failed is still in that group, and any worker's
# forkserver is.
_SHUTDOWN = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_SHUTDOWN_WAIT_S = 1.0
# The exit code multiprocessing gives a worker whose forkserver is gone (popen_forkserver.poll:
# the forkserver reports each child's status, and it died of the same SIGTERM as its worker).
_NO_FORKSERVER = 255


def _died(proc: Any, should_stop: Callable[[], bool]) -> Outcome:
    """The outcome of a worker that ended without a result. One killed by a shutdown signal
    (or whose forkserver was) while this process is being stopped too was interrupted, not
    dead: Cancelled."""
    code = proc.exitcode
    if code is not None and (-code in _SHUTDOWN or code == _NO_FORKSERVER):
        deadline = time.monotonic() + _SHUTDOWN_WAIT_S
        while time.monotonic() < deadline:
            if should_stop():
                raise Cancelled()
            time.sleep(0.02)
    return Outcome(False, error=f"the worker process {describe_exit(code)}")


def stop_processes(procs: list[Any]) -> None:
    """Terminate, then kill what is still alive, and reap them all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(3)
        if p.is_alive():
            p.kill()
            p.join(3)


def _group_running(pgid: int) -> bool:
    """Whether a process of process group `pgid` still runs (a zombie is done)."""
    import psutil

    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError, psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                return True
    return False


def stop_group(pgid: int, grace_s: float = 3.0) -> None:
    """Stop what a finished worker left running in its process group, and wait until none is
    left: the dataloader probe's DataLoader processes, torch loaded, took 1.6 s to tear down
    after its probe had returned, into the next probe, whose first act (the storage probe's
    cold read of the dataset, 30-350 ms) read 0.6 to 2.2 times its rate alone for it.
    SIGTERM, then SIGKILL after `grace_s`. Never this process's own group (a worker that
    could not leave it)."""
    if pgid == os.getpgrp():
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return  # nothing is left in it (or it is not ours)
        deadline = time.monotonic() + wait_s
        while _group_running(pgid) and time.monotonic() < deadline:
            time.sleep(0.01)
