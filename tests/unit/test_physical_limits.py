"""No figure beyond its physical limit is printed as a result (analysis/limits.py): every
committed GPU run and the simulated H200, H100, A100 and 8-GPU runs, re-rendered, are held
against the limits of the machine that ran them, and a run with figures timed wrong shows
each as a measurement error, with its limit, and judges nothing by it."""

import dataclasses
import re

import pytest
from helpers import render_md

from benchbench.analysis import limits, verdict
from benchbench.core import units as fmt
from benchbench.core.peaks import gpu_peak
from benchbench.reports import csv, markdown
from tests.support.committed_runs import H200_RUNS, committed

FIGURE = re.compile(r"(\d[\d,]*(?:\.\d+)?) ([kMGTP]?)(FLOP/s|B/s)")
PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def report_md(run):
    """report.md as `benchbench report` writes it (commands/report.write_reports)."""
    return render_md(run)


def ceilings(run):
    """The most any FLOP/s or B/s figure of this machine can be: its GPUs' top dense peak
    (fp8 where the GPU has it) over all of them, and the fastest GPU memory."""
    peaks = [gpu_peak(g["name"]) for g in run.environment["gpus"]]
    flops = sum(max(v for v in (p.fp8, p.bf16, p.fp16, p.tf32, p.fp32) if v) for p in peaks)
    return {"FLOP/s": flops * limits.OVER_LIMIT,
            "B/s": max(p.memory_bandwidth for p in peaks) * limits.OVER_LIMIT}


def over_ceilings(text, run):
    """Every FLOP/s and B/s figure in the text beyond its machine's ceiling."""
    top = ceilings(run)
    return [m.group(0) for m in FIGURE.finditer(text)
            if float(m.group(1).replace(",", "")) * PREFIX[m.group(2)] > top[m.group(3)]]


def shown_as_results(text, run):
    """Measurements beyond their limits whose value the text prints as a result (bold)."""
    return [f"{pr.name} {m.metric} {m.key}" for pr in run.probes for m in pr.measurements
            if limits.beyond(run, pr, m) and f"**{fmt.value(m.value, m.unit)}**" in text]


@pytest.fixture(scope="module")
def simulated():
    pytest.importorskip("torch")
    from benchbench.engine.sim_device import A100, H100, H100X8, H200
    from tests.support.sim_runs import simulated_run

    return {p.name: simulated_run(p) for p in (H200, H100, A100, H100X8)}


@pytest.mark.parametrize("name", H200_RUNS)
def test_committed_runs_print_no_figure_beyond_its_limit(name, tmp_path):
    run = committed(name, tmp_path)
    text = report_md(run)
    assert over_ceilings(text, run) == []
    assert shown_as_results(text, run) == []


def test_simulated_runs_print_no_figure_beyond_its_limit(simulated):
    for name, run in simulated.items():
        text = report_md(run)
        assert over_ceilings(text, run) == [], name
        assert shown_as_results(text, run) == [], name
        # every GPU figure a limit applies to was held against one
        judged = {pr.name for pr in run.probes for m in pr.measurements
                  if limits.limit(run, pr, m)}
        assert {"matmul", "memory_bandwidth", "host_device_copy", "stability", "resnet50",
                "transformer", "inference", "pipeline"} <= judged, name
        if name == "8x H100":
            assert {"allreduce", "ddp_scaling"} <= judged


def _timed_wrong(run):
    """The run with four figures timed wrong, as a clock read before the GPU finished
    would give them: the bf16 matmul peak, the GPU memory copy, a pinned copy and ResNet50."""
    factor = {("matmul", "peak_flops", "bf16"): 2.0, ("memory_bandwidth", "copy_bandwidth",
                                                       None): 1.5,
              ("host_device_copy", "peak_bandwidth", None): 1.3,
              ("resnet50", "throughput", None): 10.0}
    def wrong(pr, m):
        f = factor.get((pr.name, m.metric, m.key.get("dtype")))
        if not f or m.key.get("memory") == "host":
            return m
        return dataclasses.replace(m, value=m.value * f, samples=[s * f for s in m.samples])

    return dataclasses.replace(run, probes=[
        dataclasses.replace(pr, measurements=[wrong(pr, m) for m in pr.measurements])
        for pr in run.probes])


