"""What a first GPU run would reveal, fixed and proven without a GPU: recorded NVML answers,
fake timers and the simulator stand in for the hardware."""

import re
from pathlib import Path

import pytest
from helpers import resolved

torch = pytest.importorskip("torch")

import fake_nvml  # noqa: E402
from fake_nvml import FakeNvml  # noqa: E402

from benchbench.analysis import capacities  # noqa: E402
from benchbench.core import gpus  # noqa: E402
from benchbench.core.results import Measurement, ProbeResult, RunResult  # noqa: E402
from benchbench.engine import sim_probes, simulate  # noqa: E402
from benchbench.machine import (  # noqa: E402
    environment,
    topology,  # noqa: E402
)
from benchbench.probes._devices import is_oom  # noqa: E402
from benchbench.probes.host_device_copy import run as host_device_copy  # noqa: E402
from benchbench.probes.host_device_copy.config import HostDeviceCopyConfig  # noqa: E402
from benchbench.workloads import _training  # noqa: E402
from benchbench.workloads._config import best_amp  # noqa: E402

G = 1e9
TESTS = Path(__file__).parents[1]


# --- 1. the AMP precisions first, and only what fits ----------------------------------------

def test_gpu_measures_amp_first_cpu_keeps_its_order():
    order = _training.precision_order
    assert order("cuda:0", ["fp32", "tf32", "amp_bf16", "amp_fp16"]) == [
        "amp_bf16", "amp_fp16", "tf32", "fp32"]
    assert order("cuda:0", ["fp32", "amp_fp16"]) == ["amp_fp16", "fp32"]  # V100, T4: no bf16
    assert order("cpu", ["fp32", "amp_bf16"]) == ["fp32", "amp_bf16"]
    v100 = {"gpus": [{"capability": "7.0"}]}
    h200 = {"gpus": [{"capability": "9.0"}]}
    assert best_amp("cuda", h200) == "amp_bf16"
    assert best_amp("cuda", v100) == "amp_fp16"
    assert best_amp("cpu", h200) == "fp32"
    # the pipeline and ddp_scaling train in it: resolved once, in their configs
    assert resolved("pipeline", "cuda", facts=v100).precisions == ("amp_fp16",)
    assert resolved("ddp_scaling", "cuda", facts=h200).precision == "amp_bf16"


def test_a_precision_that_cannot_finish_is_skipped_before_it_is_built():
    """An H200's quick budget: after the AMP precisions, fp32's start (cuDNN autotuning) no
    longer fits; it is not built, and its note says why."""
    sim = simulate.simulate_probe(simulate.H200, "resnet50", quick=True, budget_s=12.0)
    measured = [m.key["precision"] for m in sim.measurements if m.metric == "throughput"]
    assert measured[0] == "amp_bf16"
    assert "fp32" not in measured
    (note,) = [n for n in sim.notes if n.startswith("fp32")]
    # What it would need is said beside what was left, so the two compare.
    got = re.match(r"fp32 skipped, because ([\d.]+) s of the time budget were left, under the "
                   r"~([\d.]+) s its start \(([\d.]+) s, as the precisions before it started\) "
                   r"and 3 steps at their slowest pace would take$", note)
    assert got and float(got.group(1)) < float(got.group(2)), note
    assert float(got.group(3)) < float(got.group(2))
    assert sim.duration_s <= 12.0


def test_warm_up_stops_at_half_the_share():
    """Ten warm-up steps of 1 s against a 4 s share: the warm-up gives way to timed steps."""
    clock = simulate.FakeClock()
    from benchbench.core.config import ProbeConfig

    ctx = simulate.context(simulate.H200, False, 100.0,
                           ProbeConfig(warmup_steps=10, warmup_s=0.0), clock)
    step = sim_probes._steps(ctx, simulate.H200, 1.0, 0.0)
    warm = _training.warm_up(step, ctx, "cuda:0", share_s=4.0)
    assert warm.steps == 2 and warm.step_s == pytest.approx(1.0)


