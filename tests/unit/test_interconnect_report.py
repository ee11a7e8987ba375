"""The interconnect section of the report, re-rendered from what the H200 runs recorded: an
all-reduce over one rank and DDP at one rank stand as one line each, never as a table, a plot or
a cost knee read from one point."""

import pytest
from committed_runs import H200_RUNS, committed
from helpers import render_md

from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.reports import interconnect, plots

# The H200 runs of 2026-12-04 have one GPU each, so their all-reduce ran over one rank (a
# constant 0.0656 µs, algbw up to 16.4 PB/s) and their DDP at one rank (a "cost knee: 1 GPUs").

@pytest.mark.parametrize("name", H200_RUNS)
def test_a_committed_one_gpu_run_shows_no_all_reduce_or_knee(name, tmp_path):
    run = committed(name, tmp_path)
    assert {m.key["world_size"] for m in run.probe("allreduce").measurements} == {1}
    assert interconnect.section(run)[2:] == [
        "- All-reduce skipped, because one GPU: there is nothing to exchange (this run timed "
        "it over one rank, where no data moves; its figures are not shown).", "",
        "- DDP scaling skipped, because one GPU: there is nothing to exchange, and one point "
        "has no scaling or cost knee to read (this run trained one rank only; its figures are "
        "not shown).", ""]
    assert plots.allreduce_figure(run) is None
    text = render_md(run)
    assert "Cost knee" not in text and "PB/s" not in text and "all-reduces per sample" not in text
    probe = text.split("### All-reduce (`allreduce`)", 1)[1].split("\n### ", 1)[0]
    assert "there is nothing to exchange" in probe
    assert "**`allreduce_time`**" not in probe and "**`algbw`**" not in probe
    ddp = text.split("### Multi-GPU scaling (`ddp_scaling`)", 1)[1].split("\n### ", 1)[0]
    assert "there is nothing to exchange" in ddp and "**`throughput`**" not in ddp


def _allreduce(world: int) -> ProbeResult:
    key = {"backend": "nccl", "dtype": "fp32", "world_size": world, "nodes": 1,
           "size_bytes": 1 << 30}
    ms = [Measurement(metric=metric, key=key, value=v, unit=u, statistic="median", samples=[v],
                      higher_is_better=u != "s")
          for metric, v, u in (("allreduce_time", 5e-3, "s"), ("algbw", 2e11, "B/s"),
                               ("busbw", 3.5e11, "B/s"))]
    return ProbeResult(name="allreduce", status="ok", resource="interconnect",
                       params={"backend": "nccl", "world_size": world}, measurements=ms)


def test_an_all_reduce_over_several_ranks_keeps_its_table_and_plot():
    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[],
                    probes=[_allreduce(8)])
    assert interconnect.single_rank_allreduce(run.probes[0]) is None
    assert "| 1 GiB | 5.00 ms |" in "\n".join(interconnect.section(run))
    assert plots.allreduce_figure(run) is not None
