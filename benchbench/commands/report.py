"""`benchbench report`: re-render a run's reports from its measurements, and the writer that
`run` uses too: one verdict, computed here, handed to every renderer."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchbench.analysis.verdict_types import Verdict
from benchbench.commands import summary
from benchbench.commands.common import UsageError, check_out_dir
from benchbench.core import interruption, results
from benchbench.core.results import RunResult


def main(args: argparse.Namespace) -> int:
    from benchbench.analysis import verdict

    try:
        run_result = results.load(args.results)
    except results.ResultsError as exc:
        raise UsageError(str(exc)) from None
    src = Path(args.results)
    home = src if src.is_dir() else src.parent
    out = Path(args.out) if args.out else home
    if out.resolve() != home.resolve():  # in place re-renders; elsewhere, never over a run
        check_out_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        # Recomputed from the measurements: the one stored in results.json is only a cache.
        judged = verdict.verdict(run_result, args.workload)
        written = write_reports(run_result, out, judged)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
    summary.show(summary.summary(judged, written, src / "results.json" if src.is_dir() else src,
                                 interruption.of(run_result)))
    return 0


def report_markdown(run: RunResult, verdict: Verdict) -> tuple[RunResult, list[Any], str]:
    """(the run as every report shows it: its figures beyond their physical limits set aside,
    the doctor's checks, report.md's text)."""
    from benchbench.analysis import limits
    from benchbench.doctor.checks import run_checks
    from benchbench.reports import markdown

    run = limits.screened(run)  # a figure beyond its physical limit is never shown as a result
    checks = run_checks(run.environment, run, None)
    return run, checks, markdown.render(run, verdict, checks)


def write_reports(run: RunResult, out: Path, verdict: Verdict) -> list[Path]:
    """report.md, report.html, measurements.csv and the plots, all from one verdict and one
    reading of the doctor's checks."""
    from benchbench.reports import doctor, outputs

    run, checks, md = report_markdown(run, verdict)
    results.write_atomic(out / "report.md", md)
    return [out / "report.md", *outputs.write_all(run, out, verdict, doctor.section(checks), md)]
