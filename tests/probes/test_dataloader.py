"""The input-pipeline loaders and the `dataloader` probe, on a tiny generated dataset (CPU)."""

import shutil
from pathlib import Path

import pytest
from helpers import cpu_facts, resolved

from benchbench.probes.dataloader.config import auto_workers

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.probes import _loaders  # noqa: E402
from benchbench.probes._loaders import (  # noqa: E402
    MEAN,
    STD,
    LoaderError,
    build_loader,
    dali_available,
    dali_missing,
)
from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs  # noqa: E402
from benchbench.probes.dataloader import run as dataloader  # noqa: E402
from benchbench.probes.dataset import DatasetConfig, ensure_synthetic  # noqa: E402

needs_dali = pytest.mark.skipif(dali_available() is not None,
                                reason=f"DALI cannot run here: {dali_available()}")
TINY = DatasetConfig(num_images=24, num_classes=3, mean_side=96)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    return ensure_synthetic(TINY, quick=False, root=tmp_path_factory.mktemp("cache"),
                            processes=1)


@pytest.fixture(scope="module")
def corrupt_dir(tiny, tmp_path_factory) -> Path:
    """The tiny dataset with one JPEG cut to a third of its length."""
    path = tmp_path_factory.mktemp("corrupt") / "data"
    shutil.copytree(tiny["path"], path)
    victim = path / "class_001" / "img_000004.jpg"
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 3])
    return path


def ctx(tiny=None, budget=60.0, clock=None, **inputs):
    seen = []
    c = ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=1, max_repeats=1, warmup_s=0.0),
                     budget=Budget(budget), facts=cpu_facts(), progress=lambda *a: seen.append(a),
                     inputs=RunInputs(data_dir=tiny and tiny["path"], dataset=tiny, **inputs))
    if clock:
        c.clock = clock
    return c, seen


def check_batch(images, labels, batch=4, size=32):
    assert images.shape == (batch, 3, size, size) and images.dtype == torch.float32
    assert labels.shape == (batch,) and labels.dtype == torch.int64
    assert 0 <= int(labels.min()) and int(labels.max()) < 3
    # Normalized with ImageNet's mean and std: undoing it gives pixels in [0, 1] again.
    pixels = images * torch.tensor(STD).view(1, 3, 1, 1) + torch.tensor(MEAN).view(1, 3, 1, 1)
    assert float(pixels.min()) > -0.02 and float(pixels.max()) < 1.02
    assert float(images.min()) < -0.5 and float(images.std()) > 0.2  # not left in [0, 1]


@pytest.mark.parametrize("kind, workers", [
    ("torchvision", 0), ("torchvision", 1),
    pytest.param("dali_cpu", 1, marks=needs_dali), pytest.param("dali_cpu", 2, marks=needs_dali),
])
def test_loader_gives_normalized_batches_across_epochs(tiny, kind, workers):
    with build_loader(kind, tiny["path"], 4, workers, 32, "cpu") as loader:
        assert loader.images == 24 and loader.threads == max(1, workers)
        assert loader.output_device == "cpu"
        batches = list(loader.stream(8))  # runs into a second pass
        assert len(batches) == 8
        for images, labels in batches:
            check_batch(images, labels)
        assert loader.corrupt == 0


def test_torchvision_close_stops_its_workers(tiny):
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()

    def workers():  # forkserver's children: the server itself is our child and stays
        return {p for p in me.children(recursive=True) if p.ppid() != me.pid}

    before = workers()
    loader = build_loader("torchvision", tiny["path"], 4, 2, 32, "cpu")
    next(iter(loader))
    started = workers() - before
    assert len(started) == 2
    loader.close()
    _, alive = psutil.wait_procs(started, timeout=10)
    assert alive == []


@pytest.mark.parametrize("kind", ["torchvision", pytest.param("dali_cpu", marks=needs_dali)])
def test_a_dataset_smaller_than_a_batch_still_fills_batches(tiny, kind):
    """24 images, batches of 64: every batch is full, drawn from passes over the files."""
    with build_loader(kind, tiny["path"], 64, 1, 32, "cpu") as loader:
        batches = list(loader.stream(3))
    assert [len(x) for x, _ in batches] == [64, 64, 64]


def test_dali_gpu_without_a_gpu_gives_a_reason():
    with pytest.raises(LoaderError, match="CUDA GPU"):
        build_loader("dali_gpu", "/nonexistent", 4, 1, 32, "cpu")


