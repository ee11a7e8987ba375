"""`benchbench history`: one machine's runs in order, a series per headline figure with its
change points, its outlier runs and what changed in the environment around each; exit 3 when
the latest level is worse than the best segment (or --baseline's) by more than --threshold."""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchbench.commands.common import UsageError, check_number, outputs, publish
from benchbench.core.names import counted
from benchbench.engine.runner import EXIT_OK

EXIT_REGRESSION = 3  # the latest level is worse than the reference by more than --threshold
RUNS = "runs"  # where `run` writes its folders by default: the history without a RUN


def main(args: argparse.Namespace) -> int:
    """The history on stdout as Markdown; history.md/.html/.csv only under --out; --junit."""
    from benchbench.compare import history
    from benchbench.compare.sides import CompareError
    from benchbench.engine.progress import task_progress
    from benchbench.reports import (
        history_csv,
        history_md,
        history_plots,
        history_text,
        junit,
        ops_html,
    )

    started = time.perf_counter()
    check_number("--threshold", args.threshold, args.threshold >= 0, "a percentage, 0 or more")
    check_number("--alpha", args.alpha, 0 < args.alpha < 1, "above 0 and below 1")
    if args.window is not None:
        check_number("--window", args.window, args.window >= 2, "a number of runs, 2 or more")
    where = outputs(args)
    given = args.runs
    if not given:
        if not os.path.isdir(RUNS):
            raise UsageError(f"no run given, and no {RUNS}/ folder here (where run writes "
                             "them); give a machine's runs, e.g. 'runs/nightly-*'")
        given = [RUNS]
    try:
        with task_progress("reading and analysing the runs") as progress:
            h = history.build(given, machine=args.machine, threshold_pct=args.threshold,
                              alpha=args.alpha, baseline=args.baseline, window=args.window,
                              progress=progress,
                              include_interrupted=getattr(args, "include_interrupted", False))
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    publish(where, "history", history_md.render(h),
            figures=lambda notes, progress: history_plots.make(h, notes, progress),
            html=lambda md, plots, notes: ops_html.history(h, md, plots, notes),
            csv=lambda: history_csv.csv_text(h),
            junit=lambda: junit.document("benchbench history", junit.history_cases(h)))
    code = EXIT_REGRESSION if h.regressions else EXIT_OK
    whose = "" if args.runs else f" (no RUN given: those in {RUNS}/, where run writes them)"
    print(f"history of {counted(len(h.runs), 'run')}{whose} in "
          f"{time.perf_counter() - started:.1f} s: "
          + (f"{len(h.regressions)} series regressed ("
             f"{history_text.named_briefly(h, h.regressions)})" if h.regressions else
             "no series regressed")
          + (f"; {len(h.unheld)} beyond {h.threshold_pct:g}% but not held ("
             f"{history_text.named_briefly(h, h.unheld)})" if h.unheld else "")
          + f", exit {code}", file=sys.stderr)
    return code
