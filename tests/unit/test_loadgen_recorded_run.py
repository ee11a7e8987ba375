"""A recorded default CPU run (inference only, 2026-12-06, this 2-core VM): its figures are
LoadGen's own. The Offline figure and verdict are those of LoadGen's summary file, and the
Server figure is the completed samples/s of LoadGen's summary for the run it names."""

import re
from pathlib import Path

import pytest

from benchbench.core import results

RUN = Path(__file__).parents[1] / "support" / "fixtures" / "cpu-inference-run"


def summary(name):
    """(Result is, the samples/s line's figure) of a LoadGen summary file."""
    text = (RUN / "inference" / name).read_text()
    verdict = re.search(r"Result is : (\w+)", text).group(1)
    rate = re.search(r"(?:Samples per second|Completed samples per second)\s*: ([\d.]+)",
                     text).group(1)
    return verdict, float(rate)


@pytest.fixture(scope="module")
def inference():
    run = results.load(RUN / "results.json")
    return {m.metric: m for m in run.probe("inference").measurements}


def test_offline_is_loadgens_figure_and_verdict(inference):
    m = inference["loadgen_offline_throughput"]
    assert "inference/offline_summary.txt" in m.context["logs"]
    verdict, rate = summary("offline_summary.txt")
    assert (verdict == "VALID") == m.context["valid"] and verdict == "VALID"
    assert m.value == pytest.approx(rate, rel=1e-5)
    assert m.context["abandoned"] == 0
    # planned from the SUT's own calls, not the sweep's
    assert m.context["expected_qps"] == pytest.approx(1.2 * m.context["sut_samples_per_s"])


def test_server_is_loadgens_completed_rate_at_its_target(inference):
    m = inference["server_throughput"]
    (log,) = [f for f in m.context["best_logs"] if f.endswith("_summary.txt")]
    verdict, rate = summary(Path(log).name)
    assert verdict == "VALID" and m.value == pytest.approx(rate, rel=1e-5)
    assert m.context["target_qps"] == max(t["rate"] for t in m.context["tried"]
                                          if t["valid"])
    # no rate above it passed, one failed: a measured capacity, not "at least"
    assert any(not t["valid"] and t["rate"] > m.context["target_qps"]
               for t in m.context["tried"]) and not m.context["lower_bound"]
    assert "(a VALID run)" in m.context["bound_source"]
