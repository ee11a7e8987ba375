"""The workload probes, run in-process on tiny sizes (real torch on the CPU; GPU where present)."""

import dataclasses

import pytest
from helpers import resolved

torch = pytest.importorskip("torch")

from benchbench.core.results import UNITS  # noqa: E402
from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.machine.environment import torch_facts  # noqa: E402
from benchbench.probes._devices import random_bytes  # noqa: E402
from benchbench.probes.api import ProbeContext, ProbeSkipped  # noqa: E402
from benchbench.probes.host_device_copy import run as host_device_copy  # noqa: E402
from benchbench.probes.matmul import run as matmul  # noqa: E402
from benchbench.probes.memory_bandwidth import run as memory_bandwidth  # noqa: E402
from benchbench.probes.meter import tf32_enabled  # noqa: E402


def ctx(device="cpu", budget=5.0, facts=None):
    seen = []
    c = ProbeContext(device=device, policy=RepeatPolicy(min_repeats=3, max_repeats=6, target_cv=0.5,
                                         warmup_s=0.0),
                     budget=Budget(budget), facts=facts or torch_facts(),
                     progress=lambda *a: seen.append(a))
    return c, seen


def test_matmul_cpu_measures_flops_per_dtype_and_size():
    c, seen = ctx()
    cfg = resolved("matmul", sizes=(64, 128), dtypes=("fp32", "bf16", "tf32"), min_sample_s=0.005)
    out = matmul.run(c, cfg)
    flops = [m for m in out.measurements if m.metric == "flops"]
    assert {(m.key["dtype"], m.key["size"]) for m in flops} == {
        ("fp32", 64), ("fp32", 128), ("bf16", 64), ("bf16", 128)}
    for m in flops:
        assert m.unit == "FLOP/s" and m.statistic == "median" and len(m.samples) >= 3
        assert m.value > 1e6  # even a slow CPU does a MFLOP/s
        assert m.context["calls_per_sample"] >= 1
    peaks = [m for m in out.measurements if m.metric == "peak_flops"]
    assert len(peaks) == 2
    for p in peaks:
        assert p.statistic == "max" and p.value == max(p.samples)
    assert any("tf32 on cpu skipped, because" in n for n in out.notes)
    assert seen and seen[-1][0] == "done"
    assert not tf32_enabled()


def test_matmul_drops_sizes_that_cannot_fit_the_budget():
    c, _ = ctx(budget=0.3)
    out = matmul.run(c, resolved("matmul", sizes=(32, 4096), dtypes=("bf16",), min_sample_s=0.001))
    assert [m.key["size"] for m in out.measurements if m.metric == "flops"] == [32]
    assert any("n=4096" in n and "beyond its time budget" in n for n in out.notes)


def test_memory_bandwidth_host_buffer_is_4x_llc():
    facts = {**torch_facts(), "host_llc_bytes": 4 << 20}  # pretend a 4 MiB LLC: fast test
    c, _ = ctx(facts=facts)
    out = memory_bandwidth.run(c, resolved("memory_bandwidth", facts=facts, min_sample_s=0.005))
    (m,) = out.measurements
    assert m.key == {"memory": "host", "size_bytes": 256 << 20}  # quick default, >= 4x LLC
    assert m.unit == "B/s" and m.value > 1e8
    assert m.context["resource"] == "host_memory"


def test_memory_bandwidth_warns_when_buffer_is_too_small():
    facts = {**torch_facts(), "host_llc_bytes": 32 << 20}
    c, _ = ctx(facts=facts)
    out = memory_bandwidth.run(c, resolved("memory_bandwidth", host_size_bytes=8 << 20,
                                                         min_sample_s=0.005))
    assert any("under 4x" in n for n in out.notes)


def test_random_bytes_are_random_and_sized():
    buf = random_bytes((16 << 20) + 123, "cpu")
    assert buf.numel() == (16 << 20) + 123
    assert buf.float().std() > 50  # uniform bytes have std ~74; zeros would be 0
    assert buf[-123:].float().std() > 0


def test_host_device_copy_skips_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    c, _ = ctx(facts={**torch_facts(), "cuda_device_count": 0})
    with pytest.raises(ProbeSkipped, match="no CUDA GPU"):
        host_device_copy.run(c, resolved("host_device_copy", sizes=(1 << 20,)))


def test_units_are_closed():
    assert "GB/s" not in UNITS and "B/s" in UNITS


def gpu_configs(facts):
    """The GPU tests' configs, resolved for a CUDA device with these facts: the GPU's own, or
    the simulator's (test_gpu_tests_plan_on_a_simulated_h200). A config resolved for the CPU
    and run on a GPU lacks the GPU's defaults (a GPU buffer of no size)."""
    return {
        "matmul": resolved("matmul", device="cuda", facts=facts, sizes=(2048,),
                           dtypes=("fp32", "tf32"), devices=(0,), min_sample_s=0.01),
        "memory_bandwidth": resolved("memory_bandwidth", device="cuda", facts=facts,
                                     devices=(0,), min_sample_s=0.01),
        "host_device_copy": resolved("host_device_copy", device="cuda", facts=facts,
                                     sizes=(1 << 20, 64 << 20), devices=(0,), min_sample_s=0.01),
    }


@pytest.mark.gpu
def test_matmul_gpu_fp32_is_not_tf32():
    c, _ = ctx(device="cuda")
    out = matmul.run(c, gpu_configs(c.facts)["matmul"])
    by = {m.key["dtype"]: m for m in out.measurements if m.metric == "flops"}
    assert by["fp32"].context["tf32_enabled"] is False
    assert by["tf32"].context["tf32_enabled"] is True


