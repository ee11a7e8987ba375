"""A probe that dies the way an OOM kill ends one: SIGKILL from outside, no traceback."""

import os
import signal


def run(ctx, cfg):
    os.kill(os.getpid(), signal.SIGKILL)
