"""The data-path probes' dataset: generate a synthetic ImageFolder of JPEGs, or scan the user's.

The synthetic set imitates ImageNet where a data loader feels it: JPEG files (decode cost grows
with pixels and with compressed bytes), sides spread log-normally around ~500x375 with mixed
aspect ratios, and a mean file size near MLPerf Storage's 114,660 B per ResNet50 sample. The
content is textured (1/f noise, shapes, grain) because flat random colours compress to a few KB
and decode far faster than photographs.

It lives under <cache>/datasets/<hash of its parameters> and is generated once: a later run with
the same parameters reuses it. It is written into a temporary sibling folder and renamed into
place when complete, so an interrupted run never leaves a half dataset that looks complete.
This module does not import torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from benchbench.core.names import counted, first_of
from benchbench.machine.environment import usable_cores
from benchbench.probes._config import DEFAULT_IMAGES, QUICK_IMAGES, DatasetConfig
from benchbench.probes.api import ProbeFailed

# torchvision's IMG_EXTENSIONS: the files ImageFolder (and DALI's file reader) will load.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
MANIFEST = "benchbench-dataset.json"
# Bump when the generated content changes, so an old cached dataset is not reused as if equal.
GENERATOR_VERSION = 1
# With _render's content and mean_side 433, the mean file over 400 images is 105 kB at quality
# 89, 110.5 kB at 90 and 115 kB at 91 (medians ~12% lower: large images form a long tail, as
# in ImageNet). Flickr-era photos, ImageNet's source, are mostly saved at quality 90-96.
JPEG_QUALITY = 90
SIDE_SIGMA = 0.25  # log-normal spread of the geometric-mean side
# (width, height) ratios and how often each is drawn; ImageNet is mostly 4:3 landscape.
ASPECTS = ((4 / 3, 0.45), (3 / 4, 0.2), (1.0, 0.15), (16 / 9, 0.1), (3 / 2, 0.1))


class DatasetError(ValueError):
    """A dataset that cannot be used: reported to the user in one line with exit code 2."""


class DatasetVanished(ProbeFailed):
    """The run's dataset, scanned with its images before the first probe, removed or emptied
    while the run reads it: the probe reading it fails with this one line, and the others and
    what they measured stay (a refusal with exit 2 would discard them)."""


def vanished(what: str) -> DatasetVanished:
    """The one line: what went ('the dataset D was removed') and what to do."""
    return DatasetVanished(f"{what} during the run: put the dataset back and leave it in place "
                           "until the run ends, then run again")


def first_gone(paths: Iterable[str]) -> str | None:
    """The first path that no longer exists (a dangling link still exists: the scan left it
    out, it did not vanish)."""
    return next((p for p in paths if not os.path.lexists(p)), None)


def cache_root() -> Path:
    """$BENCHBENCH_CACHE, else $XDG_CACHE_HOME/benchbench, else ~/.cache/benchbench."""
    if os.environ.get("BENCHBENCH_CACHE"):
        return Path(os.environ["BENCHBENCH_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "benchbench"
    return Path.home() / ".cache" / "benchbench"


def resolve_num_images(cfg: DatasetConfig, quick: bool) -> int:
    return cfg.num_images if cfg.num_images is not None else (
        QUICK_IMAGES if quick else DEFAULT_IMAGES)


def ensure_synthetic(cfg: DatasetConfig, quick: bool,
                     progress: Callable[[int, int], None] | None = None,
                     processes: int | None = None, root: Path | None = None) -> dict[str, Any]:
    """The synthetic dataset's facts, generating it first unless a complete one exists.

    progress(done, total) follows the generation; `processes` caps its worker processes (auto:
    the usable cores); `root` replaces cache_root(). Raises DatasetError when the cache cannot
    be written.
    """
    params = {"num_images": resolve_num_images(cfg, quick), "num_classes": cfg.num_classes,
              "mean_side": cfg.mean_side, "seed": cfg.seed, "generator": GENERATOR_VERSION,
              "jpeg_quality": JPEG_QUALITY}
    if cfg.num_images is None and params["num_images"] < DEFAULT_IMAGES:
        params["sample_of"] = DEFAULT_IMAGES  # --quick's own set: see picked()
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    parent = (root or cache_root()) / "datasets"
    final = parent / digest
    facts = _complete(final, params)
    reused = facts is not None
    if facts is None:
        try:
            _build(parent, digest, params, progress, processes)
        except OSError as exc:  # a full disk or a read-only cache: the user can fix that
            raise DatasetError(f"cannot write the synthetic dataset under {parent}: "
                               f"{exc.strerror or exc}") from None
        facts = _complete(final, params)
        if facts is None:
            raise DatasetError(f"{final}: the generated dataset is incomplete")
    return {"source": "generated", "path": str(final), "reused": reused, **facts,
            "params": params, "hash": digest}


def _build(parent: Path, digest: str, params: dict[str, Any],
           progress: Callable[[int, int], None] | None, processes: int | None) -> None:
    """Generate into a temporary sibling, then rename it to parent/digest in one step."""
    final = parent / digest
    parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(parent, digest)
    if final.exists():  # present but incomplete or foreign: it is our cache entry, redo it
        shutil.rmtree(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest}.tmp-{os.getpid()}-", dir=parent))
    try:
        _generate(tmp, params, progress, processes)
        (tmp / MANIFEST).write_text(json.dumps({"params": params}, indent=1) + "\n")
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process finished the same dataset first: use theirs.
            if _complete(final, params) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scan_imagefolder(path: str | Path) -> dict[str, Any]:
    """Facts about a user's ImageFolder dataset (<dir>/<class>/<image>); never writes to it.
    Raises DatasetError unless at least half of its class folders hold image files: a folder
    such as a home directory, whose sub-folders are mostly something else, is no training set."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetError(f"{p}: no such directory")
    if not p.is_dir():
        raise DatasetError(f"{p}: not a directory")
    try:
        entries = list(os.scandir(p))
    except OSError as exc:
        raise DatasetError(f"{p}: cannot read: {exc.strerror}") from None
    if not entries:
        raise DatasetError(f"{p}: the directory is empty")
    per_class = _sizes_per_class(p)
    empty = sorted(name for name, sizes in per_class.items() if not sizes)
    if len(empty) * 2 > len(per_class) or not per_class:
        raise DatasetError(f"{p}: not an ImageFolder dataset: {_why_not(entries, empty)}"
                           f"expected <dir>/<class>/<image> with "
                           f"{', '.join(IMAGE_EXTENSIONS[:3])} or similar files")
    return {"source": "user", "path": str(p.resolve()), **_facts(per_class)}


