"""Write every measurement of a run as measurements.csv, one row each, for spreadsheets and
pandas: its key fields as `key.<name>` columns, its value and unit, the statistics
recomputed from its raw samples, and its warning (report.md groups them one line per probe);
a figure beyond its physical limit has no value, only the warning that says so."""

from __future__ import annotations

import os
from typing import Any

from benchbench.analysis.limits import errors
from benchbench.core.results import RunResult, write_atomic
from benchbench.core.stats import summarize
from benchbench.reports import noise

LEADING = ["probe", "metric"]
TRAILING = ["value", "unit", "statistic", "n", "median", "q1", "q3", "cv", "higher_is_better",
            "warning"]


def rows(run: RunResult) -> tuple[list[str], list[dict[str, Any]]]:
    """(the columns, one dict per measurement). Key columns in the order they first appear."""
    key_names: dict[str, None] = {}
    out = []
    for pr in run.probes:
        for m in pr.measurements:
            s = summarize(m.samples)
            row: dict[str, Any] = {"probe": pr.name, "metric": m.metric}
            for k, v in m.key.items():
                key_names.setdefault(k)
                # Lists and dicts in a key would become Python reprs; a cell holds a scalar.
                row[f"key.{k}"] = v if isinstance(v, (str, int, float, bool)) or v is None \
                    else str(v)
            row.update(value=m.value, unit=m.unit, statistic=m.statistic, n=s.n,
                       median=s.median, q1=s.q1, q3=s.q3, cv=s.cv,
                       higher_is_better=m.higher_is_better, warning=noise.warning(m))
            out.append(row)
        for e in errors(run, pr.name):  # beyond its physical limit: no value, the reason
            for k in e["key"]:
                key_names.setdefault(k)
            out.append({"probe": pr.name, "metric": e["metric"], "unit": e["unit"],
                        "warning": e["text"],
                        **{f"key.{k}": v if isinstance(v, (str, int, float, bool)) else str(v)
                           for k, v in e["key"].items()}})
    return LEADING + [f"key.{k}" for k in key_names] + TRAILING, out


def write(run: RunResult, path: str | os.PathLike[str]) -> None:
    write_table(path, *rows(run))


def write_table(path: str | os.PathLike[str], columns: list[str],
                data: list[dict[str, Any]]) -> None:
    """One CSV row per dict, under `columns`; a missing or None cell is empty. measurements.csv
    is written here."""
    write_atomic(path, table_text(columns, data))


def table_text(columns: list[str], data: list[dict[str, Any]]) -> str:
    """The CSV text of write_table: measurements.csv's, and compare.csv's, history.csv's and
    fleet.csv's, which their verbs write with the rest of --out."""
    import pandas as pd

    # Nullable dtypes keep an integer key column integral where other rows leave it empty.
    frame = pd.DataFrame(data, columns=columns).convert_dtypes()
    return str(frame.to_csv(index=False, lineterminator="\n"))
