"""`benchbench export`: a run's headline figures in a format monitoring reads; for now the
node_exporter textfile (--openmetrics FILE), written atomically so that a scrape never sees
half of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchbench.commands.common import UsageError, check_out_file, write_file
from benchbench.core import results
from benchbench.engine.runner import EXIT_OK


def main(args: argparse.Namespace) -> int:
    from benchbench.analysis import limits
    from benchbench.compare.history import started
    from benchbench.compare.sides import CompareError
    from benchbench.reports import openmetrics

    target = Path(args.openmetrics)
    check_out_file(target, "--openmetrics")
    try:
        run = results.load(args.run)
    except results.ResultsError as exc:
        raise UsageError(str(exc)) from None
    try:
        started(args.run, run.started_at)
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    # A figure beyond its physical limit is a timing error: no gauge carries it.
    write_file(target, openmetrics.exposition(limits.screened(run)), "--openmetrics")
    return EXIT_OK
