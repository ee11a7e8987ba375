"""fp8: the matmul dtype and the transformer precision, skipped with their reasons where they
cannot run (this CPU, a GPU older than Ada, no torchao), planned on the simulated H200, and held
against the buyer's guide's "Transformer Engine saves over 40%"."""

import pytest
from helpers import cpu_facts, resolved

torch = pytest.importorskip("torch")

from benchbench.engine import simulate  # noqa: E402
from benchbench.probes.matmul import run as matmul  # noqa: E402
from benchbench.workloads import _training  # noqa: E402

H200 = simulate.facts_for(simulate.H200)


def test_fp8_on_this_cpu_is_skipped_with_its_reason():
    notes = []
    got = matmul.usable_dtypes("cpu", resolved("matmul").dtypes, notes, cpu_facts())
    assert "fp8" in resolved("matmul").dtypes and "fp8" not in got
    assert "fp8 on cpu skipped, because fp8 needs the tensor cores of a GPU of compute " \
           "capability 8.9 or later (Ada, Hopper)" in notes
    notes = []
    cfg = resolved("transformer", quick=False)
    assert "fp8" in cfg.precisions
    assert "fp8" not in _training.usable_precisions("cpu", cfg.precisions, notes, cpu_facts())
    assert any(n.startswith("fp8 on cpu skipped, because fp8 needs the tensor cores") for n in
               notes)


def test_fp8_on_an_a100_or_without_torchao_is_skipped_with_its_reason(monkeypatch):
    a100 = {**H200, "gpus": [{**H200["gpus"][0], "capability": "8.0"}]}
    notes = []
    assert matmul.usable_dtypes("cuda:0", ("bf16", "fp8"), notes, a100) == ["bf16"]
    assert notes == ["fp8 on cuda:0 skipped, because compute capability 8.0 has no fp8 tensor "
                     "cores (8.9 and later: Ada, Hopper)"]
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    notes = []
    no_torchao = {**H200, "torchao": None}
    assert _training.usable_precisions("cuda:0", ("amp_bf16", "fp8"), notes, no_torchao) == [
        "amp_bf16"]
    assert notes == ["fp8 on cuda:0 skipped, because torchao is not installed: pip install "
                     "'benchbench[fp8]' (torchao's float8 training)"]


def test_fp8_planning_on_the_simulated_h200():
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5)
    peaks = {m.key["dtype"]: m.value for m in mm.measurements if m.metric == "peak_flops"}
    assert peaks["fp8"] / peaks["bf16"] == pytest.approx(1.77, rel=0.01)  # mamf-finder's H100
    tr = simulate.simulate_probe(simulate.H200, "transformer", False, 75.0)
    thr = {m.key["precision"]: m for m in tr.measurements if m.metric == "throughput"}
    assert {"amp_bf16", "fp8"} <= set(thr) and tr.duration_s <= 75.0
    assert not any(n.startswith("fp8") for n in tr.notes)


def _run_of(*sims):
    from benchbench.core.results import ProbeResult, RunResult

    probes = [ProbeResult(name=sim.name, status="ok", resource="gpu_compute",
                          measurements=sim.measurements) for sim in sims]
    return RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=probes)


def test_eager_fp8_at_gpt2_width_cannot_judge_the_guide_claim():
    from benchbench.analysis import derive, guide

    run = _run_of(simulate.simulate_probe(simulate.H200, "matmul", False, 37.5),
                  simulate.simulate_probe(simulate.H200, "transformer", False, 75.0))
    claim = guide.transformer_engine(run)
    # The default run: gpt2-124m (d_model 768), eager. Eager float8 under a width of ~2048 is
    # slower than bf16 (pytorch/ao#685): the profile's 0.85x, so 1 / 0.85 - 1 = 18% more time.
    assert claim.measured.startswith("fp8 (torchao float8 training) takes 18% more step time "
                                     "against amp_bf16")
    assert "gpt2-124m, d_model 768, eager)" in claim.measured
    assert "the matmul alone: fp8 1.77x bf16" in claim.measured
    assert claim.check.startswith(
        "cannot judge the claim, because it was measured eager (torch.compile off: set "
        "transformer.compile=true) and the model's width, d_model 768, is under the 2048 "
        "where fp8's faster GEMMs outweigh its scaling")
    assert "holds" not in claim.check
    speedups = {(r["model"], r["ratio"]) for r in derive.precision_speedups(run)}
    assert ("transformer", "fp8/amp_bf16") in speedups


def test_a_compiled_wide_fp8_pair_judges_the_guide_claim():
    from benchbench.analysis import guide

    tr = simulate.simulate_probe(simulate.H200, "transformer", False, 75.0,
                                 overrides={"preset": "1.3b", "compile": True})
    claim = guide.transformer_engine(_run_of(tr))
    # Compiled at d_model 2048: the profile's 1.15x (torchao's published 1.1-1.25x), 13% saved.
    assert claim.measured.startswith("fp8 (torchao float8 training) saves 13% of the step "
                                     "time against amp_bf16")
    assert "1.3b, d_model 2048, compiled)" in claim.measured
    assert claim.check.startswith("does not hold here: 13% against the guide's 40%")


