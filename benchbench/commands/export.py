"""`benchbench export`: a run's headline figures in a format monitoring reads; for now the
node_exporter textfile (--openmetrics FILE), written atomically so that a scrape never sees
half of it."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from benchbench.commands.common import UsageError, check_out_file, write_file
from benchbench.core import results
from benchbench.engine.runner import EXIT_OK


def main(args: argparse.Namespace) -> int:
    from benchbench.reports import openmetrics

    target = Path(args.openmetrics)
    check_out_file(target, "--openmetrics")
    try:
        run = results.load(args.run)
    except results.ResultsError as exc:
        raise UsageError(str(exc)) from None
    try:
        datetime.fromisoformat(run.started_at)
    except ValueError:
        raise UsageError(f"{args.run}: started_at {run.started_at!r} is not an ISO date and "
                         "time") from None
    write_file(target, openmetrics.exposition(run), "--openmetrics")
    return EXIT_OK