def _why_not(entries: list[os.DirEntry[str]], empty: list[str]) -> str:
    """What the folder holds instead of class folders of images, ending in '; ' (or '')."""
    loose = sum(1 for e in entries if e.is_file() and _is_image(e.name))
    hidden = sorted(e.name for e in entries if e.is_dir() and _is_hidden(e.name))
    folders = sum(1 for e in entries if e.is_dir() and not _is_hidden(e.name))
    said = []
    if loose or not folders:
        said.append(f"found {counted(loose, 'image file')} but no class folders" if loose
                    else "no class folders")
    if empty and len(empty) == folders:
        said.append(f"its one folder ({empty[0]}) holds no image" if folders == 1 else
                    f"none of its {folders} folders ({first_of(empty, 3)}) holds an image")
    elif empty:
        said.append(f"{len(empty)} of its {folders} folders ({first_of(empty, 3)}) hold no "
                    "image")
    if hidden:
        said.append(f"hidden folders ({first_of(hidden, 3)}) are never classes")
    return "; ".join(said) + "; " if said else ""


# --- the files a loader reads ----------------------------------------------------------------

# A loader measures its rate on a sample of a large dataset: enough distinct files that its
# workers never read the same few, few enough that checking their headers stays quick.
MAX_LOADER_FILES = 10_000


