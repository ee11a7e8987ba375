"""The training probes on tiny CPU shapes, their arithmetic, OOM back-off and bad input."""

import re

import pytest

torch = pytest.importorskip("torch")

from helpers import render_md, resolved, run_args  # noqa: E402

from benchbench.analysis import derive as analysis  # noqa: E402
from benchbench.commands.common import UsageError  # noqa: E402
from benchbench.core.results import Measurement, ProbeResult, RunResult  # noqa: E402
from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.machine.environment import torch_facts  # noqa: E402
from benchbench.probes.api import ProbeContext  # noqa: E402
from benchbench.probes.meter import tf32_enabled  # noqa: E402
from benchbench.workloads import _training  # noqa: E402
from benchbench.workloads.models.gpt import (  # noqa: E402
    GPT,
    gpt_n_params,
    transformer_flops_per_token,
)
from benchbench.workloads.resnet50 import run as resnet50  # noqa: E402
from benchbench.workloads.transformer import run as transformer  # noqa: E402
from benchbench.workloads.transformer.config import PRESETS  # noqa: E402


def ctx(budget=120.0):
    return ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=2, max_repeats=2, warmup_s=0.0,
                                            warmup_steps=1),
                        budget=Budget(budget), facts=torch_facts())


def job(precisions=("fp32",), batch=16, steps=3, dev="cpu"):
    return _training.TrainingJob(dev=dev, precisions=precisions, batch_size=batch,
                                 default_batch=16, batch_cap=64, steps=steps,
                                 work_per_sample=1.0, unit="samples/s",
                                 key=lambda p: {"precision": p})


def check_training(out, unit, precisions):
    thr = {m.key["precision"]: m for m in out.measurements if m.metric == "throughput"}
    assert set(thr) == set(precisions)
    for m in thr.values():
        assert m.unit == unit and m.statistic == "total_over_time" and len(m.samples) == 2
        step_times = next(s for s in out.measurements
                          if s.metric == "step_time" and s.key == m.key).samples
        work = m.context["batch"] * (m.key.get("seq_len") or 1)
        # total work over total time, not the mean of per-step rates
        assert m.value == pytest.approx(work * 2 / sum(step_times))
        assert m.context["oom_backoff"] == []
    return thr


def test_resnet50_cpu_each_precision():
    cfg = resolved("resnet50", precisions=("fp32", "amp_bf16", "amp_fp16", "tf32"), batch_size=2,
                         image_size=32, steps=2, channels_last=False, warmup_steps=1)
    out = resnet50.run(ctx(), cfg)
    thr = check_training(out, "samples/s", ["fp32", "amp_bf16"])
    assert thr["amp_bf16"].context["autocast"] == "torch.bfloat16"
    assert thr["fp32"].context["tf32_enabled"] is False
    assert any(n.startswith("amp_fp16 on cpu skipped, because") for n in out.notes)
    assert any(n.startswith("tf32 on cpu skipped, because") for n in out.notes)
    assert not tf32_enabled()  # left as true fp32 for what follows
    if hasattr(torch.backends.cudnn, "conv"):  # the fp32_precision API, torch 2.9 and later
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"


def test_transformer_cpu_each_precision():
    cfg = resolved("transformer", precisions=("fp32", "amp_bf16"), preset="small", n_layers=1,
                            d_model=32, n_heads=2, vocab_size=128, seq_len=16, batch_size=2,
                            steps=2, warmup_steps=1)
    out = transformer.run(ctx(), cfg)
    check_training(out, "tokens/s", ["fp32", "amp_bf16"])
    (fpt,) = [m for m in out.measurements if m.metric == "flops_per_token"]
    n = 128 * 32 + (2 * 32 + 4 * 32 * 32 + 8 * 32 * 32) + 32  # wte + one block + ln_f
    assert fpt.context["n_params"] == n == 16480
    assert fpt.value == 6 * n + 12 * 1 * 2 * 16 * 16