@pytest.mark.gpu
def test_torchvision_pins_its_batches_for_a_gpu(tiny):
    with build_loader("torchvision", tiny["path"], 4, 0, 32, "cuda:0") as loader:
        images, labels = next(iter(loader))
    assert images.is_pinned() and labels.is_pinned()


@pytest.mark.gpu
@needs_dali
def test_dali_gpu_batches_arrive_on_the_gpu(tiny):
    with build_loader("dali_gpu", tiny["path"], 4, 1, 32, "cuda:0") as loader:
        assert loader.output_device == "cuda:0"
        images, labels = next(iter(loader))
        assert images.is_cuda and labels.is_cuda
        check_batch(images.cpu(), labels.cpu())


def test_torchvision_skips_and_counts_a_corrupt_jpeg(corrupt_dir):
    with build_loader("torchvision", str(corrupt_dir), 4, 1, 32, "cpu") as loader:
        with pytest.warns(UserWarning, match="img_000004.jpg"):
            images = sum(len(x) for x, _ in loader.stream(6))  # 24 files: one whole pass
        assert images == 23
        assert loader.corrupt == 1
        assert "truncated" in loader.corrupt_files[str(corrupt_dir / "class_001/img_000004.jpg")]


@needs_dali
def test_dali_skips_and_counts_a_corrupt_jpeg_as_torchvision_does(corrupt_dir):
    with build_loader("dali_cpu", str(corrupt_dir), 4, 1, 32, "cpu") as loader:
        with pytest.warns(UserWarning, match="img_000004.jpg"):
            batches = list(loader.stream(12))  # two passes over the 23 good files
    assert all(len(x) == 4 for x, _ in batches)
    assert list(loader.corrupt_files) == [str(corrupt_dir / "class_001/img_000004.jpg")]
    assert "\n" not in loader.corrupt_files[str(corrupt_dir / "class_001/img_000004.jpg")]


