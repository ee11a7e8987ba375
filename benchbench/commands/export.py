"""`benchbench export`: a run's headline figures in a format monitoring reads; for now the
node_exporter textfile (--openmetrics FILE), written atomically so that a scrape never sees
half of it. A run a signal stopped is refused, as compare, history and fleet refuse it: its
missing probes would read as gauges that vanished (--include-interrupted takes it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchbench.commands.common import UsageError, check_out_file, write_file
from benchbench.engine.runner import EXIT_OK


def main(args: argparse.Namespace) -> int:
    from benchbench.compare.history import started
    from benchbench.compare.sides import CompareError, load
    from benchbench.reports import openmetrics

    target = Path(args.openmetrics)
    check_out_file(target, "--openmetrics")
    try:
        # screened: a figure beyond its physical limit is a timing error, no gauge carries it
        run = load(args.run, getattr(args, "include_interrupted", False))
        started(args.run, run.started_at)
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    write_file(target, openmetrics.exposition(run), "--openmetrics")
    return EXIT_OK