@pytest.mark.gpu
def test_gpu_memory_and_host_device_copy():
    c, _ = ctx(device="cuda", budget=20)
    cfgs = gpu_configs(c.facts)
    out = memory_bandwidth.run(c, cfgs["memory_bandwidth"])
    assert {m.key["memory"] for m in out.measurements} == {"cuda:0", "host"}
    out = host_device_copy.run(c, cfgs["host_device_copy"])
    peaks = [m for m in out.measurements if m.metric == "peak_bandwidth"]
    assert len(peaks) == 4 and all(p.value > 1e8 for p in peaks)


def test_gpu_tests_plan_on_a_simulated_h200():
    """The GPU tests' set-up against the simulator's device facts, on this CPU: what they
    would plan on the GPU box is complete, not sized for a CPU."""
    from benchbench.engine import simulate

    facts = simulate.facts_for(simulate.H200)
    cfgs = gpu_configs(facts)
    c, _ = ctx(device="cuda", facts=facts)
    items, notes = memory_bandwidth.plan(c, cfgs["memory_bandwidth"])
    assert [i.device for i in items] == ["cuda:0", "cpu"] and notes == []
    assert all(i.size >= 4 * i.cache for i in items)
    assert host_device_copy.plan([0], cfgs["host_device_copy"])
    assert sorted(matmul.usable_dtypes("cuda:0", cfgs["matmul"].dtypes, [], facts)) == [
        "fp32", "tf32"]


def test_a_cpu_config_on_a_gpu_is_an_error_not_a_zero_byte_plan():
    from benchbench.engine import simulate

    facts = simulate.facts_for(simulate.H200)
    c, _ = ctx(device="cuda", facts=facts)
    with pytest.raises(RuntimeError, match="gpu_size_bytes was left at auto"):
        memory_bandwidth.plan(c, resolved("memory_bandwidth", device="cpu", facts=facts))


def test_worker_runs_a_probe_job_and_reports_skips():
    from benchbench.engine.worker import ProbeJob, run_probe

    facts = torch_facts()
    job = ProbeJob(name="matmul", run="benchbench.probes.matmul.run", device="cpu",
                   min_repeats=2, budget_s=5.0, facts=facts,
                   config=resolved("matmul", sizes=(32,), dtypes=("fp32",), warmup_steps=3,
                                       warmup_s=0.0, min_sample_s=0.001))
    body = run_probe(job, lambda *a: None)
    assert body["status"] == "ok" and body["params"]["sizes"] == [32]
    (flops, peak, sustained) = body["measurements"]  # the best size then runs sustained
    assert sustained["metric"] == "sustained_flops"
    assert flops["context"]["warmup_runs"] == 3  # warm-up by steps
    assert peak["statistic"] == "max"
    if not torch.cuda.is_available():
        skip = run_probe(dataclasses.replace(
            job, name="host_device_copy", run="benchbench.probes.host_device_copy.run",
            config=resolved("host_device_copy", sizes=(1 << 20,)),
            facts={**facts, "cuda_device_count": 0}), lambda *a: None)
        assert skip["status"] == "skipped" and "no CUDA GPU" in skip["reason"]


class _Cycle:
    """Garbage that only a collection frees: it refers to itself."""

    def __init__(self):
        self.me = self


def test_free_memory_in_a_frozen_block_collects_what_the_block_made():
    import gc
    import weakref

    from benchbench.probes.meter import free_memory, long_lived_frozen

    assert gc.get_freeze_count() == 0
    gc.disable()  # no collection of its own between the lines below
    try:
        before = _Cycle()
        made_before = weakref.ref(before)
        del before
        with long_lived_frozen():
            frozen = gc.get_freeze_count()
            assert frozen > 10_000  # pytest's and torch's objects, and the cycle above
            with long_lived_frozen():  # nested: the outer block's objects stay frozen
                pass
            assert gc.get_freeze_count() >= frozen
            inner = _Cycle()
            made_inside = weakref.ref(inner)
            del inner
            free_memory()
            assert made_inside() is None  # what the block made is collected
            assert made_before() is not None  # what existed before is not looked at
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert made_before() is None  # and is collected again after the block
    finally:
        gc.enable()


def test_a_probe_runs_with_its_imports_frozen():
    """A full collection in a probe's worker looks at what the probe made, not at the 340,000
    objects of torch's and torchvision's imports: free_memory takes milliseconds."""
    import gc

    from benchbench.engine.worker import ProbeJob, run_probe

    job = ProbeJob(name="gc", run="gc_probe", device="cpu", min_repeats=1, budget_s=5.0,
                   facts={}, config=resolved("matmul"))
    body = run_probe(job, lambda *a: None)
    assert body["status"] == "skipped"
    assert int(body["reason"].split()[0]) > 10_000, body["reason"]
    assert gc.get_freeze_count() == 0  # given back when the probe ended


def test_pre_ampere_gpus_skip_tf32_and_bf16(monkeypatch):
    from benchbench.probes._devices import usable_on

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev: (7, 0))  # a V100
    notes = []
    got = usable_on("cuda:0", ("fp32", "tf32", "amp_bf16", "amp_fp16"), (), ("tf32", "amp_bf16"),
                    "n/a", notes)
    assert got == ["fp32", "amp_fp16"]
    assert notes == [f"{m} on cuda:0 skipped, because compute capability 7.0 has no TF32/bf16 "
                     "tensor cores" for m in ("tf32", "amp_bf16")]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev: (9, 0))  # H100/H200
    assert usable_on("cuda:0", ("fp32", "bf16"), (), ("bf16",), "n/a", []) == ["fp32", "bf16"]