@pytest.fixture(scope="module")
def odd_dir(tmp_path_factory):
    """Every kind of file a user's folder may hold: JPEG in RGB, grayscale and CMYK, PNG with
    and without alpha, WebP, a truncated JPEG, an empty and a fake .jpg, a text file."""
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("odd")
    (root / "a").mkdir()
    (root / "b").mkdir()
    rng = np.random.default_rng(0)

    def img(mode="RGB"):
        pixels = rng.integers(0, 255, (80, 96, 3), dtype=np.uint8)
        return Image.fromarray(pixels, "RGB").convert(mode)

    img().save(root / "a/rgb.jpg", quality=90)
    img("L").save(root / "a/gray.jpg", quality=90)
    img("CMYK").save(root / "a/cmyk.jpg", quality=90)
    img().save(root / "b/rgb.png")
    img("RGBA").save(root / "b/rgba.png")
    img().save(root / "b/pic.webp")
    whole = (root / "a/rgb.jpg").read_bytes()
    (root / "b/trunc.jpg").write_bytes(whole[: len(whole) // 3])
    (root / "b/empty.jpg").write_bytes(b"")
    (root / "b/fake.jpg").write_text("not an image")
    (root / "b/notes.txt").write_text("ignored: no image extension")
    return root


def test_both_loaders_count_the_same_files_of_an_odd_folder(odd_dir):
    from benchbench.probes.dataset import loader_samples

    samples = loader_samples(odd_dir)
    assert samples.kinds == {"JPEG": 4, "PNG": 2, "WEBP": 1} and samples.in_dataset == 9
    assert sorted(samples.rejected) == [str(odd_dir / "b/empty.jpg"),
                                        str(odd_dir / "b/fake.jpg")]
    kinds = ["torchvision"] + (["dali_cpu"] if dali_available() is None else [])
    skipped = {}
    for kind in kinds:
        with pytest.warns(UserWarning, match="trunc.jpg"), \
                build_loader(kind, samples, 4, 1, 32, "cpu") as loader:
            batches = list(loader.stream(6))
        assert sum(len(x) for x, _ in batches) >= 20 and all(len(x) for x, _ in batches)
        for images, labels in batches:
            assert images.shape[1:] == (3, 32, 32) and set(labels.tolist()) <= {0, 1}
        skipped[kind] = set(loader.corrupt_files)
    assert all(v == {str(odd_dir / "b/trunc.jpg")} for v in skipped.values()), skipped


def test_probe_measures_every_loader_and_worker_count(tiny):
    c, seen = ctx(tiny)
    cfg = resolved("dataloader", batch_size=4, image_size=32, workers=(0, 1), batches=2,
                   min_seconds=0)
    out = dataloader.run(c, cfg)
    wanted = {("torchvision", 0), ("torchvision", 1)}
    if dali_available() is None:
        wanted.add(("dali_cpu", 1))  # workers 0 and 1 are the same DALI configuration
    rates = [m for m in out.measurements if m.metric == "throughput"]
    per_core = {(m.key["loader"], m.key["workers"]): m for m in out.measurements
                if m.metric == "throughput_per_core"}
    assert {(m.key["loader"], m.key["workers"]) for m in rates} == wanted
    for m in rates:
        assert m.unit == "samples/s" and m.statistic == "total_over_time"
        assert m.key["batch_size"] == 4 and m.key["image_size"] == 32
        # One batch a round (workers 0 and 1, DALI), and never fewer than three rounds.
        assert m.context["batches_per_round"] == 1 and m.context["rounds"] == 3
        assert len(m.samples) == 3 and m.context["images"] == 12
        # total images over total time: the round times are 4 / each sample
        assert m.value == pytest.approx(12 / sum(4 / s for s in m.samples))
        core = per_core[(m.key["loader"], m.key["workers"])]
        assert core.value == pytest.approx(m.value / m.context["cores_used"])
    (best,) = [m for m in out.measurements if m.metric == "best_throughput"]
    top = max(rates, key=lambda m: m.value)
    assert best.statistic == "max" and best.value == top.value
    assert sorted(best.samples) == sorted(m.value for m in rates)
    assert (best.context["loader"], best.context["workers"]) == (top.key["loader"],
                                                                  top.key["workers"])
    assert out.params["dataset_mean_file_size"] == tiny["mean_file_size"]
    assert out.params["page_cache_bytes"] == tiny["total_bytes"]
    assert out.params["corrupt_files"] == 0
    assert seen[-1][0] == "done"


def gpu_config(facts):
    """The GPU test's config, resolved for a CUDA device (its defaults add dali_gpu)."""
    return resolved("dataloader", device="cuda", facts=facts, batch_size=4, image_size=32,
                    workers=(1,), batches=2, min_seconds=0)


@pytest.mark.gpu
def test_probe_on_a_gpu_adds_dali_gpu(tiny):
    from benchbench.machine.environment import torch_facts

    c, _ = ctx(tiny)
    c.device = "cuda"
    out = dataloader.run(c, gpu_config(torch_facts()))
    loaders = {m.key["loader"] for m in out.measurements if m.metric == "throughput"}
    assert loaders == ({"torchvision"} if dali_available() else
                       {"torchvision", "dali_cpu", "dali_gpu"})


def test_the_gpu_test_plans_every_loader_on_a_simulated_h200():
    from benchbench.engine import simulate

    cfg = gpu_config(simulate.facts_for(simulate.H200))
    assert dataloader.configurations(list(cfg.loaders), cfg.workers) == [
        ("torchvision", 1), ("dali_cpu", 1), ("dali_gpu", 1)]


def test_probe_notes_a_missing_dali(tiny, monkeypatch):
    monkeypatch.setattr(_loaders, "dali_installed", dali_missing)
    monkeypatch.setattr(_loaders, "dali_available", dali_missing)
    c, _ = ctx(tiny)
    out = dataloader.run(c, resolved("dataloader", batch_size=4, image_size=32, workers=(0,),
                                             batches=2))
    assert any(n.startswith("dali_cpu skipped, because DALI is not installed") and
               f"pip install {_loaders.dali_wheel()} (the wheel for this torch's" in n
               for n in out.notes)
    assert {m.key["loader"] for m in out.measurements if "loader" in m.key} == {"torchvision"}
    assert {m.key["loader"] for m in out.measurements if "loader" in m.key} == {"torchvision"}
    with pytest.raises(ProbeSkipped, match="no loader could run: dali_cpu skipped, because DALI"):
        dataloader.run(c, resolved("dataloader", loaders=("dali_cpu",), batch_size=4, image_size=32,
                                           workers=(0,), batches=2))


def test_probe_counts_corrupt_files(tiny, corrupt_dir):
    c, _ = ctx(tiny)
    c.inputs = RunInputs(data_dir=str(corrupt_dir))
    # 1 warm-up + 6 timed batches of 4 cover the 24 files of the first epoch.
    with pytest.warns(UserWarning, match="skipped corrupt image"):
        out = dataloader.run(c, resolved("dataloader", batch_size=4, image_size=32, workers=(1,),
                                                 batches=6))
    assert out.params["corrupt_files"] == 1
    assert any(n.startswith("1 image that fails to decode skipped and counted by "
                            "torchvision") for n in out.notes)
    loaders = ["torchvision"]
    if dali_available() is None:  # DALI drops the file and goes on, counting it too
        loaders.append("dali_cpu")
        assert out.params["corrupt_by_loader"] == {"torchvision": 1, "dali_cpu": 1}
    assert sorted(m.key["loader"] for m in out.measurements if m.metric == "throughput") == \
        sorted(loaders)


def test_probe_measures_a_folder_smaller_than_a_batch(tiny, odd_dir):
    """7 images and batches of 64: measured, not skipped; what is no image is named."""
    c, _ = ctx(tiny)
    c.inputs = RunInputs(data_dir=str(odd_dir))
    with pytest.warns(UserWarning, match="trunc.jpg"):
        out = dataloader.run(c, resolved("dataloader", batch_size=64, image_size=32, workers=(0,),
                                                 batches=2, loaders=("torchvision",)))
    (thr,) = [m for m in out.measurements if m.metric == "throughput"]
    assert thr.context["images"] >= 100  # 2 batches of 64, less the truncated file's places
    assert out.params["file_kinds"] == {"JPEG": 4, "PNG": 2, "WEBP": 1}
    assert out.params["not_images"] == 2
    assert any("2 files with an image extension left out, because they are no image" in n
               for n in out.notes)


def test_probe_skips_without_a_dataset():
    c, _ = ctx()
    with pytest.raises(ProbeSkipped, match="no dataset|no --data-dir"):
        dataloader.run(c, resolved("dataloader"))


def test_probe_imports_dali_only_for_a_dali_configuration_it_runs(tiny, monkeypatch):
    """Planning needs DALI installed, not imported (~0.7 s on 2 cores, every round): a budget
    that ends after torchvision never imports it. A DALI that is installed but does not
    import is said when its configuration starts."""
    imports = []
    monkeypatch.setattr(_loaders, "dali_installed", lambda: None)
    monkeypatch.setattr(_loaders, "dali_available",
                        lambda: imports.append(1) or "DALI does not import: libfoo.so missing")
    ticks = iter(range(0, 10_000, 10))  # every reading of the clock is 10 s later
    c, _ = ctx(tiny, budget=30.0, clock=lambda: float(next(ticks)))
    cfg = resolved("dataloader", batch_size=4, image_size=32, workers=(0,), batches=2)
    out = dataloader.run(c, cfg)
    assert imports == [] and "dali_cpu workers=1 skipped, because the time budget ran out" \
        in out.notes
    # the best figure is then a floor, and says which loader might have beaten it
    (best,) = [m for m in out.measurements if m.metric == "best_throughput"]
    assert best.context["not_measured"] == {"dali_cpu": "the time budget ran out before it"}
    c, _ = ctx(tiny)
    out = dataloader.run(c, cfg)
    assert imports == [1] and "dali_cpu skipped, because it failed at workers=1: DALI does " \
        "not import: libfoo.so missing" in out.notes
    assert {m.key["loader"] for m in out.measurements if "loader" in m.key} == {"torchvision"}
    (best,) = [m for m in out.measurements if m.metric == "best_throughput"]
    assert best.context["not_measured"] == {"dali_cpu": "it failed at workers=1"}


class _Clocked(_loaders.Loader):
    """A loader on a fake clock: `startup` seconds to its first batch, then `per_batch` a
    batch."""

    def __init__(self, now, startup, per_batch, start):
        super().__init__()
        self.now, self.startup, self.per_batch, self.start = now, startup, per_batch, start
        self.parallel, self.prefetch, self.threads, self.output_device = 1, 0, 2, "cpu"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        self.now[0] += self.startup
        while True:
            yield torch.zeros(4, 3, 8, 8), torch.zeros(4, dtype=torch.int64)
            self.now[0] += self.per_batch


@pytest.mark.parametrize("budget, dali_runs", [(4.0, True), (2.3, False)])
def test_a_loader_not_started_yet_is_not_priced_by_anothers_start_up(budget, dali_runs):
    """torchvision takes 2 s to its first batch here, then 0.1 s a batch, and stops at its
    share after two timed batches (2.2 s). Its start-up is its own: 1.8 s left (of 4) start
    DALI, as more than what followed torchvision's first batch (0.2 s), though less than
    torchvision's whole cost. 0.1 s left (of 2.3) do not."""
    now = [0.0]
    startups = {"torchvision": (2.0, "forkserver"), "dali_cpu": (0.5, "threads")}

    def make(kind, data, batch, workers, image, device):
        return _Clocked(now, startups[kind][0], 0.1, startups[kind][1])

    c = ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1),
                     budget=Budget(budget, clock=lambda: now[0]), facts=cpu_facts(),
                     progress=lambda *a: None, inputs=RunInputs())
    c.clock = lambda: now[0]
    cfg = resolved("dataloader", batch_size=4, image_size=8, workers=(2,), batches=3,
                   min_seconds=0.6)
    notes, left_out = [], {}
    measured, _ = dataloader.sweep(c, cfg, [("torchvision", 2), ("dali_cpu", 2)], "fake",
                                   "cpu", 2, notes, make_loader=make, left_out=left_out)
    tv = next(m for m in measured if m.key["loader"] == "torchvision")
    assert tv.context["first_batch_s"] == pytest.approx(2.0)
    ran = {m.key["loader"] for m in measured}
    if dali_runs:
        assert ran == {"torchvision", "dali_cpu"} and notes == [] and left_out == {}
    else:
        assert ran == {"torchvision"}
        assert notes == ["dali_cpu workers=2 skipped, because the time budget ran out"]
        assert left_out == {"dali_cpu": "the time budget ran out before it"}


