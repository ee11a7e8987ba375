"""The pipeline probe: AU arithmetic, loader choice, and a tiny end-to-end run on the CPU."""

import warnings

import pytest
from helpers import render_md, resolved

from benchbench.analysis import derive as analysis
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.probes.dataset import DatasetConfig

KEY = {"device": "cuda:0", "precision": "amp_bf16", "image_size": 224, "batch_size": 256,
       "loader": "dali_gpu", "workers": 8}


def pipeline_run(total: float, compute: float) -> RunResult:
    def m(metric, value):
        return Measurement(
            metric=metric,
            key=KEY,
            value=value,
            unit="samples/s",
            statistic="total_over_time",
            samples=[value],
            higher_is_better=True,
        )

    return RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="pipeline", status="ok", resource="cpu_dataloading", measurements=[
            m("total_throughput", total), m("compute_throughput", compute)])])


def test_au_arithmetic_and_pass_mark():
    (row,) = analysis.accelerator_utilisation(pipeline_run(2250.0, 2500.0))
    assert row["au"] == pytest.approx(0.9) and row["passes"]
    (row,) = analysis.accelerator_utilisation(pipeline_run(1000.0, 2500.0))
    assert row["au"] == pytest.approx(0.4) and not row["passes"]
    text = render_md(pipeline_run(1000.0, 2500.0))
    assert "**40.0%**" in text and "the device waits for data" in text
    assert analysis.derive(pipeline_run(1.0, 2.0))["accelerator_utilisation"][0]["au"] == 0.5


def test_loader_choice():
    from benchbench.workloads.pipeline.run import choose_loader

    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "context": {}},
        {"metric": "best_throughput", "context": {"loader": "dali_cpu", "workers": 2}}]}}
    assert choose_loader(resolved("pipeline"), previous, 4)[:2] == ("dali_cpu", 2)
    assert choose_loader(resolved("pipeline", loader="torchvision", workers=1), previous,
                         4)[:2] == ("torchvision", 1)
    loader, workers, why = choose_loader(resolved("pipeline", loader="torchvision"), previous, 4)
    assert (loader, workers) == ("torchvision", 4)  # dali's best does not carry over
    assert why.startswith("default")
    assert choose_loader(resolved("pipeline"), {}, 4)[0] == "torchvision"


def test_pipeline_end_to_end_tiny(tmp_path):
    pytest.importorskip("torch")
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.machine.environment import torch_facts
    from benchbench.probes import dataset
    from benchbench.probes.api import ProbeContext, RunInputs
    from benchbench.workloads.pipeline import run as pipeline

    facts = dataset.ensure_synthetic(DatasetConfig(num_images=16, num_classes=2, mean_side=64),
                                     quick=True, root=tmp_path)
    ctx = ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=2, max_repeats=2, warmup_s=0.0,
                                           warmup_steps=1),
                       budget=Budget(60.0), facts=torch_facts(),
                       inputs=RunInputs(run_dir=str(tmp_path), data_dir=facts["path"],
                                        dataset=facts))
    cfg = resolved("pipeline", precisions=("fp32",), batch_size=4, image_size=32, steps=3,
                         channels_last=False, loader="torchvision", workers=0, warmup_steps=1)
    out = pipeline.run(ctx, cfg)
    by = {m.metric: m for m in out.measurements}
    assert set(by) == {"total_throughput", "compute_throughput", "data_wait", "compute_time"}
    total, compute = by["total_throughput"], by["compute_throughput"]
    assert len(total.samples) == 3 and total.key["loader"] == "torchvision"
    assert 0 < total.value and 0 < compute.value
    assert by["data_wait"].value > 0  # workers=0 decodes in the training loop
    assert out.resource in ("cpu_dataloading", "cpu_compute")


def _previous(step_s: float, loader_ips: float) -> dict:
    """What an earlier resnet50 and dataloader probe of the run left for the pipeline."""
    return {"resnet50": {"measurements": [
                {"metric": "step_time", "key": {"precision": "fp32", "image_size": 32},
                 "value": step_s, "context": {"batch": 4, "first_step_s": 0.5}}]},
            "dataloader": {"measurements": [
                {"metric": "throughput", "key": {"loader": "torchvision", "workers": 2},
                 "value": loader_ips, "context": {}},
                {"metric": "best_throughput", "key": {},
                 "value": loader_ips, "context": {"loader": "torchvision", "workers": 2}}]}}