def _pair(fp8, bf16, **context):
    from benchbench.core.results import Measurement, ProbeResult, RunResult

    def m(precision, value):
        return Measurement(metric="throughput", key={"precision": precision, "preset": "x"},
                           value=value, unit="tokens/s", statistic="median", samples=[value],
                           higher_is_better=True, context=dict(context))

    pr = ProbeResult(name="transformer", status="ok", resource="gpu_compute",
                     measurements=[m("fp8", fp8), m("amp_bf16", bf16)])
    return RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=[pr])


def test_the_guide_claim_is_judged_only_where_fp8_can_pay():
    from benchbench.analysis import guide

    # Compiled and wide: judged either way.
    held = guide.transformer_engine(_pair(200.0, 100.0, d_model=4096, compile=True))
    assert held.check.startswith("holds here: 50% against the guide's 40%")
    # Each condition alone is enough to refuse, and is named.
    narrow = guide.transformer_engine(_pair(200.0, 100.0, d_model=1024, compile=True)).check
    assert narrow.startswith("cannot judge the claim, because the model's width, d_model "
                             "1024, is under the 2048") and "eager" not in narrow
    eager = guide.transformer_engine(_pair(200.0, 100.0, d_model=4096, compile=False)).check
    assert eager.startswith("cannot judge the claim, because it was measured eager") and \
        "d_model" not in eager
    unknown = guide.transformer_engine(_pair(200.0, 100.0, compile=True)).check
    assert unknown.startswith("cannot judge the claim, because the run did not record the "
                              "model's width")


# -- the simulator's fp8 step time: by width and compile -----------------------------------

def test_simulated_fp8_is_slower_eager_and_narrow_faster_compiled_and_wide():
    def ratio(**overrides):
        tr = simulate.simulate_probe(simulate.H200, "transformer", False, 75.0,
                                     overrides=overrides or None)
        thr = {m.key["precision"]: m.value for m in tr.measurements if m.metric == "throughput"}
        return thr["fp8"] / thr["amp_bf16"]

    assert ratio() == pytest.approx(0.85, rel=0.02)  # gpt2-124m, eager: pytorch/ao#685
    assert ratio(preset="1.3b", compile=True) == pytest.approx(1.15, rel=0.02)


# -- scaled_mm's rules: the probe's operands, checked by the simulator ----------------------

def _meta(n):
    return torch.empty(n, n, device="meta", dtype=torch.bfloat16)


def test_the_probes_fp8_operands_keep_cudas_rule_and_a_broken_layout_is_refused():
    from benchbench.engine.sim_probes import scaled_mm_rule

    a, b = matmul.fp8_operands(_meta(4096), _meta(4096))
    scaled_mm_rule(a, b)  # a row-major, b column-major, e4m3, multiples of 16
    assert b.stride() == (1, 4096) and a.dtype == b.dtype == torch.float8_e4m3fn
    with pytest.raises(RuntimeError, match=r"mat2 must be col_major, got stride \(4096, 1\)"):
        scaled_mm_rule(a, b.contiguous())
    with pytest.raises(RuntimeError, match="Expected self.size.1. to be divisible by 16"):
        scaled_mm_rule(*matmul.fp8_operands(_meta(1000), _meta(1000)))


def test_fp8_sizes_that_are_not_multiples_of_16_are_skipped_by_the_probe():
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5,
                                 overrides={"sizes": (1000, 4096), "dtypes": ("bf16", "fp8")})
    sizes = {(m.key["dtype"], m.key["size"]) for m in mm.measurements if m.metric == "flops"}
    assert sizes == {("bf16", 1000), ("bf16", 4096), ("fp8", 4096)}
    assert mm.notes == ["fp8 n=1000 on cuda:0 skipped, because scaled_mm takes fp8 sizes in "
                        "multiples of 16 only (cuBLASLt's fp8 GEMM), and 1000 is not one"]


def test_a_probe_that_lays_fp8_out_row_major_fails_in_the_simulator(monkeypatch):
    e4m3 = torch.float8_e4m3fn
    monkeypatch.setattr(matmul, "fp8_operands", lambda a, b: (a.to(e4m3), b.to(e4m3)))
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5,
                                 overrides={"sizes": (4096,), "dtypes": ("bf16", "fp8")})
    assert {m.key["dtype"] for m in mm.measurements} == {"bf16"}
    assert mm.notes == ["fp8 n=4096 on cuda:0 skipped, because RuntimeError: mat2 must be "
                        "col_major, got stride (4096, 1)"]


# -- the fast-accumulation path ------------------------------------------------------------

def _fp8_call(monkeypatch, scaled_mm=None):
    """The probe's fp8 matmul at n=32 on this CPU (torch runs scaled_mm here too), through
    `scaled_mm` in place of torch.nn.functional's where one is given."""
    if scaled_mm is not None:
        monkeypatch.setattr(torch.nn.functional, "scaled_mm", scaled_mm)
    a, b = matmul.fp8_operands(torch.randn(32, 32), torch.randn(32, 32))
    return matmul.fp8_mm(a, b, torch.ones(()))()


