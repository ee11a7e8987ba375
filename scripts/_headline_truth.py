"""The GPU check's headline row that holds the run's verdict against the ground truth
(scripts/ground_truth.py: a minute of ResNet50 trained on the run's data through the real
loader): the verdict's predicted training rate within TRUTH_RATE of the measured one, and the
same limit. The ground truth's limit is CPU data loading where it trained under LOADER_BOUND x
the run's ResNet50 rate on synthetic data (the GPU waited for data), else compute. The verdict
is computed again from the run's measurements, as `benchbench report` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbench.analysis import verdict as verdicts
from benchbench.core.names import resource_name
from benchbench.core.results import RunResult

# The bar: the prediction within 10% of what a real trainer measured.
TRUTH_RATE = 0.10
# Training on real data at under 0.9x the synthetic-data rate: the step waited for its batches
# (the pipeline's AU bar, derive.AU_PASS, is the same 0.9).
LOADER_BOUND = 0.9
NAME = "verdict against the ground truth (ResNet50, real data, steady)"
REFERENCE = (f"the verdict's ResNet50 rate within {TRUTH_RATE:.0%} of the measured one, and the "
             "same limit")


def _missing(why: str) -> tuple[str, str, str, str]:
    return (NAME, f"not measured: {why}".replace("|", "/"), REFERENCE, "—")


def read_truth(path: str) -> dict[str, Any]:
    """scripts/ground_truth.py's JSON; a missing file reads as a ground truth that did not
    run (gpu-validate.sh leaves it out when the time is short)."""
    try:
        return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {"status": "not run", "reason": f"{path} was not written: the ground truth did "
                                               "not run (the log says why)"}


def compute_rate(run: RunResult, truth: dict[str, Any]) -> tuple[float, str] | None:
    """The run's ResNet50 rate on synthetic data at the ground truth's precision and size
    (the resnet50 probe's, else the pipeline's own synthetic step), and where it came from."""
    key = {"precision": truth.get("precision"), "image_size": truth.get("image_size")}
    for probe, metric in (("resnet50", "throughput"), ("pipeline", "compute_throughput")):
        pr = run.probe(probe)
        ms = [m for m in (pr.measurements if pr else []) if m.metric == metric
              and all(m.key.get(k) == v for k, v in key.items())]
        best = max(ms, key=lambda m: m.value, default=None)
        if best is not None:
            return best.value, f"{probe} {metric}"
    return None


def judge(measured: float, compute: float, limit: str, predicted: float, on_gpu: bool
          ) -> tuple[str, float, bool]:
    """(the ground truth's limit, predicted ÷ measured - 1, whether the verdict meets it)."""
    truth_limit = "cpu_dataloading" if measured < LOADER_BOUND * compute else (
        "gpu_compute" if on_gpu else "cpu_compute")
    off = predicted / measured - 1
    return truth_limit, off, abs(off) <= TRUTH_RATE and limit == truth_limit


def truth_row(run: RunResult, truth: dict[str, Any]) -> tuple[str, str, str, str]:
    """The verdict's predicted training rate and limit against the ground truth's: its limit
    is CPU data loading where it trained under LOADER_BOUND x the run's compute rate on
    synthetic data, else compute."""
    if truth.get("status") != "ok":
        return _missing(str(truth.get("reason") or f"the ground truth {truth.get('status')}"))
    measured = float(truth["rate"])
    compute = compute_rate(run, truth)
    v = verdicts.verdict(run, "resnet50")
    wv = v.per_workload.get("resnet50", v.main)
    limit = wv.limiting_resource
    predicted = wv.capacity(limit)
    if compute is None or limit is None or predicted is None:
        why = ("the run measured no ResNet50 rate on synthetic data at "
               f"{truth.get('precision')}, {truth.get('image_size')} px" if compute is None
               else "the verdict names no limit with a rate")
        return _missing(why)
    share = measured / compute[0]
    truth_limit, off, ok = judge(measured, compute[0], limit, predicted,
                                 str(truth.get("device", "")).startswith("cuda"))
    windows = truth.get("window_rates") or []
    spread = f": {min(windows):,.0f}-{max(windows):,.0f}" if windows else ""
    shown = (f"trained {measured:,.0f} img/s over {float(truth['seconds']):.0f} s "
             f"({len(windows)} windows{spread}; {truth.get('precision')}, batch "
             f"{truth.get('batch')}, {truth.get('workers')} workers), limit "
             f"{resource_name(truth_limit)} ({share:.2f}x the {compute[0]:,.0f} img/s of "
             f"{compute[1]} on synthetic data); the verdict: {predicted:,.0f} img/s "
             f"({off:+.0%}), limit {resource_name(limit)} at {wv.precision}")
    return (NAME, shown.replace("|", "/"), REFERENCE, "yes" if ok else "NO")
