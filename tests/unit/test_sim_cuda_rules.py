"""The simulated device refuses what real CUDA refuses, and runs what CUDA runs by default, so
that a probe which breaks one of CUDA's rules fails here rather than on the one lent GPU run
(engine/sim_device.py's SimMeter: each rule has its source beside it)."""

import pytest

pytest.importorskip("torch")

from benchbench.engine import simulate  # noqa: E402
from benchbench.engine.sim_device import FakeClock, SimMeter, conv_precision  # noqa: E402
from benchbench.engine.simulate import H200  # noqa: E402


def test_memory_statistics_before_initialisation_raise():
    meter = SimMeter(FakeClock())
    for read in (meter.reset_peak_memory, meter.peak_memory, meter.peak_reserved):
        with pytest.raises(RuntimeError, match="did you call init"):
            read("cuda:0")
    meter.init("cuda:0")
    meter.reset_peak_memory("cuda:0")
    assert meter.peak_memory("cuda:0") is None


def test_asking_the_device_name_initialises_as_cuda_does():
    meter = SimMeter(FakeClock())
    meter.device_name("cuda:0")
    meter.reset_peak_memory("cuda:0")


@pytest.mark.parametrize("name", ["resnet50", "transformer"])
def test_the_training_probes_initialise_before_they_read_a_peak(name):
    """run_training resets the allocator's peak before each attempt: it must init first."""
    sim = simulate.simulate_probe(H200, name, True, 60.0)
    assert any(m.metric == "throughput" for m in sim.measurements), sim.notes


def test_cudnn_convolutions_run_tf32_unless_told_otherwise():
    meter = SimMeter(FakeClock())
    assert conv_precision(meter, "fp32") == "tf32"  # cuDNN's default: allow_tf32 = True
    assert conv_precision(meter, "bf16") == "bf16"
    meter.set_tf32(False)
    assert conv_precision(meter, "fp32") == "fp32"
    meter.set_tf32(True)
    assert conv_precision(meter, "fp32") == "tf32"


def test_inference_fp32_is_true_fp32_not_cudnn_tf32():
    """inference sets TF32 off for its fp32 figures: otherwise its "fp32" ResNet50 reads at
    TF32's speed (2x on the H200 profile; 2-3x on A100, H100, L4, RTX 4090)."""
    sim = simulate.simulate_probe(H200, "inference", False, 60.0)
    (fp32,) = [m for m in sim.measurements if m.metric == "peak_offline_throughput"
               and m.key["precision"] == "fp32"]
    true_fp32 = 1 / H200.resnet50_infer_s["fp32"]
    assert fp32.value <= true_fp32 * 1.01
    assert fp32.value >= true_fp32 * 0.5  # launch overhead at small batches, not TF32


def test_inference_lets_cudnn_autotune_its_fixed_shapes():
    from benchbench.engine.sim_device import context
    from benchbench.workloads.inference import run as inference

    clock = FakeClock()
    spec = simulate.default_registry().get("inference")
    cfg = spec.resolve("cuda", True, simulate.facts_for(H200), None)
    ctx = context(H200, True, 30.0, cfg, clock)
    from benchbench.engine.sim_models import _SimModels

    inference.measure(ctx, cfg, _SimModels(ctx, H200, cfg.preset), "cuda:0", ["bf16"], [])
    assert ctx.meter.cudnn_benchmark("cuda:0") and ctx.meter.tf32_set is False


def test_resnet50_fp32_trains_in_true_fp32():
    """run_training switches TF32 off for fp32: the simulated fp32 step is the profile's."""
    sim = simulate.simulate_probe(H200, "resnet50", False, 200.0,
                                  overrides={"precisions": ("fp32", "tf32")})
    step = {m.key["precision"]: m.value for m in sim.measurements if m.metric == "step_time"}
    assert step["fp32"] == pytest.approx(H200.resnet50_step_s["fp32"], rel=0.05)
    assert step["tf32"] == pytest.approx(H200.resnet50_step_s["tf32"], rel=0.05)