def test_the_fp8_matmul_runs_the_fast_accumulation_path_and_records_it(monkeypatch):
    seen = []
    public = getattr(torch.nn.functional, "scaled_mm", None)
    if public is None:  # a torch before the public API: its torch._scaled_mm takes the flag
        real = torch._scaled_mm

        def recorder(*args, use_fast_accum=False, **kwargs):
            seen.append(use_fast_accum)
            return real(*args, use_fast_accum=use_fast_accum, **kwargs)

        monkeypatch.setattr(torch, "_scaled_mm", recorder)
        out = _fp8_call(monkeypatch)
    else:
        def recorder(*args, use_fast_accum=False, **kwargs):
            seen.append(use_fast_accum)
            return public(*args, use_fast_accum=use_fast_accum, **kwargs)

        out = _fp8_call(monkeypatch, recorder)
    assert seen == [True] and out.dtype == torch.bfloat16
    assert matmul.fp8_context() == {"inputs": "e4m3", "output": "bf16", "scaling": "tensor-wise",
                                    "fast_accum": True}


def test_a_torch_whose_scaled_mm_has_no_fast_accum_calls_without_it_and_records_that(
        monkeypatch):
    def older(a, b, scale_a, recipe_a, scale_b, recipe_b, output_dtype=None):
        return torch.mm(a.float(), b.float()).to(output_dtype)

    if not hasattr(torch.nn.functional, "ScalingType"):
        pytest.skip("this torch has no public scaled_mm to stand in for")
    assert _fp8_call(monkeypatch, older).dtype == torch.bfloat16  # no TypeError: no flag given
    assert matmul.fp8_fast_accum() is False and matmul.fp8_context()["fast_accum"] is False


def test_the_simulated_fp8_rows_ran_the_fast_path_through_cudas_layout_rule():
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5,
                                 overrides={"sizes": (4096,), "dtypes": ("bf16", "fp8")})
    context = {m.key["dtype"]: m.context for m in mm.measurements if m.metric == "flops"}
    assert context["fp8"]["fast_accum"] is True and "fast_accum" not in context["bf16"]
    assert mm.notes == []


# -- a failure stays local ------------------------------------------------------------------

def test_an_fp8_matmul_that_raises_is_a_skipped_row_and_bf16_stays(monkeypatch):
    def broken(a, b, scale):
        raise TypeError("scaled_mm(): argument 'scale_recipe_a' must be ScalingType")

    monkeypatch.setattr(matmul, "fp8_mm", broken)
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5,
                                 overrides={"sizes": (4096, 8192), "dtypes": ("bf16", "fp8")})
    peaks = {m.key["dtype"] for m in mm.measurements if m.metric == "peak_flops"}
    assert peaks == {"bf16"}
    assert mm.notes == [f"fp8 n={n} on cuda:0 skipped, because TypeError: scaled_mm(): argument "
                        "'scale_recipe_a' must be ScalingType" for n in (4096, 8192)]


@pytest.mark.parametrize("batch_size", [16, "auto"])
def test_an_fp8_build_that_raises_is_a_skipped_precision_and_amp_bf16_stays(batch_size):
    from benchbench.engine import sim_probes
    from benchbench.engine.catalog import default_registry
    from benchbench.engine.sim_device import FakeClock
    from benchbench.workloads.transformer import run as transformer

    cfg = default_registry().get("transformer").resolve("cuda", False, H200,
                                                        {"batch_size": batch_size})
    ctx = simulate.context(simulate.H200, False, 75.0, cfg, FakeClock())
    job = transformer.job_for(cfg, "cuda:0", {})

    def build(batch, precision):
        if precision.fp8:
            raise TypeError("convert_to_float8_training() got an unexpected keyword argument")
        return sim_probes._steps(ctx, simulate.H200, 0.05 * batch / 16, 1.0)

    out, notes = _training.run_training(ctx, job, build)
    measured = {m.key["precision"] for m in out if m.metric == "throughput"}
    # amp_bf16 ran before fp8, the others after it (the simulated batch search climbs to the
    # cap of 1024, which leaves the budget to amp_bf16 alone).
    assert measured == ({"amp_bf16"} if batch_size == "auto" else
                        {"amp_bf16", "amp_fp16", "tf32", "fp32"})
    assert "fp8 on cuda:0 skipped, because TypeError: convert_to_float8_training() got an " \
           "unexpected keyword argument" in notes


def test_torchaos_filter_leaves_the_head_and_widths_not_multiples_of_16_in_bf16():
    from benchbench.workloads.models.gpt import GPT
    from benchbench.workloads.transformer.run import float8_eligible

    def converted(d_model):
        model = GPT(1, d_model, 4, 256, 32)
        return sorted(fqn for fqn, mod in model.named_modules()
                      if isinstance(mod, torch.nn.Linear) and float8_eligible(mod, fqn))

    wide = converted(64)
    assert wide and "lm_head" not in wide
    assert converted(72) == []  # 72 = 4 x 18: no Linear of it is a multiple of 16 both ways
