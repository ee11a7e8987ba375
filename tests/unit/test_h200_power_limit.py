"""The three committed H200 runs at their 700 W default power limit, re-rendered (issue 68): the
energy section measures no J per image over a window NVML's one-second power average cannot
resolve, the stability probe is steady at its power limit rather than blamed on a neighbour,
and the doctor passes a GPU held at its default power limit."""

import re

import pytest
from committed_runs import H200_RUNS, committed
from helpers import render_md

from benchbench.analysis import energy, stability
from benchbench.doctor.checks import run_checks
from benchbench.reports import energy as energy_report

# amp_bf16's timed windows, resnet50 and transformer: 2 steps and 15-20 steps of round 1
WINDOWS = {"2026-12-04-h200": ("0.11", "0.9"), "2026-12-04-h200-run2": ("0.11", "0.81"),
           "2026-12-04-h200-run3": ("0.11", "0.89")}
# the SM clock NVML read while the stability windows ran, under the power cap
CLOCKS = {"2026-12-04-h200": "1,275–1,545 MHz", "2026-12-04-h200-run2": "1,275–1,500 MHz",
          "2026-12-04-h200-run3": "1,245–1,575 MHz"}


def _section(text, title):
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].strip()


@pytest.mark.parametrize("name", H200_RUNS)
def test_energy_per_sample_is_not_measured_over_a_window_under_a_second(name, tmp_path):
    """Run 3 printed 0.0353 J/image from 165 W over 2 timed steps (0.1 s) after a 9.3 s, mostly
    idle autotune: about 3.6 times too good, with nine significant figures."""
    run = committed(name, tmp_path)
    rows = {r["probe"]: r for r in energy.energy_rows(run)}
    resnet, gpt = WINDOWS[name]
    for probe, per, window in (("resnet50", "image", resnet), ("transformer", "token", gpt)):
        r = rows[probe]
        assert r["per_sample_J"] is None and r["load_watts"] is None and r["per_kWh"] is None
        assert r["basis"] == (f"energy per {per} not measured, because amp_bf16's timed window "
                              f"was {window} s, under the 1 s over which NVML averages a GPU's "
                              "power")
        assert r["timed_share"] < energy.MOSTLY_TIMED  # the probe was mostly start-up
    assert energy.load_power(run) is None
    text = "\n".join(energy_report.section(run))
    assert "J/image" not in text and "J/token" not in text and "/kWh" not in text
    assert "| resnet50 |" in text and "— (mostly start-up) | not measured | not measured |" in text
    assert "its mean power over the probe" in text
    # three significant figures at most in every number of the section
    figures = re.findall(r"\d[\d,]*(?:\.\d+)?", text.replace("0.", "."))
    assert all(len(f.replace(",", "").replace(".", "").lstrip("0")) <= 3 for f in figures), [
        f for f in figures if len(f.replace(",", "").replace(".", "").lstrip("0")) > 3]


@pytest.mark.parametrize("name", H200_RUNS)
def test_stability_is_steady_at_the_power_limit_not_a_neighbour(name, tmp_path):
    """Every busy sample carried the power cap, the window throughput followed the clock, and
    per GHz of it held within what the clock readings themselves allow."""
    run = committed(name, tmp_path)
    j = stability.judge_run(run)
    assert j["judgement"] == stability.POWER_LIMIT, j["evidence"]
    assert stability.clock_range(j["clock"]) == CLOCKS[name]
    view = j["clock"]
    assert view["capped"] == 1.0 and view["faults"] == 0.0 and view["r"][1] < 0.05
    text = _section(render_md(run), "Stability")
    assert text.startswith(f"**steady at its power limit** ({CLOCKS[name]}): throughput moved "
                           "with the SM clock")
    assert "another tenant" not in text and "noisy" not in text


@pytest.mark.parametrize("name", H200_RUNS)
def test_the_doctor_passes_a_gpu_held_at_its_default_power_limit(name, tmp_path):
    """Run 3's doctor warned "the numbers are below what the GPU can do" for matmul clocks that
    fell to 73-82% of their busy median, every such sample under the power cap at 700 W."""
    run = committed(name, tmp_path)
    (c,) = [c for c in run_checks(run.environment, run, None) if c.name == "clock throttling"]
    assert c.status == "pass", (c.measured, c.detail)
    assert c.measured.startswith("none; at its power limit in ")
    assert c.detail.startswith("held at its power limit, its default of 700 W: the software "
                               "power cap, no fault alone")
    assert "below what the GPU can do" not in c.detail
    if name == "2026-12-04-h200-run3":
        assert ("matmul: GPU 0 SM clock fell to 82% of its busy median of 1485 MHz in this "
                "probe, and stayed under 90% of it in 9% of the busy samples, every such sample "
                "under the power cap") in c.detail