def test_gpt_counts_parameters_without_position_embeddings():
    model = GPT(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=32)
    total = sum(p.numel() for p in model.parameters())  # the tied head's weight once
    assert gpt_n_params(2, 64, 256) == total - 32 * 64
    assert model.lm_head.weight is model.wte.weight
    with pytest.raises(ValueError, match="exceeds"):
        model(torch.zeros(1, 33, dtype=torch.long), torch.zeros(1, 33, dtype=torch.long))


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_parameter_count_from_the_shape_is_the_built_models(preset):
    dims = PRESETS[preset]
    # small on the CPU for real; the larger ones on the meta device (no memory, no time)
    model = transformer.build_model(dims, "cpu" if preset == "small" else "meta")
    counted = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    assert gpt_n_params(dims["n_layers"], dims["d_model"], dims["vocab_size"]) == counted
    if preset == "gpt2-124m":
        assert counted == 123_587_328  # GPT-2 small without biases or position embeddings


def test_the_transformer_builds_its_model_on_the_device_and_only_to_train(monkeypatch):
    model = transformer.build_model(PRESETS["gpt2-124m"], "meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}  # never made on the host
    built, steps = [], []

    class Counted(GPT):
        def __init__(self, *args):
            super().__init__(*args)
            built.append(next(self.parameters()).device.type)

    make_step = transformer.make_step
    monkeypatch.setattr(transformer, "GPT", Counted)
    monkeypatch.setattr(transformer, "make_step", lambda *a: steps.append(1) or make_step(*a))
    cfg = resolved("transformer", precisions=("fp32", "amp_bf16"), preset="small", n_layers=1,
                   d_model=32, n_heads=2, vocab_size=128, seq_len=16, batch_size=2, steps=2,
                   warmup_steps=1)
    transformer.run(ctx(), cfg)
    assert built == ["cpu"] * len(steps) and len(steps) >= 2  # one model per step built


def test_flops_per_token_and_mfu_by_hand():
    assert transformer_flops_per_token(1000, 2, 4, 8, 16) == 6000 + 12288
    fpt = transformer_flops_per_token(124_000_000, 12, 12, 64, 1024)
    assert fpt == 6 * 124e6 + 12 * 12 * 12 * 64 * 1024  # 744e6 + 113.2e6
    key = {"device": "cuda:0", "precision": "amp_bf16", "preset": "gpt2-124m", "seq_len": 1024,
           "batch_size": None}
    thr = Measurement(
        metric="throughput",
        key=key,
        value=500_000.0,
        unit="tokens/s",
        statistic="total_over_time",
        samples=[5e5],
        higher_is_better=True,
        context={"gpu_name": "NVIDIA H100 80GB HBM3"},
    )
    flops = Measurement(
        metric="flops_per_token",
        key={"preset": "gpt2-124m", "seq_len": 1024},
        value=fpt,
        unit="count",
        statistic="median",
        samples=[fpt],
        higher_is_better=False,
    )
    mm = Measurement(
        metric="peak_flops",
        key={"device": "cuda:0", "dtype": "bf16"},
        value=700e12,
        unit="FLOP/s",
        statistic="max",
        samples=[700e12],
        higher_is_better=True,
    )
    run = RunResult(
        tool={},
        started_at="",
        environment={},
        config={},
        argv=[],
        probes=[
            ProbeResult(name="matmul", status="ok", resource="gpu_compute", measurements=[mm]),
            ProbeResult(
                name="transformer", status="ok", resource="gpu_compute", measurements=[flops, thr]
            ),
        ],
    )
    (u,) = analysis.transformer_utilisation(run)
    assert u["flops_achieved"] == pytest.approx(5e5 * fpt)
    assert u["mfu"] == pytest.approx(5e5 * fpt / 989.5e12)  # H100 SXM dense bf16
    assert u["mamfu"] == pytest.approx(5e5 * fpt / 700e12)
    cpu = RunResult(
        tool={},
        started_at="",
        environment={},
        config={},
        argv=[],
        probes=[
            ProbeResult(
                name="transformer",
                status="ok",
                resource="cpu_compute",
                measurements=[
                    flops,
                    Measurement(
                        metric="throughput",
                        key={**key, "device": "cpu"},
                        value=1e3,
                        unit="tokens/s",
                        statistic="total_over_time",
                        samples=[1e3],
                        higher_is_better=True,
                        context={},
                    ),
                ],
            )
        ],
    )
    (u,) = analysis.transformer_utilisation(cpu)
    assert u["mfu"] is None and u["mfu_reason"] == "no datasheet peak for a CPU"
    assert u["mamfu"] is None and "matmul measured no bf16 ceiling" in u["mamfu_reason"]


def test_speedup_table_from_synthetic_measurements():
    def thr(precision, value):
        return Measurement(
            metric="throughput",
            key={"device": "cuda:0", "precision": precision, "image_size": 224, "batch_size": None},
            value=value,
            unit="samples/s",
            statistic="total_over_time",
            samples=[value],
            higher_is_better=True,
            context={"gpu_name": "NVIDIA H100 80GB HBM3"},
        )

    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="resnet50", status="ok", resource="gpu_compute", measurements=[
            thr("fp32", 100.0), thr("tf32", 300.0), thr("amp_bf16", 700.0)])])
    rows = {r["ratio"]: r for r in analysis.precision_speedups(run)}
    assert set(rows) == {"tf32/fp32", "amp_bf16/tf32", "amp_bf16/fp32"}  # no fp16 measured
    assert rows["tf32/fp32"]["measured"] == pytest.approx(3.0)
    assert rows["tf32/fp32"]["expected"] == pytest.approx(494.5 / 67)
    assert rows["amp_bf16/tf32"]["expected"] == pytest.approx(2.0, rel=1e-2)
    assert rows["amp_bf16/fp32"]["measured"] == pytest.approx(7.0)

    text = render_md(run)
    assert "| resnet50 | amp_bf16/tf32 | 2.33x | 2.00x (H100 SXM) |" in text


