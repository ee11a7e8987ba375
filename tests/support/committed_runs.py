"""The GPU runs committed under docs/results, read as `benchbench report` reads them: real runs
are test data (STYLE.md), so a fix to analysis or wording is proved on what a GPU measured."""

import tarfile
from pathlib import Path

from benchbench.core import results
from benchbench.core.results import RunResult

RESULTS = Path(__file__).parents[2] / "docs" / "results"
# The three quick runs of 2026-12-04, one H200 each.
H200_RUNS = ["2026-12-04-h200", "2026-12-04-h200-run2", "2026-12-04-h200-run3"]


def committed(name: str, tmp_path: Path) -> RunResult:
    """The run's results.json, out of its run.tar.gz into tmp_path."""
    with tarfile.open(RESULTS / name / "run.tar.gz") as tar:
        tar.extract("run/results.json", tmp_path, filter="data")
    return results.load(tmp_path / "run" / "results.json")