def test_a_later_round_measures_first_what_the_earlier_ones_left_out():
    before = {("torchvision", 2)}
    plan = [("torchvision", 2), ("dali_cpu", 2), ("torchvision", 0), ("dali_cpu", 1)]
    assert dataloader.rotated(plan, before) == [
        ("dali_cpu", 2), ("torchvision", 0), ("dali_cpu", 1), ("torchvision", 2)]
    assert dataloader.rotated(plan, set()) == plan
    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "key": {"loader": "torchvision", "workers": 2}},
        {"metric": "best_throughput", "key": {"batch_size": 64, "image_size": 224}}]},
        "matmul": {"measurements": []}}
    assert dataloader.measured_before(previous) == before
    assert dataloader.measured_before({}) == set()


@needs_dali
def test_a_round_after_one_that_left_dali_out_starts_with_it(tiny):
    """Round 1 measured torchvision only; round 2 starts with DALI, and where its budget then
    leaves torchvision out, the best figure is no floor: round 1 measured torchvision."""
    ticks = iter(range(0, 10_000, 10))  # every reading of the clock is 10 s later
    previous = {"dataloader": {"measurements": [
        {"metric": "throughput", "key": {"loader": "torchvision", "workers": 0}}]}}
    c, _ = ctx(tiny, budget=30.0, clock=lambda: float(next(ticks)), previous=previous)
    out = dataloader.run(c, resolved("dataloader", batch_size=4, image_size=32, workers=(0,),
                                     batches=2))
    assert {m.key["loader"] for m in out.measurements if "loader" in m.key} == {"dali_cpu"}
    assert "torchvision workers=0 skipped, because the time budget ran out" in out.notes
    (best,) = [m for m in out.measurements if m.metric == "best_throughput"]
    assert best.context["loader"] == "dali_cpu" and "not_measured" not in best.context


