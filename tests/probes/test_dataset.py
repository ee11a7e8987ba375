"""The synthetic ImageFolder dataset (real JPEGs, ImageNet-like sizes) and the scan of a user's."""

import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from benchbench.probes import dataset
from benchbench.probes.dataset import (
    DatasetConfig,
    DatasetError,
    cache_root,
    ensure_synthetic,
    scan_imagefolder,
)

TINY = DatasetConfig(num_images=24, num_classes=3, mean_side=64)


def files_of(path: str) -> dict[str, bytes]:
    root = Path(path)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jpg"))}


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "bb"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "bb"
    monkeypatch.delenv("BENCHBENCH_CACHE")
    assert cache_root() == tmp_path / "xdg" / "benchbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "benchbench"


def test_generated_images_look_like_imagenet(tmp_path):
    seen = []
    cfg = DatasetConfig(num_images=40, num_classes=4, mean_side=433)
    facts = ensure_synthetic(cfg, quick=False, root=tmp_path, processes=1,
                             progress=lambda done, total: seen.append((done, total)))
    assert facts["source"] == "generated" and facts["reused"] is False
    assert facts["num_images"] == 40 and facts["num_classes"] == 4
    assert seen[0] == (0, 40) and seen[-1] == (40, 40)
    # MLPerf Storage's ResNet50 sample is 114,660 B; ImageNet's mean is ~110 kB.
    assert 80_000 <= facts["mean_file_size"] <= 140_000
    assert 60_000 <= facts["median_file_size"] <= 160_000
    root = Path(facts["path"])
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "class_000", "class_001", "class_002", "class_003"]
    shapes = []
    for p in root.rglob("*.jpg"):
        with Image.open(p) as img:
            assert img.format == "JPEG" and img.mode == "RGB"
            shapes.append(img.size)
    logs = [math.log(math.sqrt(w * h)) for w, h in shapes]
    assert abs(math.exp(statistics.fmean(logs)) / 433 - 1) < 0.15
    assert statistics.stdev(logs) > 0.1  # a spread of resolutions, not one size
    ratios = {round(w / h, 2) for w, h in shapes}
    assert len(ratios) >= 3 and any(r > 1.2 for r in ratios) and any(r < 0.9 for r in ratios)


def test_quick_and_default_sizes_are_resolved_before_hashing(tmp_path):
    assert dataset.resolve_num_images(DatasetConfig(), quick=True) == 256
    assert dataset.resolve_num_images(DatasetConfig(), quick=False) == 2000
    assert dataset.resolve_num_images(DatasetConfig(num_images=7), quick=True) == 7
    small = ensure_synthetic(DatasetConfig(num_images=256, mean_side=32), quick=False,
                             root=tmp_path, processes=1)
    again = ensure_synthetic(DatasetConfig(mean_side=32), quick=True, root=tmp_path)
    assert again["reused"] and again["hash"] == small["hash"]


def test_second_call_reuses_without_rewriting(tmp_path):
    first = ensure_synthetic(TINY, quick=False, root=tmp_path)
    mtimes = {p: p.stat().st_mtime_ns for p in Path(first["path"]).rglob("*")}
    calls = []
    second = ensure_synthetic(TINY, quick=False, root=tmp_path,
                              progress=lambda d, t: calls.append(d))
    assert second["reused"] is True and second["path"] == first["path"]
    assert {p: p.stat().st_mtime_ns for p in Path(first["path"]).rglob("*")} == mtimes
    assert calls == []
    assert {k: v for k, v in second.items() if k != "reused"} == {
        k: v for k, v in first.items() if k != "reused"}


def test_other_parameters_make_another_dataset(tmp_path):
    a = ensure_synthetic(TINY, quick=False, root=tmp_path)
    b = ensure_synthetic(DatasetConfig(num_images=24, num_classes=3, mean_side=64, seed=1),
                         quick=False, root=tmp_path)
    assert a["hash"] != b["hash"] and not b["reused"]
    assert files_of(a["path"]) != files_of(b["path"])


def test_same_seed_gives_the_same_files_whatever_the_pool(tmp_path):
    cfg = DatasetConfig(num_images=64, num_classes=2, mean_side=48, seed=5)
    serial = ensure_synthetic(cfg, quick=False, root=tmp_path / "a", processes=1)
    pooled = ensure_synthetic(cfg, quick=False, root=tmp_path / "b", processes=2)
    assert serial["hash"] == pooled["hash"]
    assert files_of(serial["path"]) == files_of(pooled["path"])
    assert len(files_of(serial["path"])) == 64


def test_an_interrupted_generation_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    real = dataset._write_image
    count = []

    def crash_after_five(task):
        count.append(1)
        if len(count) > 5:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(dataset, "_write_image", crash_after_five)
    with pytest.raises(KeyboardInterrupt):
        ensure_synthetic(TINY, quick=False, root=tmp_path, processes=1)
    assert list((tmp_path / "datasets").iterdir()) == []  # no final folder, temp cleaned up
    monkeypatch.setattr(dataset, "_write_image", real)
    facts = ensure_synthetic(TINY, quick=False, root=tmp_path)
    assert not facts["reused"] and facts["num_images"] == 24


