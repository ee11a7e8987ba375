"""scripts/ground_truth.py: a minute of ResNet50 trained through the real loader on the run's
dataset. Its timed windows each end at a sync and tile the steady window; it takes the
dataloader probe's best torchvision worker count and the run's dataset; it shortens its window
to its budget, and skips, saying why, where the budget leaves less than its shortest window."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import script

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def truth():
    return script("ground_truth")


class Clock:
    """Each step costs `step_s`; a sync costs `sync_s`; both advance this clock only."""

    def __init__(self, step_s: float, sync_s: float = 0.0) -> None:
        self.now, self.step_s, self.sync_s, self.syncs = 0.0, step_s, sync_s, 0

    def __call__(self) -> float:
        return self.now

    def step(self, batch) -> int:
        self.now += self.step_s
        return batch

    def sync(self) -> None:
        self.syncs += 1
        self.now += self.sync_s


def test_each_window_ends_at_a_sync_and_the_windows_tile_the_steady_time(truth):
    clock = Clock(step_s=0.3, sync_s=0.05)
    windows = truth.timed_windows(clock.step, iter([256] * 1000), seconds=10.0, window=2.0,
                                  sync=clock.sync, clock=clock)
    # One sync before timing and one closing each window: the device's queue is drained.
    assert clock.syncs == len(windows) + 1
    assert sum(s for _, s in windows) == pytest.approx(clock.now - 0.05)
    assert all(s >= 2.0 for _, s in windows) and sum(s for _, s in windows) >= 10.0
    assert all(n % 256 == 0 for n, _ in windows)
    done = truth.summary(windows)
    assert done["rate"] == pytest.approx(done["images"] / done["seconds"])
    assert done["unit"] == "samples/s" and len(done["window_rates"]) == len(windows)
    assert done["spread"]["min"] <= done["spread"]["median"] <= done["spread"]["max"]


def _run(tmp_path, workers=None, data=None):
    from synthetic_runs import environment, measurement

    from benchbench.core.results import ProbeResult, RunResult

    ms = [measurement("throughput", {"loader": "torchvision", "workers": w, "batch_size": 64,
                                     "image_size": 224}, [rate], "samples/s")
          for w, rate in (workers or [])]
    ms.append(measurement("throughput", {"loader": "dali_cpu", "workers": 32, "batch_size": 64,
                                         "image_size": 224}, [9000.0], "samples/s"))
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"},
                     started_at="2026-12-01T00:00:00+00:00", environment=environment(),
                     config={"device_resolved": "cpu", "quick": True, "data_dir": data},
                     argv=[], probes=[ProbeResult(name="dataloader", status="ok",
                                                  resource="cpu_dataloading", measurements=ms)])


def test_the_workers_are_the_dataloader_probes_best_torchvision_count(truth, tmp_path):
    """DALI cannot travel to the box: the best torchvision configuration, not DALI's."""
    workers, why = truth.best_workers(_run(tmp_path, [(8, 2900.0), (16, 3318.0), (4, 1500.0)]))
    assert workers == 16 and why == ("the dataloader probe's best torchvision configuration "
                                     "(3,318 img/s at batch 64)")
    workers, why = truth.best_workers(_run(tmp_path))
    assert workers is None and "measured no torchvision configuration" in why
    run = _run(tmp_path, data=str(tmp_path))
    assert truth.dataset_path(run) == (str(tmp_path), "the run's --data-dir")
    run = _run(tmp_path)
    run.extra["dataset"] = {"path": str(tmp_path / "gone"), "num_images": 256}
    assert truth.dataset_path(run) == (None, "the run recorded no dataset that is still on "
                                             "disk")
    run.extra["dataset"]["path"] = str(tmp_path)
    assert truth.dataset_path(run)[1] == "the run's synthetic dataset (256 images)"


def test_the_window_is_what_the_budget_leaves_and_none_under_its_least(truth):
    assert truth.steady_seconds(105, 25, 60, 20) == (60, None)  # 75 s left: the full minute
    assert truth.steady_seconds(70, 25, 60, 20) == (40, None)  # shortened to what is left
    seconds, why = truth.steady_seconds(40, 25, 60, 20)
    assert seconds == 0 and why == ("skipped, because after the warm-up 10 s of its 40 s "
                                    "budget were left, under the 20 s window it needs")


@pytest.mark.slow
def test_a_cpu_ground_truth_trains_on_the_runs_data(tmp_path):
    """End to end on the CPU at tiny sizes: the run's data folder, its best worker count, and
    the JSON the headline reads."""
    pytest.importorskip("torchvision")
    from PIL import Image

    data = tmp_path / "data"
    for c in range(2):
        (data / f"c{c}").mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (48, 40), (40 * i, 90, 30 * c)).save(data / f"c{c}" / f"{i}.jpg")
    run = _run(tmp_path, [(1, 50.0), (2, 80.0)], data=str(data))
    (tmp_path / "results.json").write_text(json.dumps(run.to_dict()))
    out = tmp_path / "ground-truth.json"
    argv = [sys.executable, str(ROOT / "scripts" / "ground_truth.py"), str(tmp_path),
            "--device", "cpu", "--precision", "fp32", "--batch", "2", "--image-size", "32",
            "--seconds", "1.5", "--window", "0.5", "--min-seconds", "0.5", "--warmup-s", "0.2",
            "--out", str(out)]
    proc = subprocess.run(argv + ["--budget", "120"], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["status"] == "ok" and got["workers"] == 2 and got["dataset"] == str(data)
    assert got["device"] == "cpu" and got["batch"] == 2 and got["rate"] > 0
    assert got["seconds"] >= 1.5 and all(w["seconds"] >= 0.5 for w in got["windows"])
    assert got["warmup_batches"] >= 2  # every worker delivered before the timing
    assert "ground truth: " in proc.stdout and "img/s over" in proc.stdout
