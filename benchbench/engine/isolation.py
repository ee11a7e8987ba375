"""Run a function in its own process, so a CUDA error, an OOM kill or a segfault stays there.

Processes come from a forkserver that has imported torch once (without initialising CUDA), so
each isolated call starts in milliseconds instead of paying the ~2 s torch import again. The
child reports progress and its result over a pipe; the parent can cancel it at any time.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
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


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the forkserver (our parent) exits, which it does when the
    benchbench process dies, so a worker never outlives a crashed or killed run."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn: Connection, target: str, payload: Any) -> None:
    # The parent owns Ctrl-C: it decides whether to stop us, and keeps what finished.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
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


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the OOM killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"the worker process died from {name}{hint}"
    return f"the worker process exited with code {code} without a result"


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
                if parent_conn.poll(0.1):
                    try:
                        kind, body = parent_conn.recv()
                    except EOFError:
                        proc.join(5)
                        return Outcome(False, error=_describe_exit(proc.exitcode))
                    if kind == "progress":
                        on_progress(*body)
                    elif kind == "result":
                        return Outcome(True, value=body)
                    else:
                        return Outcome(False, error=body[0], detail=body[1])
                elif not proc.is_alive():
                    if parent_conn.poll(0):
                        continue  # drain what it sent before exiting
                    return Outcome(False, error=_describe_exit(proc.exitcode))
        finally:
            _stop(proc)
            parent_conn.close()


def _stop(proc: Any) -> None:
    if proc.is_alive():
        proc.terminate()
        proc.join(3)
    if proc.is_alive():
        proc.kill()
        proc.join(3)
    else:
        proc.join(5)