def test_a_figure_beyond_its_limit_is_a_measurement_error_never_a_result(tmp_path):
    run = _timed_wrong(committed("2026-12-04-h200-run3", tmp_path))
    beyond = [(pr.name, m.metric) for pr in run.probes for m in pr.measurements
              if limits.beyond(run, pr, m)]
    assert {("matmul", "peak_flops"), ("memory_bandwidth", "copy_bandwidth"),
            ("host_device_copy", "peak_bandwidth"), ("resnet50", "throughput")} <= set(beyond)
    # the check below does catch them when nothing screens them out
    raw = markdown.render(run, verdict.verdict(run), [])
    assert over_ceilings(raw, run) and shown_as_results(raw, run)
    text = report_md(run)
    assert over_ceilings(text, run) == [] and shown_as_results(text, run) == []
    assert ("`peak_flops` (device cuda:0, dtype bf16): measurement error: 1.5× the H200 SXM "
            "dense bf16 peak (990 TFLOP/s)") in text
    assert ("1.2× the H200 SXM dense bf16 peak ÷ 24.3 GFLOP a training image "
            "(40.7 ksamples/s)") in text
    # the verdict judges ResNet50's compute by what is left, never by 47,000 images/s
    judged = verdict.verdict(run)
    gpu = judged.main.capacity("gpu_compute")
    assert gpu is None or gpu < 5000
    # measurements.csv keeps the row, with no value and the reason
    columns, rows = csv.rows(limits.screened(run))
    errors = [r for r in rows if str(r.get("warning", "")).startswith("measurement error")]
    assert len(errors) == len(beyond) and all("value" not in r for r in errors)


def test_limits_of_an_h200():
    from benchbench.core.results import ProbeResult, RunResult
    from tests.support.synthetic_runs import measurement

    env = {"gpus": [{"index": 0, "name": "NVIDIA H200", "memory_total": 150754820096,
                     "pcie_gen_current": 5, "pcie_width_current": 16}]}
    run = RunResult(tool={}, started_at="", environment=env, config={}, argv=[])

    def lim(probe, metric, key, unit="samples/s"):
        m = measurement(metric, key, [1.0], unit, "median")
        return limits.limit(run, ProbeResult(name=probe, status="ok", resource="gpu_compute"),
                            m)

    assert lim("matmul", "flops", {"device": "cuda:0", "dtype": "bf16"}, "FLOP/s").value \
        == pytest.approx(989.5e12)
    # fp32 work may run on TF32 tensor cores unless told not to: bounded by TF32's rate
    assert lim("matmul", "flops", {"device": "cuda:0", "dtype": "fp32"}, "FLOP/s").value \
        == pytest.approx(494.5e12)
    assert lim("memory_bandwidth", "copy_bandwidth", {"memory": "cuda:0"}, "B/s").value == 4.8e12
    assert lim("memory_bandwidth", "copy_bandwidth", {"memory": "host"}, "B/s") is None
    assert lim("host_device_copy", "copy_bandwidth", {"device": "cuda:0"}, "B/s").value \
        == pytest.approx(63.0e9, rel=0.01)
    resnet = lim("resnet50", "throughput", {"device": "cuda:0", "precision": "amp_bf16",
                                            "image_size": 224})
    assert resnet.value == pytest.approx(989.5e12 / 24.3e9, rel=0.01)  # ~40,700 images/s
    assert lim("resnet50", "peak_memory", {"device": "cuda:0"}, "B").value == 150754820096
    assert lim("dataloader", "throughput", {"loader": "torchvision"}) is None
    assert lim("matmul", "flops", {"device": "cpu", "dtype": "fp32"}, "FLOP/s") is None
