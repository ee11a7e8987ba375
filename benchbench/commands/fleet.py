"""`benchbench fleet`: many nodes, one run each, grouped by hardware; every headline figure
scored against its group, each outlier with the evidence of its own run; exit 3 when an outlier
lies below its group."""

from __future__ import annotations

import argparse
import sys
import time

from benchbench.commands.common import UsageError, check_number, outputs, publish
from benchbench.core.names import counted
from benchbench.engine.runner import EXIT_OK

EXIT_OUTLIER = 3  # a node (or GPU) is an outlier below its group


def main(args: argparse.Namespace) -> int:
    """The fleet on stdout as Markdown; fleet.md/.html/.csv only under --out; --junit."""
    from benchbench.compare import fleet
    from benchbench.compare.sides import CompareError
    from benchbench.engine.progress import task_progress
    from benchbench.reports import fleet_md, fleet_plots, junit, ops_html

    started = time.perf_counter()
    check_number("--alpha", args.alpha, 0 < args.alpha < 1, "above 0 and below 1")
    where = outputs(args)
    try:
        with task_progress("reading and analysing the runs") as progress:
            f = fleet.build(args.runs, before=args.before,
                            allow_same_machine=args.allow_same_machine, alpha=args.alpha,
                            progress=progress,
                            include_interrupted=getattr(args, "include_interrupted", False))
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    publish(where, "fleet", fleet_md.render(f),
            figures=lambda notes, progress: fleet_plots.make(f, notes, progress),
            html=lambda md, plots, notes: ops_html.fleet(f, md, plots, notes),
            csv=lambda: fleet_md.csv_text(f),
            junit=lambda: junit.document("benchbench fleet", junit.fleet_cases(f)))
    code = EXIT_OUTLIER if f.low else EXIT_OK
    print(f"fleet of {counted(len(f.nodes), 'node')} in {time.perf_counter() - started:.1f} s: "
          + (f"{counted(len(f.low), 'outlier')} below their group{fleet_md.on_nodes(f.low)} "
             f"({fleet_md.named_briefly(f, f.low)})" if f.low else
             "no outlier below its group") + f", exit {code}", file=sys.stderr)
    return code