# --- 3. host_device_copy: one sweep, the others' largest pinned copy ---------------------------

def test_copy_plan_sweeps_the_first_gpu_only():
    cfg = HostDeviceCopyConfig(sizes=(1 << 20, 1 << 30))
    items = host_device_copy.plan(list(range(8)), cfg)
    first = [i for i in items if i.device == "cuda:0"]
    assert len(first) == 2 * 2 * 2  # directions x memories x sizes
    others = [i for i in items if i.device not in ("cuda:0", "all")]
    assert len(others) == 7 * 2 and {(i.memory, i.size) for i in others} == {
        ("pinned", 1 << 30)}
    assert [(i.device, i.gpus) for i in items[-2:]] == [("all", 8), ("all", 8)]


def test_link_is_read_at_its_highest_during_the_burst():
    """The link trains up from Gen1 within a few readings: the highest reading counts."""
    readings = iter([1, 3, 5, 5, 5, 5, 5, 5])
    busy = iter([True] * 3 + [False])
    link = host_device_copy.max_link(
        lambda: {"pcie_gen_current": next(readings), "pcie_width_current": 16,
                 "pcie_gen_max": 5, "pcie_width_max": 16},
        lambda: next(busy), pause=lambda: None)
    assert link["pcie_gen_current"] == 5 and link["pcie_link_readings"] == 4


# --- 4. GPUs compared at one size only ---------------------------------------------------------

def _peak(dev, value, size):
    return Measurement(metric="peak_flops", key={"device": dev, "dtype": "bf16"}, value=value,
                       unit="FLOP/s", statistic="max", samples=[value], higher_is_better=True,
                       context={"best_size": size})


def test_gpus_at_different_sizes_are_not_held_against_each_other():
    from benchbench.analysis import derive as analysis

    run = RunResult(tool={}, started_at="t", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="matmul", status="ok", resource="gpu_compute", measurements=[
            _peak("cuda:0", 780e12, 8192), _peak("cuda:1", 775e12, 8192),
            _peak("cuda:2", 600e12, 2048)])])
    rows = analysis.gpu_spread(run, "matmul", "peak_flops", "dtype", same="best_size")
    (row,) = [r for r in rows if r["best_size"] == 8192]
    assert row["gpus"] == 2 and not row["warn"]
    assert all(r["best_size"] != 2048 for r in rows)  # alone at its size: not compared


# --- 5. the run's own ranks are not other processes --------------------------------------------

def test_own_ranks_and_their_workers_are_not_other_processes():
    parents = {501: 500, 502: 500, 601: 501, 700: 1}  # 500 torchrun; 501/502 ranks; 601 worker
    own = {501, 502}
    assert environment.is_own(601, own, parents.get)
    assert environment.is_own(502, own, parents.get)
    assert not environment.is_own(700, own, parents.get)
    nvml = FakeNvml()
    foreign = fake_nvml.GPUS[1]["procs"][0].pid
    info, _ = environment.gpu_snapshot(nvml, own={foreign})
    assert all(g["other_processes"] == [] for g in info["gpus"])
    info, _ = environment.gpu_snapshot(FakeNvml(), own={1})
    assert info["gpus"][1]["other_processes"][0]["pid"] == foreign


# --- 6. NVLink rates from the architecture -----------------------------------------------------

def test_nvlink_rate_comes_from_the_architecture_not_the_version_code():
    # A Hopper whose NVML reports NVLink "5.0" (code 7) still runs 25 GB/s links.
    nvml = FakeNvml(gpus=[{**g, "nvlink_version": 7} for g in fake_nvml.GPUS])
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(2)]
    topo = topology.gpu_topology(nvml, handles)
    g0 = topo["gpus"][0]
    assert g0["nvlink_version_code"] == 7 and g0["nvlink_version"] == "5.0"
    assert g0["nvlink_link_rate"] == 25 * G
    assert g0["nvlink_per_direction"] == 18 * 25 * G  # 450 GB/s, not 900
    assert "compute capability 9.0" in g0["nvlink_rate_basis"]
    assert topology.nvlink_link_rate("3.1", "NVIDIA B200", "10.0") == 50 * G
    assert topology.nvlink_link_rate("4.0", None, None) == 25 * G  # no capability: the code