def test_a_killed_generators_temp_folder_is_not_taken_for_the_dataset(tmp_path):
    digest = ensure_synthetic(TINY, quick=False, root=tmp_path / "probe")["hash"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    parent = tmp_path / "datasets"
    leftover = parent / f".{digest}.tmp-{dead.pid}-abc"
    (leftover / "class_000").mkdir(parents=True)
    (leftover / "class_000" / "img_000000.jpg").write_bytes(b"half")
    (leftover / dataset.MANIFEST).write_text("{}")
    facts = ensure_synthetic(TINY, quick=False, root=tmp_path)
    assert not facts["reused"] and facts["num_images"] == 24
    assert not leftover.exists()
    assert [p.name for p in parent.iterdir()] == [digest]


def test_a_final_folder_without_its_manifest_is_regenerated(tmp_path):
    first = ensure_synthetic(TINY, quick=False, root=tmp_path)
    (Path(first["path"]) / dataset.MANIFEST).unlink()
    assert ensure_synthetic(TINY, quick=False, root=tmp_path)["reused"] is False


def test_an_unwritable_cache_is_a_dataset_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(DatasetError, match="cannot write the synthetic dataset"):
        ensure_synthetic(TINY, quick=False, root=blocker)


def test_scan_of_a_good_imagefolder(tmp_path):
    facts = ensure_synthetic(TINY, quick=False, root=tmp_path)
    scanned = scan_imagefolder(facts["path"])
    assert scanned["source"] == "user"
    for k in ("num_images", "num_classes", "mean_file_size", "median_file_size",
              "total_bytes"):
        assert scanned[k] == facts[k]


def test_scan_counts_nested_images_and_ignores_other_files(tmp_path):
    for cls, names in {"cat": ["a.JPG", "sub/b.png", "notes.txt"], "dog": ["c.jpeg"],
                       "empty": []}.items():
        (tmp_path / cls).mkdir()
        for name in names:
            (tmp_path / cls / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / cls / name).write_bytes(b"x" * 100)
    (tmp_path / "README").write_text("hello")
    before = sorted(p for p in tmp_path.rglob("*"))
    facts = scan_imagefolder(tmp_path)
    assert facts["num_images"] == 3 and facts["num_classes"] == 2
    assert facts["empty_classes"] == 1 and facts["total_bytes"] == 300
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written


def test_hidden_folders_are_never_classes(tmp_path):
    """A dataset beside a .git or .cache folder: they hold no class, even with images in."""
    for d in ("cat", "dog", ".cache/x", ".git"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("cat/a.jpg", "dog/b.jpg", ".cache/x/c.jpg"):
        (tmp_path / f).write_bytes(b"x" * 100)
    facts = scan_imagefolder(tmp_path)
    assert facts["num_classes"] == 2 and facts["num_images"] == 2
    assert facts["empty_classes"] == 0
    samples = dataset.loader_samples(tmp_path)
    assert samples.classes == 2 and samples.in_dataset == 2


def _missing(p: Path) -> Path:
    return p / "missing"


def _a_file(p: Path) -> Path:
    (p / "f.jpg").write_bytes(b"x")
    return p / "f.jpg"


def _empty(p: Path) -> Path:
    return p


def _loose_images(p: Path) -> Path:
    for i in range(3):
        (p / f"{i}.jpg").write_bytes(b"x")
    return p


def _classes_without_images(p: Path) -> Path:
    for d in ("a", "b"):
        (p / d).mkdir()
    (p / "a" / "x.txt").write_text("x")
    return p


def _home_folder(p: Path) -> Path:
    """$HOME: dot folders only, one of them a cache full of images."""
    (p / ".cache" / "thumbs").mkdir(parents=True)
    (p / ".cache" / "thumbs" / "a.jpg").write_bytes(b"x" * 100)
    (p / ".bashrc").write_text("x")
    return p


def _mostly_other_folders(p: Path) -> Path:
    for d in ("bin", "docs", "src", "photos"):
        (p / d).mkdir()
    (p / "photos" / "a.jpg").write_bytes(b"x" * 100)
    (p / "docs" / "x.txt").write_text("x")
    return p


@pytest.mark.parametrize("make, says", [
    (_missing, "no such directory"),
    (_a_file, "not a directory"),
    (_empty, "the directory is empty"),
    (_loose_images, "found 3 image files but no class folders"),
    (_classes_without_images, "none of its 2 folders (a, b) holds an image"),
    (_home_folder, "no class folders; hidden folders (.cache) are never classes"),
    (_mostly_other_folders, "3 of its 4 folders (bin, docs, src) hold no image"),
])
def test_scan_refuses_what_is_not_an_imagefolder(tmp_path, make, says):
    with pytest.raises(DatasetError) as err:
        scan_imagefolder(make(tmp_path))
    assert says in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)
