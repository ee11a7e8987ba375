"""A dataset removed while the run reads it: the probe reading it fails in one line that names
the path and what to do, no traceback, and the rest of the run (other probes, a probe's
earlier rounds, storage's fio figures) stays."""

import shutil
from pathlib import Path

import pytest
from fake_isolator import FakeIsolator, ok
from helpers import cpu_facts, resolved

from benchbench.core import results
from benchbench.core.config import RunConfig
from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.engine.catalog import default_registry
from benchbench.engine.isolation import Outcome
from benchbench.engine.runner import EXIT_FAILED, Runner
from benchbench.probes import dataset
from benchbench.probes.api import ProbeContext, ProbeOutput, RunInputs
from benchbench.probes.dataset import DatasetConfig, DatasetVanished, ensure_synthetic
from benchbench.storage_probes.storage import dataset_read

TINY = DatasetConfig(num_images=12, num_classes=2, mean_side=64)
WHAT_TO_DO = "put the dataset back and leave it in place until the run ends, then run again"


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of a tiny generated dataset, ours to remove."""
    made = ensure_synthetic(TINY, quick=False, root=tmp_path / "cache", processes=1)
    shutil.copytree(made["path"], tmp_path / "data")
    return tmp_path / "data"


def one_line(exc: BaseException, path: Path | str) -> str:
    text = str(exc)
    assert "\n" not in text and str(path) in text and text.endswith(WHAT_TO_DO), text
    return text


def test_the_dataset_as_it_was_scanned_gives_its_samples(data):
    assert dataset.run_samples(str(data)).in_dataset == TINY.num_images


def test_a_removed_dataset_is_said_in_one_line(data):
    shutil.rmtree(data)
    with pytest.raises(DatasetVanished) as err:
        dataset.run_samples(str(data))
    assert "was removed during the run" in one_line(err.value, data)


def test_a_dataset_emptied_of_its_images_is_said_in_one_line(data):
    for path in data.rglob("*.jpg"):
        path.unlink()
    with pytest.raises(DatasetVanished) as err:
        dataset.run_samples(str(data))
    assert "lost all its images during the run" in one_line(err.value, data)


def test_files_removed_while_their_headers_are_read_are_named(data, monkeypatch):
    real = dataset._format
    victim = next(iter(sorted(data.rglob("*.jpg"))))

    def removed_meanwhile(path):
        if path == str(victim):
            victim.unlink()
        return real(path)

    monkeypatch.setattr(dataset, "_format", removed_meanwhile)
    with pytest.raises(DatasetVanished) as err:
        dataset.run_samples(str(data))
    one_line(err.value, victim)


def test_a_dangling_link_is_left_out_and_has_not_vanished(data):
    (data / "class_000" / "dangling.jpg").symlink_to(data / "nowhere.jpg")
    samples = dataset.run_samples(str(data))
    assert str(data / "class_000" / "dangling.jpg") in samples.rejected


def _ctx(**inputs) -> ProbeContext:
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=2, max_repeats=2,
                                                          warmup_s=0.0),
                        budget=Budget(30.0), facts=cpu_facts(), inputs=RunInputs(**inputs))


def test_the_storage_probe_keeps_its_figures_and_notes_a_removed_dataset(data):
    """Its dataset read is a note beside fio's figures: the note says why, fio's stay."""
    shutil.rmtree(data)
    out = ProbeOutput([])
    assert dataset_read.measure(_ctx(data_dir=str(data)), 10**9, "", out) == []
    (note,) = out.notes
    assert note == (f"dataset read skipped, because the dataset {data} was removed during the "
                    f"run: {WHAT_TO_DO}")


def test_the_storage_probe_notes_files_removed_between_its_listing_and_its_read(
        data, monkeypatch):
    real = dataset_read.cold_read

    def removed_first(files, *args, **kw):
        shutil.rmtree(data)
        return real(files, *args, **kw)

    monkeypatch.setattr(dataset_read, "cold_read", removed_first)
    out = ProbeOutput([])
    assert dataset_read.measure(_ctx(data_dir=str(data)), 10**9, "", out) == []
    (note,) = out.notes
    assert note.startswith(f"dataset read skipped, because the dataset's file {data}/")
    assert note.endswith(f"was removed during the run: {WHAT_TO_DO}") and "\n" not in note


def test_a_failed_probe_is_recorded_with_its_line_and_the_run_goes_on(tmp_path):
    """What the worker hands back for a DatasetVanished (a failed status, its one line) is
    kept as the probe's failure, with no traceback file; the other probes stay."""
    line = f"the dataset /data was removed during the run: {WHAT_TO_DO}"
    failed = Outcome(True, value={"status": "failed", "reason": line, "resource": None,
                                  "params": {}, "measurements": []})
    runner = Runner(default_registry(), RunConfig(only=("matmul", "dataloader"), rounds=2),
                    tmp_path, ["run"], {"cuda_available": False}, {},
                    FakeIsolator({"dataloader": failed}))
    assert runner.execute() == EXIT_FAILED
    saved = results.load(tmp_path)
    assert (saved.probe("dataloader").status, saved.probe("dataloader").reason) == (
        "failed", line)
    assert saved.probe("matmul").status == "ok" and saved.probe("matmul").measurements
    assert not list(tmp_path.glob("*.traceback.txt"))