# --- 7. the run's GPUs, not NVML's ----------------------------------------------------------

def _eight_gpus_one_visible() -> dict:
    records = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:04d}",
                "memory_total": 80 << 30} for i in range(8)]
    gpus.annotate(records, [{"index": 0, "uuid": "0003"}])  # CUDA_VISIBLE_DEVICES=3
    return {"gpus": records, "torch": {"cuda_device_count": 1}}


def test_cuda_visible_devices_counts_the_gpus_torch_sees():
    env = _eight_gpus_one_visible()
    assert [g["torch_index"] for g in env["gpus"]] == [None, None, None, 0, None, None, None,
                                                       None]
    assert gpus.gpu_count(env) == 1 and gpus.gpu_for(env, "cuda:0")["index"] == 3
    thr = Measurement(metric="throughput", key={"device": "cuda:0", "precision": "amp_bf16",
                                                "image_size": 224, "batch_size": 256},
                      value=3000.0, unit="samples/s", statistic="total_over_time",
                      samples=[3000.0], higher_is_better=True, context={"batch": 256})
    run = RunResult(
        tool={},
        started_at="t",
        environment=env,
        config={"device_resolved": "cuda"},
        argv=[],
        probes=[
            ProbeResult(name="resnet50", status="ok", resource="gpu_compute", measurements=[thr])
        ],
    )
    s = capacities.setting(run, "resnet50", 110e3)
    assert s.devices == 1
    assert capacities.compute(run, s).value == 3000.0  # not 8x


def test_doctor_reads_the_loaded_link_of_the_gpu_that_ran():
    from benchbench.doctor.gpu_rules import check_pcie

    env = _eight_gpus_one_visible()
    for g in env["gpus"]:
        g.update(pcie_gen_current=1, pcie_width_current=16, pcie_gen_max=5, pcie_width_max=16)
    copy = Measurement(metric="peak_bandwidth", key={"device": "cuda:0", "direction": "h2d",
                                                     "memory": "pinned"},
                       value=53e9, unit="B/s", statistic="max", samples=[53e9],
                       higher_is_better=True,
                       context={"pcie_gen_current": 5, "pcie_width_current": 16,
                                "pcie_gen_max": 5, "pcie_width_max": 16})
    run = RunResult(
        tool={},
        started_at="t",
        environment=env,
        config={},
        argv=[],
        probes=[
            ProbeResult(
                name="host_device_copy",
                status="ok",
                resource="host_device_link",
                measurements=[copy],
            )
        ],
    )
    check = check_pcie(env, run)
    assert "GPU 3: Gen5 x16 of Gen5 x16 under load" in check.measured
    assert "GPU 0: Gen1 x16 of Gen5 x16 at idle" in check.measured


def test_telemetry_samples_only_the_run_gpus_under_their_cuda_index():
    from benchbench.machine.telemetry import LiveSampler

    nvml = FakeNvml()
    s = LiveSampler(None, nvml, uuids=[fake_nvml.GPUS[1]["uuid"].removeprefix("GPU-")])
    s.open()
    assert list(s._handles) == ["0"] and s._handles["0"] is fake_nvml.GPUS[1]
    s.close()


# --- 9-12: smaller items ---------------------------------------------------------------------