def test_oom_back_off_with_injected_failure():
    built = []

    def build(batch, precision):
        built.append(batch)
        if batch > 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return lambda: None

    ms, notes = _training.run_training(ctx(), job(("fp32", "amp_bf16")), build)
    thr = [m for m in ms if m.metric == "throughput"]
    assert [m.context["batch"] for m in thr] == [4, 4]
    assert [m.context["oom_backoff"] for m in thr] == [[16, 8], [16, 8]]
    # fp32 is built at its batch at once; amp_bf16 (often emulated on a CPU) is previewed at
    # batch 2 first
    assert built == [16, 8, 4, 2, 16, 8, 4]


def test_oom_even_at_batch_one_is_a_skip_not_a_crash():
    def never_fits(batch, precision):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        _training.with_backoff(2, lambda b: never_fits(b, None))
    ms, notes = _training.run_training(ctx(), job(batch=2), never_fits)
    assert ms == [] and notes == ["fp32 skipped, because even a batch of 1 does not fit in "
                                  "memory"]
    ms, _ = _training.run_training(  # batch 2 fails (the preview too), batch 1 fits
        ctx(), job(("amp_bf16",), batch=2),
        lambda b, p: never_fits(b, p) if b > 1 else (lambda: None))
    assert ms[0].context["batch"] == 1 and ms[0].context["oom_backoff"] == [2]


def test_other_errors_are_not_mistaken_for_oom():
    def broken(batch):
        raise RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")

    with pytest.raises(RuntimeError, match="cuDNN"):
        _training.with_backoff(8, broken)
    assert _training.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: 9 GB"))


def test_search_batch_finds_largest_power_of_two():
    assert _training.search_batch(256, lambda b: b <= 1024, cap=4096)[0] == 1024
    best, tried = _training.search_batch(256, lambda b: b <= 100, cap=4096)
    assert best == 64 and tried == [(256, False), (128, False), (64, True)]
    assert _training.search_batch(4, lambda b: True, cap=16)[0] == 16  # capped
    assert _training.search_batch(4, lambda b: False, cap=16)[0] is None


