"""Write a run's derived files beside results.json: report.html, measurements.csv and
plots/<name>.png. report.md is written by the caller."""

from __future__ import annotations

import os
from pathlib import Path

from benchbench.analysis.verdict_types import Verdict
from benchbench.core.results import RunResult, write_atomic
from benchbench.reports import csv, html, plots


def write_all(run: RunResult, out_dir: str | os.PathLike[str], verdict: Verdict,
              doctor_lines: list[str], markdown_text: str) -> list[Path]:
    """Write the files and return their paths, report.html first. A figure that fails to draw
    is named in the page's notes instead of stopping the report."""
    out = Path(out_dir)
    notes: list[str] = []
    figures = plots.make(run, verdict, notes)
    plot_dir = out / "plots"
    written = [out / "report.html", out / "measurements.csv"]
    if figures:
        plot_dir.mkdir(parents=True, exist_ok=True)
    for name, png in figures.items():
        write_atomic(plot_dir / f"{name}.png", png)
        written.append(plot_dir / f"{name}.png")
    for name in plots.NAMES:  # a re-report with less data must not leave an old figure behind
        if name not in figures:
            (plot_dir / f"{name}.png").unlink(missing_ok=True)
    write_atomic(out / "report.html",
                 html.render(run, verdict, doctor_lines, figures, markdown_text, notes))
    csv.write(run, out / "measurements.csv")
    return written
