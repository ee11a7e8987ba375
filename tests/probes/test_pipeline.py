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
    """A pipeline over five timed rounds of its 8 DALI threads' batches, as the probe records
    it: a sample per round."""
    def m(metric, value):
        return Measurement(
            metric=metric,
            key=KEY,
            value=value,
            unit="samples/s",
            statistic="total_over_time",
            samples=[value] * 5,
            higher_is_better=True,
            context={"timed_rounds": 5, "steps": 5, "steps_per_round": 1},
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
    # A sample per timed round: at least five rounds of the one "worker" (the main process).
    assert len(total.samples) == total.context["timed_rounds"] >= 5
    assert total.key["loader"] == "torchvision"
    assert len(by["data_wait"].samples) == len(by["compute_time"].samples) == \
        total.context["steps"]
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
    with pytest.raises(ProbeSkipped, match=r"2 timed rounds of 2 steps on loader batches "
                                           r"\(a batch from each worker\) and three on "
                                           r"synthetic data would take ~\d+.*torchvision batch "
                                           r"every ~4 s.*before starting"):
        pipeline.run(ctx, cfg)
    assert started == []
    # The same figures with a loader that keeps up: no objection.
    job = pipeline.Job("cpu", pipeline.PRECISIONS["fp32"], 4, 32, 5)
    assert pipeline.preflight(job, _previous(0.05, 400.0), "torchvision", 2, 20.0) is None
    assert pipeline.preflight(job, {}, "torchvision", 2, 0.1) is None  # nothing known yet


@pytest.mark.parametrize("loader, batches", [("torchvision", 10), ("dali_cpu", 6)])
def test_the_preflight_drains_what_the_loader_really_prefetched(loader, batches):
    """A batch a second and no step figure: the drain of the loader's own prefetch, a warm
    round and the fewest timed rounds (torchvision at 2 workers: rounds of 2, 4 queued; DALI:
    rounds of 1, its queue depth 2 plus the iterator's one)."""
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
    need = 10.0  # a batch a second: the drain, a warm round and two timed rounds
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


def test_pipeline_that_ran_warm_steps_reports_few_rounds_rather_than_none():
    pytest.importorskip("torch")
    from benchbench.workloads.pipeline import run as pipeline
    from benchbench.workloads.pipeline.steady import FEW_ROUNDS

    # A 0.3 s step and 1 s of budget: no half affords its 20 steps, or even three.
    halves = _measure_emulated(1.0, 2, 0.001, 0, 0.3)
    assert len(halves.rounds.walls) == FEW_ROUNDS
    assert len(halves.compute_times) == pipeline.FEW_STEPS
    assert halves.context["few_steps"]
    assert any(n.startswith("few rounds: 2 batches timed on loader batches, under the 5")
               for n in halves.notes), halves.notes
    by = {m.metric: m for m in pipeline.measurements_of(halves, {}, 2, halves.context)}
    assert len(by["total_throughput"].samples) == FEW_ROUNDS  # the spread is kept
    assert by["compute_throughput"].value == pytest.approx(2 / 0.3, rel=0.1)


def test_the_real_half_plans_whole_rounds_of_the_workers():
    """Workers that start together deliver their batches together: 3 timed steps of 16
    workers timed the burst of ready batches (AU 0.93) in one H200 run and a wait in the next
    (0.54), and one whole round the buffer (0.94 against 0.71). At least five rounds are
    wanted, two at the fewest."""
    from benchbench.workloads.pipeline.steady import _plan_rounds

    assert _plan_rounds(1.0, 5, 10.0) == (5, False)
    assert _plan_rounds(1.0, 5, 3.5) == (3, True)
    assert _plan_rounds(1.0, 5, 0.0) == (2, True)
    assert _plan_rounds(1.0, 8, 100.0) == (8, False)


def test_a_loader_slower_than_the_step_reads_its_rate_not_a_burst():
    """Real forked workers, 8 of them, each a batch of 4 images per 0.2 s (160 images/s), and a
    step of 2 ms (2,000 images/s): AU 0.08. A budget that affords no timed round leaves the
    fewest, whole rounds of the 8 workers."""
    pytest.importorskip("torch")
    from benchbench.probes.emulated import steady_rate
    from benchbench.workloads.pipeline import run as pipeline

    halves = _measure_emulated(0.2, 4, 0.05, 8, 0.002)
    assert [len(w) for w in halves.rounds.waits] == [8, 8]
    assert halves.context["steps_per_round"] == 8
    by = {m.metric: m for m in pipeline.measurements_of(halves, {}, 4, halves.context)}
    au = by["total_throughput"].value / by["compute_throughput"].value
    expected = steady_rate(8, 0.05) / (4 / 0.002)
    assert expected == pytest.approx(0.08)
    assert 0.5 * expected < au < 0.2, au


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
    assert "5 + 5 (few steps)" in text
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


def _simulated(loader_ips, alone_ips=None, budget_s=40.0):
    """The pipeline's halves on the simulated H200 (its device queue, side stream and loader
    model), 16 torchvision workers at `loader_ips`."""
    pytest.importorskip("torch")
    from benchbench.engine import sim_probes, simulate
    from benchbench.engine.sim_device import H200, FakeClock, context
    from benchbench.workloads.pipeline import run as pipeline

    cfg = simulate.default_registry().get("pipeline").resolve(
        "cuda", True, simulate.facts_for(H200), {"loader": "torchvision", "workers": 16})
    clock = FakeClock()
    ctx = context(H200, True, budget_s, cfg, clock)
    step_s = H200.resnet50_step_s["amp_bf16"]
    job = pipeline.Job("cuda:0", pipeline.PRECISIONS["amp_bf16"], 256, 224, cfg.steps)
    halves = pipeline.measure(
        ctx, job, lambda: sim_probes._sim_loader(H200, clock, "torchvision", 256, 16, loader_ips),
        lambda: sim_probes._SimTrainer(ctx, H200, step_s, 256, 224), alone_ips)
    by = {m.metric: m for m in pipeline.measurements_of(halves, {}, 256, halves.context)}
    return halves, by


def test_the_copy_runs_beside_the_step_so_a_fed_device_reads_au_one():
    """Each batch's copy (154 MB at 55.5 GB/s, 2.8 ms) goes on a side stream while the step
    before it runs: on the compute stream it capped AU at 54.5 / (54.5 + 2.8) = 0.95."""
    halves, by = _simulated(20_000.0)
    au = by["total_throughput"].value / by["compute_throughput"].value
    assert au >= 0.99, au
    assert halves.context["h2d_copy"] == "side stream, overlapped"
    assert by["total_throughput"].context["timed_rounds"] >= 5


def test_a_pipeline_above_its_loader_alone_is_timed_again():
    """A first window that reads over 1.15x the loader alone is timed again where the budget
    allows, and its figure kept beside the new one; without the room it stays as it was."""
    halves, by = _simulated(6_000.0, alone_ips=3_000.0)
    assert "first_window_ips" in halves.context
    assert by["total_throughput"].context["timed_rounds"] >= 5
    halves, _ = _simulated(6_000.0, alone_ips=3_000.0, budget_s=24.0)
    assert "first_window_ips" not in halves.context


def test_the_made_rate_counts_each_workers_batches_between_its_own_stamps():
    """Workers in phase deliver in bursts: a window's edges cut bursts, so the count of batches
    in it moves by a round; each worker's own span does not."""
    from benchbench.workloads.pipeline.steady import made_rate

    # Two workers, a batch of 10 images every second each, bursts at whole seconds.
    made = [(t + 0.001 * w, 10, w) for t in range(10) for w in range(2)]
    assert made_rate(made, 1.5, 8.5) == pytest.approx(20.0, rel=0.01)
    assert made_rate(made, 0.9, 8.1) == pytest.approx(20.0, rel=0.01)
    assert made_rate(made, 1.5, 2.5) is None  # one batch a worker: no span to rate it by
    assert made_rate([], 0.0, 1.0) is None
