"""Steady state on many cores, emulated on this small machine (STYLE.md, "Measuring at scale").

Items that sleep cost wall time but no CPU, so W loader workers over them behave like W cores:
the true steady rate is W / t images/s, and the pipeline's true accelerator utilisation is
the loader's rate over the step's. Start-up bursts and prefetch buffers would show here as a
figure off the truth, as they would on a 16-core or 200-thread GPU host.
"""

import pytest
from helpers import cpu_facts, resolved

pytest.importorskip("torch")

from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.probes.api import ProbeContext  # noqa: E402
from benchbench.probes.dataloader import run as dataloader  # noqa: E402
from benchbench.probes.emulated import sleep_loader, steady_rate  # noqa: E402

BATCH = 4
TOLERANCE = 0.05  # of the true rate
# 64 workers on 2 cores is the point: they sleep, they do not compute.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _ctx(budget: float = 60.0) -> ProbeContext:
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1,
                                                          warmup_s=0.0, warmup_steps=2),
                        budget=Budget(budget), facts=cpu_facts())


def _batch_s(workers: int) -> float:
    # Long enough that the main process handles at most ~100 batches/s (its own work per
    # batch must not limit the rate), short enough to keep the test to seconds.
    return max(0.2, workers / 100)


@pytest.mark.parametrize("workers", [4, 16, 64])
def test_dataloader_measures_the_steady_rate_of_many_workers(workers):
    per_image = _batch_s(workers) / BATCH

    def make(kind, data, batch, w, image, device):
        return sleep_loader(per_image, batch, w)

    # A window long against this VM's stalls: a stall of the main process at either edge of
    # it moves the rate by stall / window. One of 70 ms moved a 0.6 s window's rate by 12%,
    # and 64 workers sleeping on 2 cores stall it for up to 150 ms. So at least twice the
    # probe's own default (min_seconds: auto, 2 s; at 2 s, 16 workers read 0.947 of the truth
    # in one CI run and in 1 of 12 runs alone) and six rounds of the workers.
    window = max(2 * resolved("dataloader", quick=False).min_seconds, 6 * _batch_s(workers))
    cfg = resolved("dataloader", quick=False, loaders=("torchvision",), workers=(workers,),
                   batch_size=BATCH, batches=20, min_seconds=window)
    true = steady_rate(workers, per_image)

    def ratio() -> tuple[float, dict]:
        notes: list[str] = []
        measured, _ = dataloader.sweep(_ctx(), cfg, [("torchvision", workers)], "emulated",
                                       "cpu", 2, notes, make_loader=make)
        (rate,) = [m for m in measured if m.metric == "throughput"]
        # Whole rounds of the workers: every worker delivered as often as every other.
        assert rate.context["batches"] % workers == 0
        assert rate.context["batches"] >= 3 * workers
        assert rate.context["warmup_batches"] >= 3 * workers  # first round + prefetch drained
        assert len(rate.samples) == rate.context["batches"] // workers  # a sample per round
        return rate.value / true, {"rounds": [round(s / true, 3) for s in rate.samples],
                                   **rate.context}

    # The median of three measurements, so that one stall of the VM cannot decide it: a stall
    # in a window's last round is not made up within the window. 64 workers read 0.916 of the
    # truth in 1 of 84 measurements (rounds 0.82, 1.63, 0.95, 1.56, 0.77, 0.78, 0.65: stalls
    # the prefetch buffer made up, then one it did not). Timing the start-up burst or the
    # prefetch buffer, the bugs this test guards against, biases all three. Where the first
    # two are both within the tolerance, so is the median of any third, which is not taken.
    runs = [ratio(), ratio()]
    if any(abs(r - 1) > TOLERANCE for r, _ in runs):
        runs.append(ratio())
    median = sorted(r for r, _ in runs)[1]
    assert median == pytest.approx(1.0, abs=TOLERANCE), runs


@pytest.mark.parametrize("true_au", [0.5, 0.8])
def test_pipeline_au_is_the_steady_state_not_the_prefetch_buffer(true_au):
    from benchbench.probes.emulated import SleepTrainer
    from benchbench.workloads._training import PRECISIONS
    from benchbench.workloads.pipeline import run as pipeline

    # 8 workers, each a batch of 4 images every 0.64 s: a batch every 80 ms. Each round of
    # the workers also costs some CPU (waking, collating, passing the batch), which this
    # 2-core VM's host makes slower at some hours than at others; at a batch every 20 ms
    # (16 workers, 0.32 s) that cost read 0.48-0.82 for a true 0.8 within one hour, here
    # 0.78-0.81.
    workers, batch_s = 8, 0.64
    step_s = true_au * batch_s / workers  # the step the loader keeps busy true_au of the time
    job = pipeline.Job("cpu", PRECISIONS["fp32"], BATCH, 8, steps=2 * workers)

    def au() -> tuple[float, dict]:
        halves = pipeline.measure(_ctx(), job,
                                  lambda: sleep_loader(batch_s / BATCH, BATCH, workers),
                                  # A slow first step, as a GPU's allocation and autotuning
                                  # take: the workers fill their prefetch buffer meanwhile.
                                  lambda: SleepTrainer(step_s, first_step_s=2.5 * batch_s))
        assert all(len(w) == workers for w in halves.rounds.waits)
        assert len(halves.rounds.walls) >= 5 and not halves.context["few_steps"]
        assert halves.context["prefetched_discarded"] == 2 * workers
        by = {m.metric: m for m in pipeline.measurements_of(halves, {}, BATCH, halves.context)}
        return (by["total_throughput"].value / by["compute_throughput"].value,
                by["total_throughput"].context)

    # The median of three measurements, so that one stall of the VM cannot decide it. Timing
    # the prefetch buffer, the bug this test guards against, biases all three.
    runs = [au() for _ in range(3)]
    ratios = sorted(ratio for ratio, _ in runs)
    assert ratios[1] == pytest.approx(true_au, abs=0.05), runs