def test_cublas_and_cudnn_allocation_failures_are_out_of_memory():
    assert is_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                               "`cublasCreate(handle)`"))
    assert is_oom(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))
    assert not is_oom(RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"))


class _Meter(simulate.SimMeter):
    """Records the allocator resets and answers a peak of the last attempt's batch."""

    def __init__(self, clock):
        super().__init__(clock)
        self.resets = 0

    def reset_peak_memory(self, device):
        self.resets += 1

    def peak_memory(self, device):
        return float(self.resets)


def test_peak_memory_is_reset_inside_each_attempt():
    clock = simulate.FakeClock()
    from benchbench.core.config import ProbeConfig

    ctx = simulate.context(simulate.H200, False, 100.0, ProbeConfig(warmup_steps=1), clock)
    ctx.meter = _Meter(clock)

    def build(batch, precision):
        if batch > 64:
            raise RuntimeError("CUDA out of memory")
        return sim_probes._steps(ctx, simulate.H200, 0.01, 0.0)

    job = _training.TrainingJob(dev="cuda:0", precisions=("amp_bf16",), batch_size=256,
                                default_batch=256, batch_cap=1024, steps=5,
                                work_per_sample=1.0, unit="samples/s",
                                key=lambda p: {"precision": p})
    out, _ = _training.run_training(ctx, job, build)
    peak = next(m for m in out if m.metric == "peak_memory")
    assert peak.context["oom_backoff"] == [256, 128]
    assert ctx.meter.resets == 3 and peak.value == 3.0  # one reset per attempt


def test_nccl_is_started_on_its_gpu_at_init(monkeypatch):
    from benchbench.probes import _ranks

    seen = {}
    monkeypatch.setattr(_ranks, "_connect", lambda spec: None)
    monkeypatch.setattr(_ranks.dist, "PrefixStore", lambda prefix, store: None)

    def init(backend, **kw):
        seen.update(kw, backend=backend)
        raise RuntimeError("stop here")

    monkeypatch.setattr(_ranks.dist, "init_process_group", init)
    for backend, device_id in (("nccl", torch.device("cpu")), ("gloo", None)):
        spec = _ranks.RankSpec(target="x:y", payload=None, rank=0, world_size=1, local_rank=0,
                               backend=backend, device="cpu", master_addr="127.0.0.1", port=1,
                               timeout_s=1.0, prefix="p")
        seen.clear()
        with pytest.raises(_ranks.RankFailure):
            _ranks.run_rank(spec)
        assert seen.get("device_id") == device_id


# --- 11. no silent CPU fallback ----------------------------------------------------------------

def test_auto_refuses_gpus_torch_cannot_use(monkeypatch, tmp_path, capsys):
    from benchbench import cli
    from benchbench.commands import run as commands

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(commands, "_facts", lambda isolator, stop: {
        "cuda_available": False, "cuda_device_count": 0, "gpus": [],
        "no_gpu_reason": "torch cannot use CUDA: The NVIDIA driver on your system is too old "
                         "(found version 12020)"})
    monkeypatch.setattr(environment, "nvml_gpu_names", lambda: ["NVIDIA H200"] * 8)
    out = tmp_path / "r"
    assert cli.main(["run", "--only", "matmul", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("benchbench: error: NVML sees 8 GPUs (NVIDIA H200) but torch "
                             "cannot use them: torch cannot use CUDA: The NVIDIA driver")
    assert "--device cpu" in err[0] and not out.exists()


# --- 8. tests that mean the CPU say so ---------------------------------------------------------

def _call_at(text: str, start: int, end: int) -> str:
    """The argument list begun before `start`: up to the bracket that closes it."""
    depth = 1
    for j in range(end, len(text)):
        depth += text[j] in "([{"
        depth -= text[j] in ")]}"
        if depth == 0:
            return text[start:j + 1]
    return text[start:]


def test_every_test_run_that_expects_the_cpu_names_it():
    """A test that starts `benchbench run` and expects it to finish must pass --device, or on a
    GPU machine it measures the GPU (auto picks CUDA there) and its CPU checks fail."""
    start = re.compile(r'"benchbench", "run",|bb\("run",')
    succeeds = re.compile(r"returncode == (0|130)|returncode for d in done\] == \[0, 0\]")
    offenders = []
    for path in TESTS.rglob("test_*.py"):
        text = path.read_text()
        for m in start.finditer(text):
            call = _call_at(text, m.start(), m.end())
            end = text.find("\ndef ", m.end())  # the rest of the test function
            if "--device" not in call and succeeds.search(text[m.end():end]):
                offenders.append(f"{path.name}: {call[:70]}")
    assert offenders == []