def test_probe_stops_a_configuration_that_overruns_its_share(tiny):
    ticks = iter(range(0, 10_000, 10))  # every reading of the clock is 10 s later
    c, _ = ctx(tiny, budget=30.0, clock=lambda: float(next(ticks)))
    out = dataloader.run(c, resolved("dataloader", loaders=("torchvision",), batch_size=4,
                                             image_size=32, workers=(0,), batches=5))
    (m,) = [m for m in out.measurements if m.metric == "throughput"]
    assert m.context["stopped_by"] == "budget" and m.context["batches"] == 2


def test_probe_skips_what_the_budget_no_longer_allows(tiny):
    c, _ = ctx(tiny, budget=0.0)
    with pytest.raises(ProbeSkipped, match="time budget ran out"):
        dataloader.run(c, resolved("dataloader", loaders=("torchvision",), batch_size=4,
                                           image_size=32, workers=(0, 1), batches=2))


def test_auto_workers_sweep_up_to_the_cores():
    assert auto_workers(8, quick=False) == (0, 1, 2, 4, 8)
    assert auto_workers(6, quick=False) == (0, 1, 2, 4, 6)
    assert auto_workers(1, quick=False) == (0, 1)
    assert auto_workers(8, quick=True) == (8,)
    # resolved from the machine's facts, before the probe runs
    assert resolved("dataloader", quick=False, facts={"usable_cores": 6}).workers == (
        0, 1, 2, 4, 6)


