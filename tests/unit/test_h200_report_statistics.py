"""Statistics say what they are, on the committed H200 runs re-rendered: a "median" lies inside
its own IQR, a spread is named only over three samples or more (fewer give their values), and
a figure that is not its samples' median is not called one."""

import re

import pytest

from benchbench.core import units as fmt
from benchbench.core.results import Measurement
from benchbench.reports.markdown import statistic_name
from tests.support.committed_runs import H200_RUNS, committed
from tests.unit.test_physical_limits import report_md

NUMBER = re.compile(r"(-?\d[\d,]*(?:\.\d+)?) ?([kMGTPµm]?)")
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "µ": 1e-6}


def _number(cell):
    """The first figure of a cell, in its base unit ('1.26 s' -> 1.26, '599 ms' -> 0.599)."""
    m = NUMBER.search(cell.replace("*", ""))
    return float(m.group(1).replace(",", "")) * SCALE[m.group(2)]


def _tables(text):
    """Every Markdown table as a list of {column: cell} rows."""
    lines, tables, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            head = [c.strip() for c in lines[i].strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(head, (c.strip() for c in lines[i].strip("|").split("|")),
                                     strict=False)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


@pytest.mark.parametrize("name", H200_RUNS)
def test_every_median_lies_inside_its_iqr_and_few_samples_show_their_values(name, tmp_path):
    text = report_md(committed(name, tmp_path))
    medians = 0
    for rows in _tables(text):
        for row in rows:
            spread = row.get("IQR") or row.get("IQR, or the values")
            if spread is None or row.get("statistic") != "median":
                continue
            n = int(row["n"])
            if n < 3:
                assert spread.startswith(("values ", "one sample")) and row["CV"] == "—", row
                continue
            low, high = (_number(x) for x in spread.split(" – "))
            assert low * 0.995 <= _number(row["value"]) <= high * 1.005, row
            medians += 1
    assert medians > 10


def test_a_warm_step_is_not_called_the_median_of_two(tmp_path):
    text = report_md(committed("2026-12-04-h200-run3", tmp_path))
    # memory_fit's 7b step: samples [1.59 s, 270 ms], 270 ms the warm one, not a median
    assert "| **270 ms** | median |" not in text
    assert "| **270 ms** | the last of 2 samples, not their median | values 1.59 s, 270 ms |" \
        in text


def test_two_samples_are_not_noise(tmp_path):
    text = report_md(committed("2026-12-04-h200-run3", tmp_path))
    noisy = text.split("## Noisy measurements")[1].split("\n## ")[0]
    assert "memory_fit" not in noisy  # CV 100% over a first and a warm step, before


def test_statistic_name():
    def m(value, samples):
        return Measurement(metric="step_time", key={}, value=value, unit="s",
                           statistic="median", samples=samples, higher_is_better=False)

    assert statistic_name(m(2.0, [1.0, 2.0, 3.0])) == "median"
    assert statistic_name(m(3.0, [5.0, 3.0])) == "the last of 2 samples, not their median"
    assert statistic_name(m(9.0, [5.0, 3.0, 1.0])) == "not the median of its samples"
    assert fmt.value(0.27, "s") == "270 ms"