@dataclass(frozen=True)
class Samples:
    """The image files every loader of a run reads, with their class labels: one list, so
    that torchvision and DALI count the same files. Files whose header no image library
    recognises (empty, text, a wrong extension) are left out and listed in `rejected`; a file
    that passes this check and still fails to decode (truncated) is skipped and counted by
    each loader as it meets it."""

    root: str
    files: tuple[str, ...]
    labels: tuple[int, ...]
    classes: int
    in_dataset: int  # image files in the dataset; `files` is an even sample of at most the limit
    kinds: dict[str, int] = field(default_factory=dict)  # format -> files: {"JPEG": 20, ...}
    rejected: dict[str, str] = field(default_factory=dict)  # path -> why it is no image


def _image_paths(root: Path) -> tuple[list[tuple[str, int]], int]:
    """(path, class index) of every image file, found the way ImageFolder finds them: class
    folders in sorted order, files with an image extension, links followed; hidden folders
    (.cache, .git) are no classes."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not _is_hidden(e.name))
    out = []
    for label, name in enumerate(classes):
        for dirpath, dirnames, files in os.walk(root / name, followlinks=True):
            dirnames.sort()
            out += [(os.path.join(dirpath, f), label) for f in sorted(files) if _is_image(f)]
    return out, len(classes)


def _format(path: str) -> tuple[str | None, str | None]:
    """(the image format its header names, None) or (None, why it is no image)."""
    try:
        with Image.open(path) as im:
            return im.format or "unknown", None
    except OSError as exc:  # UnidentifiedImageError is an OSError; so is a read failure
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, (f"{type(exc).__name__}: {first}" if "cannot identify" not in first
                      else "not an image any decoder here recognises")


def loader_samples(root: str | os.PathLike[str], limit: int = MAX_LOADER_FILES) -> Samples:
    """The files the loaders read: an even sample of at most `limit` image files of the
    dataset (every class represented), each header checked. Reads headers only; writes
    nothing."""
    found, classes = _image_paths(Path(root))
    picked = found if len(found) <= limit else \
        [found[i * len(found) // limit] for i in range(limit)]
    files, labels, rejected = [], [], {}
    kinds: dict[str, int] = {}
    for path, label in picked:
        kind, why = _format(path)
        if kind is None:
            rejected[path] = why or "unreadable"
            continue
        files.append(path)
        labels.append(label)
        kinds[kind] = kinds.get(kind, 0) + 1
    return Samples(str(root), tuple(files), tuple(labels), classes, len(found), kinds, rejected)


def run_samples(root: str) -> Samples:
    """loader_samples of the run's dataset, which held images when the run began: raises
    DatasetVanished when it, or the files it listed, are gone now."""
    try:
        samples = loader_samples(root)
    except FileNotFoundError:
        raise vanished(f"the dataset {root} was removed") from None
    gone = first_gone(samples.rejected)
    if gone:
        raise vanished(f"the dataset's file {gone} was removed")
    if not samples.in_dataset:
        raise vanished(f"the dataset {root} lost all its images")
    return samples


# --- scanning ---------------------------------------------------------------------------------

def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _is_hidden(name: str) -> bool:
    """A hidden folder (.cache, .git, a generator's .tmp-): never a class."""
    return name.startswith(".")


def _sizes_per_class(root: Path) -> dict[str, list[int]]:
    """File sizes of the images under each class folder, found the way ImageFolder finds them."""
    out: dict[str, list[int]] = {}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.is_dir() or _is_hidden(entry.name):
            continue
        sizes = out.setdefault(entry.name, [])
        for dirpath, _, files in os.walk(entry.path, followlinks=True):
            for name in files:
                if _is_image(name):
                    try:
                        sizes.append(os.stat(os.path.join(dirpath, name)).st_size)
                    except OSError:
                        continue  # a dangling link: the loaders would skip it too
    return out


def _facts(per_class: dict[str, list[int]]) -> dict[str, Any]:
    sizes = [s for v in per_class.values() for s in v]
    return {"num_images": len(sizes), "num_classes": sum(1 for v in per_class.values() if v),
            "empty_classes": sum(1 for v in per_class.values() if not v),
            "mean_file_size": statistics.fmean(sizes),
            "median_file_size": float(statistics.median(sizes)), "total_bytes": sum(sizes)}


def _complete(folder: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    """The folder's facts when it holds the whole dataset generated with `params`, else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("params") != params:
        return None
    facts = _facts(_sizes_per_class(folder))
    return facts if facts["num_images"] == params["num_images"] else None


def _remove_stale_temps(parent: Path, digest: str) -> None:
    """Temp folders left by a crashed generator (its pid is gone); a live one is left alone."""
    for tmp in parent.glob(f".{digest}.tmp-*"):
        try:
            pid = int(tmp.name.split(".tmp-")[1].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            continue


# --- generation -------------------------------------------------------------------------------

def picked(params: dict[str, Any]) -> list[int]:
    """The indices of the images the set holds: 0 … num_images − 1, or, for a set that is a
    sample of a larger one (`sample_of`: --quick's 256 of the default's 2,000), an even sample
    of that set's images by pixel count, so that the smaller set costs what the larger costs to
    decode, image for image. Its first 256 had 3.6% fewer pixels than all 2,000, and --quick's
    loaders read 7% faster than the default's on the same machine (median of 20 interleaved
    runs, issue 70); the even sample's pixels are within 0.05% of the whole's."""
    total = params["num_images"]
    whole = params.get("sample_of")
    if not whole:
        return list(range(total))
    pixels = [math.prod(_image_shape(np.random.default_rng([params["seed"], i]),
                                     params["mean_side"])) for i in range(whole)]
    by_size = sorted(range(whole), key=pixels.__getitem__)
    # the middle of each of `total` equal slices of the size order
    return sorted(by_size[(2 * k + 1) * whole // (2 * total)] for k in range(total))


def _generate(out: Path, params: dict[str, Any],
              progress: Callable[[int, int], None] | None, processes: int | None) -> None:
    total = params["num_images"]
    for c in range(params["num_classes"]):
        (out / _class_name(c)).mkdir()
    # the class by the image's place in the set, so that a small sample fills every class
    tasks = [(str(out), i, params["seed"], params["mean_side"], k % params["num_classes"])
             for k, i in enumerate(picked(params))]
    report = progress or (lambda done, total: None)
    report(0, total)
    # Spawning a worker costs ~0.3 s of imports: not worth it for a few dozen images. A
    # daemonic process may not have children at all.
    procs = min(processes or usable_cores(), max(1, total // 32))
    if procs <= 1 or multiprocessing.current_process().daemon:
        for done, task in enumerate(tasks, 1):
            _write_image(task)
            report(done, total)
        return
    # spawn, not fork: the caller may hold threads (torch, progress bars) that fork would copy
    # in whatever state they were in. A spawned worker re-imports the caller's __main__, which
    # fails for a script read from stdin: the pool breaks, and the rest is made here instead.
    chunks = [tasks[k:k + 8] for k in range(0, total, 8)]
    finished: set[int] = set()
    done = 0
    try:
        with ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_write_chunk, chunk): n for n, chunk in enumerate(chunks)}
            for fut in as_completed(futures):
                fut.result()
                finished.add(futures[fut])
                done += len(chunks[futures[fut]])
                report(done, total)
    except BrokenProcessPool:
        for n in sorted(set(range(len(chunks))) - finished):
            _write_chunk(chunks[n])
            done += len(chunks[n])
            report(done, total)


def _write_chunk(tasks: list[tuple[str, int, int, int, int]]) -> None:
    for task in tasks:
        _write_image(task)


def _class_name(c: int) -> str:
    return f"class_{c:03d}"


def _image_shape(rng: np.random.Generator, mean_side: int) -> tuple[int, int]:
    """(width, height): a log-normal side around mean_side and a drawn aspect ratio."""
    side = mean_side * math.exp(rng.normal(0.0, SIDE_SIGMA))
    ratios, weights = zip(*ASPECTS, strict=True)
    ratio = ratios[rng.choice(len(ratios), p=np.array(weights) / sum(weights))]
    return max(16, round(side * math.sqrt(ratio))), max(16, round(side / math.sqrt(ratio)))


def _write_image(task: tuple[str, int, int, int, int]) -> None:
    """Top-level so that a spawned pool can import it: render and save image i of the set
    into class folder `label`."""
    out, i, seed, mean_side, label = task
    rng = np.random.default_rng([seed, i])  # per image: the same files whatever the pool size
    w, h = _image_shape(rng, mean_side)
    path = Path(out) / _class_name(label) / f"img_{i:06d}.jpg"
    _render(rng, w, h).save(path, "JPEG", quality=JPEG_QUALITY)


def _pink_noise(rng: np.random.Generator, w: int, h: int, alpha: float) -> np.ndarray:
    """Unit-variance noise with octave amplitudes ~ (scale)^alpha, built coarse to fine.

    Photographs have roughly equal energy per octave (alpha ~ 0); larger alpha is smoother.
    """
    sizes = [(w, h)]
    while min(sizes[-1]) > 4:
        sizes.append((max(2, sizes[-1][0] // 2), max(2, sizes[-1][1] // 2)))
    sizes.reverse()
    acc = rng.standard_normal(sizes[0][::-1], dtype=np.float32)
    for level, (sw, sh) in enumerate(sizes[1:], 1):
        up = np.asarray(Image.fromarray(acc, "F").resize((sw, sh), Image.Resampling.BICUBIC))
        acc = up + np.float32(0.5 ** (alpha * level)) * rng.standard_normal((sh, sw),
                                                                             dtype=np.float32)
    return (acc / max(float(acc.std()), 1e-6)).astype(np.float32)


def _render(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A photo-like picture: textured regions with soft edges over a lit, textured background."""
    regions = int(rng.integers(4, 16))
    labels = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(labels)
    for k in range(1, regions):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.05, 0.5) * max(w, h)
        if rng.random() < 0.5:
            ry = r * rng.uniform(0.3, 1.0)
            draw.ellipse([cx - r, cy - ry, cx + r, cy + ry], fill=k)
        else:
            n = int(rng.integers(3, 8))
            ang = np.sort(rng.uniform(0, 2 * np.pi, n))
            rad = r * rng.uniform(0.4, 1.0, n)
            draw.polygon(list(zip(cx + rad * np.cos(ang), cy + rad * np.sin(ang), strict=True)),
                         fill=k)
    lab = np.asarray(labels)
    colour = rng.uniform(40, 215, (regions, 3)).astype(np.float32)
    shading = rng.uniform(10, 40, regions).astype(np.float32)  # large-scale light per region
    texture = rng.uniform(12, 60, regions).astype(np.float32)  # fine detail: fur, leaves, grain
    # Soft region edges, as out-of-focus or anti-aliased edges are in photographs.
    base = np.asarray(Image.fromarray(colour[lab].astype(np.uint8), "RGB")
                      .filter(ImageFilter.BoxBlur(1)), dtype=np.float32)
    angle, strength = rng.uniform(0, 2 * np.pi), rng.uniform(-50, 50)
    light = (np.float32(np.cos(angle) * strength / w) * np.arange(w, dtype=np.float32)[None, :]
             + np.float32(np.sin(angle) * strength / h) * np.arange(h, dtype=np.float32)[:, None])
    lum = (shading[lab] * _pink_noise(rng, w, h, 1.0) + texture[lab] * _pink_noise(rng, w, h, 0.0)
           + light + 3.0 * rng.standard_normal((h, w), dtype=np.float32))
    # Colour detail at a quarter of the resolution: JPEG's 4:2:0 keeps little more than that.
    cw, ch = max(2, w // 4), max(2, h // 4)
    chroma = np.stack([np.asarray(Image.fromarray(_pink_noise(rng, cw, ch, 0.5), "F")
                                  .resize((w, h), Image.Resampling.BILINEAR))
                       for _ in range(2)], -1)
    tint = chroma @ np.array([[12, -6, -6], [0, 10, -10]], dtype=np.float32)
    rgb = base + lum[..., None] + tint
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
