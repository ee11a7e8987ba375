"""A probe that reports, as its skip reason, how many objects its worker left out of garbage
collection while it ran (engine/worker.py runs every probe inside meter.long_lived_frozen)."""

import gc

from benchbench.probes.api import ProbeSkipped


def run(ctx, cfg):
    raise ProbeSkipped(f"{gc.get_freeze_count()} objects frozen")