def test_the_dali_wheel_named_matches_torchs_cuda_major(monkeypatch):
    from benchbench.probes._loaders import dali_wheel

    assert dali_wheel("13.0") == "nvidia-dali-cuda130"  # torch 2.9+ from PyPI, the GPU box
    assert dali_wheel("12.8") == "nvidia-dali-cuda120"
    assert dali_wheel("") == "nvidia-dali-cuda130"  # a CPU torch: the CPU pipeline runs on it
    # A CUDA 12 wheel beside a CUDA 13 torch: dali_gpu is refused, with the fix.
    from benchbench.machine import environment

    monkeypatch.setattr(_loaders.torch.version, "cuda", "13.0")
    monkeypatch.setattr(environment, "_version",
                        lambda name: "1.52" if name == "nvidia-dali-cuda120" else None)
    assert _loaders.dali_mismatch() == (
        "the installed nvidia-dali-cuda120 is built for another CUDA than this torch's CUDA "
        "13.0: pip uninstall -y nvidia-dali-cuda120 && pip install nvidia-dali-cuda130")
    monkeypatch.setattr(environment, "_version",
                        lambda name: "1.52" if name == "nvidia-dali-cuda130" else None)
    assert _loaders.dali_mismatch() is None


def test_where_nvidia_publishes_no_dali_the_reason_says_so(monkeypatch):
    monkeypatch.setattr(_loaders.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(_loaders.platform, "machine", lambda: "arm64")
    assert dali_missing() == ("DALI is not installed: NVIDIA publishes it for Linux on x86_64 "
                              "and aarch64 only, and this is Darwin arm64")


def test_dali_is_part_of_the_default_install_where_nvidia_publishes_it():
    from pathlib import Path

    import tomllib
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    meta = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (dali,) = [Requirement(r) for r in meta["project"]["dependencies"]
               if r.startswith("nvidia-dali")]
    assert "dali" in meta["project"]["optional-dependencies"]  # kept for existing users
    # The default wheel is the one PyPI's torch (CUDA 13) needs; CUDA 12 has its extra.
    assert dali.name == _loaders.dali_wheel("13.0")
    extra = meta["project"]["optional-dependencies"]
    assert [Requirement(r).name for r in extra["dali-cuda12"]] == [_loaders.dali_wheel("12.8")]
    for system, machine, wanted in (("linux", "x86_64", True), ("linux", "aarch64", True),
                                    ("darwin", "arm64", False), ("win32", "AMD64", False)):
        env = {"sys_platform": system, "platform_machine": machine}
        assert Marker(str(dali.marker)).evaluate(env) is wanted, (system, machine)


def test_a_worker_killed_by_a_bus_error_gives_the_shm_fix_in_one_line():
    """A container's small /dev/shm kills DataLoader workers with SIGBUS: the probe says what
    happened and how to fix it, instead of failing with a traceback."""
    from fault_data import BusErrorImages

    from benchbench.probes._loaders import _TorchvisionLoader

    def make(kind, data, batch, workers, image, device):
        return _TorchvisionLoader(BusErrorImages(), batch, workers, device, seed=0)

    c, _ = ctx(budget=30.0)
    notes = []
    cfg = resolved("dataloader", loaders=("torchvision",), batch_size=4, workers=(2,),
                   batches=3, min_seconds=0)
    measured, _ = dataloader.sweep(c, cfg, [("torchvision", 2)], "fault", "cpu", 2, notes,
                                   make_loader=make)
    assert measured == []
    (note,) = notes
    assert note.startswith("torchvision skipped, because it failed at workers=2: a loader "
                           "worker was killed by a bus error: the workers pass batches through "
                           "shared memory and /dev/shm has ")
    assert "--shm-size" in note and "\n" not in note