def test_pipeline_that_cannot_afford_three_steps_says_so_before_starting_the_loader(
        monkeypatch):
    """Seen: a loader of 6000 px JPEGs spent 28 s of a quick run before the probe skipped.
    From the run's own figures it decides at once, and never starts the loader."""
    pytest.importorskip("torch")
    from helpers import cpu_facts

    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs
    from benchbench.workloads.pipeline import run as pipeline

    started = []
    monkeypatch.setattr(pipeline, "build_loader", lambda *a: started.append(a))
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1),
                       budget=Budget(20.0), facts=cpu_facts(),
                       inputs=RunInputs(data_dir="/nonexistent",
                                        previous=_previous(0.05, loader_ips=1.0)))
    cfg = resolved("pipeline", precisions=("fp32",), batch_size=4, image_size=32)
    with pytest.raises(ProbeSkipped, match=r"three timed steps of each half would take ~\d+.*"
                                           r"torchvision batch every ~4 s.*before starting"):
        pipeline.run(ctx, cfg)
    assert started == []
    # The same figures with a loader that keeps up: no objection.
    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], 4, 32, 5)
    assert pipeline.preflight(job, _previous(0.05, 400.0), "torchvision", 2, 20.0) is None
    assert pipeline.preflight(job, {}, "torchvision", 2, 0.1) is None  # nothing known yet


@pytest.mark.parametrize("loader, batches", [("torchvision", 9), ("dali_cpu", 7)])
def test_the_preflight_drains_what_the_loader_really_prefetched(loader, batches):
    """A batch a second and no step figure: the warm round, three timed steps and the drain of
    the loader's own prefetch (torchvision at 2 workers: 2 at once, 4 queued; DALI: 1 at once,
    its queue depth 2 plus the iterator's one). The drain was 2 batches for DALI before."""
    pytest.importorskip("torch")
    from benchbench.workloads.pipeline import run as pipeline

    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], 4, 32, 5)
    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "key": {"loader": loader, "workers": 2}, "value": 4.0}]}}
    slack = pipeline.PREFLIGHT_SLACK
    assert pipeline.preflight(job, previous, loader, 2, (batches + 0.01) / slack) is None
    assert pipeline.preflight(job, previous, loader, 2, (batches - 0.5) / slack) is not None


def test_the_preflight_lets_a_probe_start_a_little_over_its_soft_budget():
    """A budget is soft: three timed steps predicted at 1.15x the budget start (a quick run
    on 2 cores whose ResNet50 step ran 15% slow skipped the probe before); at twice it they
    do not, and the reason says by how much."""
    pytest.importorskip("torch")
    from benchbench.workloads.pipeline import run as pipeline

    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], 4, 32, 5)
    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "key": {"loader": "torchvision", "workers": 2},
         "value": 4.0}]}}
    need = 9.0  # a batch a second: the warm round, three timed steps and the drain
    assert pipeline.preflight(job, previous, "torchvision", 2, need / 1.15) is None
    why = pipeline.preflight(job, previous, "torchvision", 2, need / 2)
    assert why is not None and "by more than 1.5x; decided before starting the loader" in why


def _measure_emulated(budget_s, batch, seconds_per_image, workers, step_s, first_step_s=None):
    """The pipeline's two halves, 20 timed steps wanted, on an emulated loader (`workers`
    forked workers, each image costing `seconds_per_image`) and a step of `step_s` (the first
    `first_step_s`, when given)."""
    from helpers import cpu_facts

    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext
    from benchbench.probes.emulated import SleepTrainer, sleep_loader
    from benchbench.workloads.pipeline import run as pipeline

    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1,
                                                         warmup_s=0.0, warmup_steps=1),
                       budget=Budget(budget_s), facts=cpu_facts())
    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], batch, 32, 20)
    with warnings.catch_warnings():  # more sleeping workers than cores, on purpose
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        return pipeline.measure(ctx, job,
                                lambda: sleep_loader(seconds_per_image, batch, workers),
                                lambda: SleepTrainer(step_s, first_step_s))


def test_pipeline_that_ran_warm_steps_reports_few_of_them_rather_than_none():
    pytest.importorskip("torch")
    from benchbench.workloads.pipeline import run as pipeline

    # A 0.3 s step and 1 s of budget: no half affords its 20 steps, or even three.
    halves = _measure_emulated(1.0, 2, 0.001, 0, 0.3)
    assert len(halves.walls) == len(halves.compute_times) == pipeline.FEW_STEPS
    assert halves.context["few_steps"]
    assert any(n.startswith("few steps: 3 timed on loader batches") for n in halves.notes)
    by = {m.metric: m for m in pipeline.measurements_of(halves, {}, 2, halves.context)}
    assert len(by["total_throughput"].samples) == 3  # the spread is kept
    assert by["compute_throughput"].value == pytest.approx(2 / 0.3, rel=0.1)


