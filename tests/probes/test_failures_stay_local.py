"""A dtype, a size or a precision that raises becomes a skipped row with its reason, and what
was measured stays; only ProbeSkipped (the whole probe) and interrupts pass through. On the CPU
with real torch; the fp8 cases, which need a GPU's planning, are in test_fp8.py."""

import pytest
from helpers import resolved

torch = pytest.importorskip("torch")

from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.machine.environment import torch_facts  # noqa: E402
from benchbench.probes.api import ProbeContext, ProbeSkipped  # noqa: E402
from benchbench.probes.matmul import run as matmul  # noqa: E402
from benchbench.workloads import _training  # noqa: E402


def ctx(budget=5.0):
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=3, max_repeats=4,
                                                          target_cv=0.5, warmup_s=0.0),
                        budget=Budget(budget), facts=torch_facts())


def test_a_matmul_dtype_that_raises_is_skipped_with_its_reason_and_the_rest_stays(monkeypatch):
    real = matmul._measure

    def measure(ctx, cfg, dev, dt, n, items_left, warm=False):
        if dt == "bf16" and n == 64:
            raise ValueError("bf16 GEMM is not built into this torch\nsecond line")
        return real(ctx, cfg, dev, dt, n, items_left, warm)

    monkeypatch.setattr(matmul, "_measure", measure)
    cfg = resolved("matmul", sizes=(32, 64), dtypes=("fp32", "bf16"), min_sample_s=0.001)
    out = matmul.run(ctx(), cfg)
    flops = {(m.key["dtype"], m.key["size"]) for m in out.measurements if m.metric == "flops"}
    assert flops == {("fp32", 32), ("fp32", 64), ("bf16", 32)}
    assert {m.key["dtype"] for m in out.measurements if m.metric == "peak_flops"} == {
        "fp32", "bf16"}
    # The exception's type and first line: the row says what failed.
    assert "bf16 n=64 on cpu skipped, because ValueError: bf16 GEMM is not built into this " \
           "torch" in out.notes


@pytest.mark.parametrize("exc", [ProbeSkipped("no GPU"), KeyboardInterrupt()])
def test_the_matmul_sweep_lets_a_skipped_probe_and_an_interrupt_through(exc):
    def measure(dev, dt, n, left, warm):
        raise exc

    with pytest.raises(type(exc)):
        matmul.sweep(ctx(), ["cpu"], {"cpu": ["fp32"]}, [32], measure, [])


def _job(precisions):
    return _training.TrainingJob(
        dev="cpu", precisions=precisions, batch_size=2, default_batch=2, batch_cap=4, steps=2,
        work_per_sample=1.0, unit="samples/s", key=lambda p: {"precision": p})


def test_a_training_precision_that_raises_is_skipped_and_the_one_before_it_stays():
    def build(batch, precision):
        if precision.name == "amp_bf16":
            raise NotImplementedError("autocast to bfloat16 is not supported here")
        return lambda: None

    out, notes = _training.run_training(ctx(), _job(("fp32", "amp_bf16")), build)
    assert {m.key["precision"] for m in out if m.metric == "throughput"} == {"fp32"}
    assert "amp_bf16 on cpu skipped, because NotImplementedError: autocast to bfloat16 is not " \
           "supported here" in notes


@pytest.mark.parametrize("exc", [ProbeSkipped("no data"), KeyboardInterrupt()])
def test_training_lets_a_skipped_probe_and_an_interrupt_through(exc):
    def build(batch, precision):
        raise exc

    with pytest.raises(type(exc)):
        _training.run_training(ctx(), _job(("fp32",)), build)