def test_budget_skips_a_precision_that_cannot_fit():
    import time

    def build(batch, precision):
        return lambda: time.sleep(0.05 * batch)

    ms, notes = _training.run_training(ctx(budget=0.2), job(batch=8), build)
    assert ms == []
    # The note states the comparison that decided: what the fewest steps would take, against
    # what the budget allowed, so that the two numbers explain the skip.
    got = re.fullmatch(r"fp32 skipped, because its 2 fewest timed steps at ~([\d.]+) s each "
                       r"\(its warm step\) would take ~([\d.]+) s, more than the ([\d.]+) s "
                       r"its share of the time budget allows", notes[0])
    assert got, notes[0]
    step, need, allowed = map(float, got.groups())
    assert need == pytest.approx(2 * step, rel=0.02) and need > allowed


def test_the_first_figures_fewest_steps_run_where_they_fit_the_whole_share():
    """A first step of 0.5 s (start-up) and later ones of 0.1 s, in a 0.65 s budget: the
    warm-up leaves ~0.05 s, yet two timed steps (0.2 s) fit in the whole share, and a figure
    of two steps is worth more than a skipped probe. A second precision gets no such grace."""
    import time

    def build(batch, precision):
        calls = []

        def step():
            calls.append(1)
            time.sleep(0.5 if len(calls) == 1 else 0.1)

        return step

    ms, notes = _training.run_training(ctx(budget=0.65), job(("fp32", "amp_bf16"), batch=2),
                                       build)
    steps = next(m for m in ms if m.metric == "step_time")
    assert steps.key == {"precision": "fp32"} and len(steps.samples) == _training.MIN_STEPS
    assert not any(m.key["precision"] == "amp_bf16" for m in ms)
    assert any(n.startswith("amp_bf16 skipped, because") for n in notes)


@pytest.mark.parametrize("sets,match", [
    (["resnet50.precisions=fp32,fp4"], "precisions: unknown fp4"),
    (["resnet50.precisions=fp32,fp8"], "fp8 trains through torchao's float8 Linear layers"),
    (["ddp_scaling.precision=fp8"], "precision: unknown fp8"),
    (["transformer.preset=gpt5"], "preset: unknown gpt5"),
    (["resnet50.batch_size=0"], "batch_size must be a positive integer or auto"),
    (["transformer.preset=small", "transformer.seq_len=4096"], "larger than the small model"),
    (["transformer.preset=small", "transformer.n_heads=3"], "not divisible"),
])
def test_bad_training_input(sets, match):
    from benchbench.commands.common import build_run_config
    from benchbench.engine.catalog import default_registry

    with pytest.raises(UsageError, match=match):
        build_run_config(run_args(set=sets), default_registry())


def test_seq_len_beyond_the_auto_preset_is_refused_before_work(tmp_path):
    from benchbench.commands.common import build_run_config
    from benchbench.core.config import ConfigError
    from benchbench.engine.catalog import default_registry
    from benchbench.engine.runner import Runner

    registry = default_registry()
    cfg = build_run_config(run_args(set=["transformer.seq_len=4096"]), registry)
    with pytest.raises(ConfigError, match="larger than the small model supports"):
        Runner(registry, cfg, tmp_path / "r", [], {"cuda_available": False}, {}, None)
    assert not (tmp_path / "r").exists()


def test_plan_steps_shrinks_to_the_budget_but_not_below_two():
    assert _training.plan_steps(6.5, wanted=5, share_s=13.5) == 2
    assert _training.plan_steps(1.0, wanted=5, share_s=13.5) == 5
    assert _training.plan_steps(1.0, wanted=50, share_s=27.0) == 27
    assert _training.plan_steps(30.0, wanted=5, share_s=13.5) is None