def test_the_real_half_times_at_least_one_round_of_the_workers():
    """Workers that start together deliver their batches together: 3 timed steps of 16
    workers timed the burst of ready batches (AU 0.93) in one H200 run and a wait in the next
    (0.54). The plan rounds up to a whole round even when the share affords fewer."""
    from benchbench.workloads.pipeline import run as pipeline

    assert pipeline._plan(0.1, 20, 0.0, 16) == (16, True)
    assert pipeline._plan(0.1, 20, 0.5, 16) == (16, False)
    assert pipeline._plan(0.1, 20, 10.0, 16) == (32, False)  # 20 wanted: whole rounds
    assert pipeline._plan(0.1, 20, 2.5, 16) == (16, False)  # 20 would not fit, 32 neither
    assert pipeline._plan(0.1, 20, 0.0, 1) == (3, True)  # the synthetic half, or DALI
    # The preflight counts that round before the loader starts.
    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], 4, 32, 5)
    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "key": {"loader": "torchvision", "workers": 16},
         "value": 4.0}]}}
    need = 16 + 16 + 32  # a batch a second: the warm round, the timed round, the drain
    assert pipeline.preflight(job, previous, "torchvision", 16, need / 1.45) is None
    why = pipeline.preflight(job, previous, "torchvision", 16, need / 1.55)
    assert why is not None and why.startswith("a round of 16 timed steps on loader batches")


def test_a_loader_slower_than_the_step_reads_its_rate_not_a_burst():
    """Real forked workers, 8 of them, each a batch of 4 images per 0.2 s (160 images/s), and a
    step of 2 ms (2,000 images/s): AU 0.08. A budget that affords no timed step leaves the
    fewest. Three steps, from the round the workers had ready, read 0.47-0.91 in 20 tries; a
    whole round read 0.082-0.134 (the workers' forks on 2 cores put them a little out of
    phase)."""
    pytest.importorskip("torch")
    from benchbench.probes.emulated import steady_rate
    from benchbench.workloads.pipeline import run as pipeline

    halves = _measure_emulated(0.2, 4, 0.05, 8, 0.002)
    assert len(halves.walls) == 8 and halves.context["steps_per_round"] == 8
    by = {m.metric: m for m in pipeline.measurements_of(halves, {}, 4, halves.context)}
    au = by["total_throughput"].value / by["compute_throughput"].value
    expected = steady_rate(8, 0.05) / (4 / 0.002)
    assert expected == pytest.approx(0.08)
    assert 0.5 * expected < au < 0.3, au


def test_the_first_warm_wait_reads_one_workers_batch_time():
    """A first step long enough for the workers to fill their buffer (a GPU's allocation and
    autotuning, 4 s on an H200) leaves them all idle; the drain then starts every worker's
    next batch at once, and the first warm step waits one worker's batch time: here 4 images
    of 0.05 s, 0.2 s. The run keeps those waits and how the workers started."""
    pytest.importorskip("torch")

    halves = _measure_emulated(0.2, 4, 0.05, 8, 0.002, first_step_s=1.0)
    waits = halves.context["warmup_waits_s"]
    assert len(waits) == halves.context["warmup_steps"] == 8
    assert 0.15 < waits[0] < 0.3, waits
    assert halves.context["worker_start"] == "fork"


def test_the_report_labels_an_au_from_few_steps():
    run = pipeline_run(1000.0, 2500.0)
    total = run.probes[0].measurements[0]
    total.context["few_steps"] = True
    text = render_md(run)
    assert "1 + 1 (few steps)" in text
    assert "(few steps)" not in render_md(pipeline_run(1000.0, 2500.0))


def test_a_loader_worker_bus_error_skips_the_pipeline_with_the_shm_fix(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from fault_data import BusErrorImages
    from helpers import cpu_facts

    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes import dataset
    from benchbench.probes._loaders import _TorchvisionLoader
    from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs
    from benchbench.workloads.pipeline import run as pipeline

    facts = dataset.ensure_synthetic(DatasetConfig(num_images=8, num_classes=2, mean_side=64),
                                     quick=True, root=tmp_path)
    monkeypatch.setattr(pipeline, "build_loader", lambda kind, s, batch, workers, image, dev:
                        _TorchvisionLoader(BusErrorImages(), batch, workers, dev, seed=0))
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1),
                       budget=Budget(30.0), facts=cpu_facts(),
                       inputs=RunInputs(data_dir=facts["path"], dataset=facts))
    cfg = resolved("pipeline", precisions=("fp32",), batch_size=2, image_size=32, steps=3,
                   loader="torchvision", workers=2)
    with pytest.raises(ProbeSkipped, match=r"^the torchvision loader with 2 workers failed: a "
                                           r"loader worker was killed by a bus error.*--shm-size"):
        pipeline.run(ctx, cfg)
