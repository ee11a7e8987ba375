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