def test_a_later_round_that_finds_the_dataset_gone_keeps_the_first(tmp_path):
    line = f"the dataset /data was removed during the run: {WHAT_TO_DO}"
    answers = iter([ok(), Outcome(True, value={"status": "failed", "reason": line,
                                               "resource": None, "params": {},
                                               "measurements": []})])
    iso = FakeIsolator({})
    iso.call = lambda target, job, **kw: iso.jobs.append(job) or next(answers)
    runner = Runner(default_registry(), RunConfig(only=("dataloader",), rounds=2), tmp_path,
                    ["run"], {"cuda_available": False}, {}, iso)
    assert runner.execute() == EXIT_FAILED
    kept = results.load(tmp_path).probe("dataloader")
    assert kept.status == "ok" and kept.measurements
    assert f"round 2 failed: {line}" in kept.reason


# --- with torch: the probes and the loaders themselves ---------------------------------------

def test_the_dataloader_probe_fails_in_one_line_through_the_worker(data):
    pytest.importorskip("torchvision")
    from benchbench.engine.worker import ProbeJob, run_probe

    facts = dataset.scan_imagefolder(data)
    shutil.rmtree(data)
    job = ProbeJob(name="dataloader", run="benchbench.probes.dataloader.run", device="cpu",
                   min_repeats=1, budget_s=10.0, config=resolved("dataloader"),
                   facts=cpu_facts(), inputs=RunInputs(data_dir=str(data), dataset=facts))
    got = run_probe(job, lambda *a: None)
    assert got["status"] == "failed" and got["measurements"] == []
    assert "was removed during the run" in one_line(got["reason"], data)


def test_a_torchvision_loader_whose_files_vanish_stops_in_one_line(data):
    pytest.importorskip("torchvision")
    from benchbench.probes._loaders import build_loader

    samples = dataset.run_samples(str(data))
    victim = Path(samples.files[5])
    with build_loader("torchvision", samples, 4, 0, 32, "cpu") as loader:
        stream = loader.stream()
        next(stream)
        victim.unlink()  # one file: the others would still fill batches, as corrupt ones do
        with pytest.raises(DatasetVanished) as err:
            for _ in range(10):  # a pass over the 12 files is 3 batches: it is met
                next(stream)
    assert f"the dataset's file {victim} was removed" in one_line(err.value, victim)


def test_a_dali_loader_over_removed_files_stops_in_one_line(data):
    pytest.importorskip("torch")
    from benchbench.probes._loaders import build_loader, dali_available

    if dali_available() is not None:
        pytest.skip(f"DALI cannot run here: {dali_available()}")
    samples = dataset.run_samples(str(data))
    shutil.rmtree(data)
    with pytest.raises(DatasetVanished) as err:
        with build_loader("dali_cpu", samples, 4, 1, 32, "cpu") as loader:
            stream = loader.stream()
            for _ in range(10):
                next(stream)
    assert "the dataset's file" in one_line(err.value, data)
