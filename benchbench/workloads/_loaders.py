"""Build an ImageNet-style training input pipeline with torchvision or DALI, behind one interface.

`build_loader` returns a Loader: iterating it gives (images, labels) batches for as long as the
caller asks, images float32 NCHW normalized with the ImageNet mean and std, labels int64. It
cycles through the files, each pass in a fresh random order, so a loader is never limited by
the dataset's length: a set smaller than one batch still fills every batch, and a set of a few
batches never ends an epoch, which would idle most workers and stall at every restart while a
real training set keeps them busy. `stream(n)` gives n batches. The batches arrive on
`Loader.output_device`: the GPU for dali_gpu, else the CPU (in pinned memory for torchvision
when the device is CUDA, ready for a non_blocking copy). A Loader releases its worker
processes or DALI pipeline on `close()` or at the end of a `with` block.

Each loader runs the pipeline the way its own documentation recommends, so that the comparison
is between what a user would really deploy:
- torchvision: ImageFolder + DataLoader, PIL decode, RandomResizedCrop, RandomHorizontalFlip,
  ToTensor, Normalize (the torchvision ImageNet reference recipe);
- DALI: readers.file → decoders.image_random_crop (decode fused with RandomResizedCrop's crop,
  so only the crop window is decoded) → resize → crop_mirror_normalize with a coin-flip mirror
  (the flip fused into the normalisation), as in NVIDIA's ResNet50 DALI example. dali_cpu
  decodes on the CPU with no GPU needed; dali_gpu decodes with nvJPEG ("mixed").

Corrupt images: the torchvision loader skips a file it cannot decode, warns once per file and
counts it in `Loader.corrupt` (unique files seen so far; `corrupt_files` maps path to reason),
so a batch may hold fewer than batch_size images. DALI cannot skip a sample inside its C++
pipeline, so a decode error ends the loader with a LoaderError that names the cause.
"""

from __future__ import annotations

import multiprocessing
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torchvision import transforms
from torchvision.datasets import ImageFolder

KINDS = ("torchvision", "dali_cpu", "dali_gpu")
MEAN = (0.485, 0.456, 0.406)  # ImageNet channel mean and std, as torchvision's reference uses
STD = (0.229, 0.224, 0.225)
DALI_MISSING = "DALI is not installed; pip install 'benchbench[dali]'"
_MAX_WARNINGS = 5  # a dataset full of broken files should not bury the output in warnings


class LoaderError(Exception):
    """A loader that cannot be built or that failed while loading; the message says why."""


def dali_available() -> str | None:
    """None when DALI and its PyTorch plugin import, else the reason they do not."""
    try:
        import nvidia.dali  # noqa: F401
        import nvidia.dali.plugin.pytorch  # noqa: F401
    except ImportError:
        return DALI_MISSING
    except Exception as exc:  # a broken install raises anything from its native libraries
        return f"DALI does not import: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    return None


def unavailable(kind: str, device: str) -> str | None:
    """Why `kind` cannot run here for `device` ('cpu' or 'cuda:N'), or None when it can."""
    if kind not in KINDS:
        return f"unknown loader {kind!r}; choose from {', '.join(KINDS)}"
    if kind == "torchvision":
        return None
    if kind == "dali_gpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        return "it decodes on a CUDA GPU and this run uses none"
    return dali_available()


class Loader:
    """One configured input pipeline. Iterate for endless batches; `stream(n)` for n."""

    kind: str
    batch_size: int
    workers: int
    threads: int  # CPU processes or threads decoding: what "per core" figures divide by
    output_device: str  # where the images arrive: "cpu", or "cuda:N" for dali_gpu
    images: int  # files in one pass over the dataset

    def __init__(self) -> None:
        self.corrupt_files: dict[str, str] = {}

    @property
    def corrupt(self) -> int:
        return len(self.corrupt_files)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        raise NotImplementedError

    def stream(self, batches: int | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """`batches` batches (endless when None)."""
        for given, batch in enumerate(self):
            if batches is not None and given >= batches:
                return
            yield batch

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_loader(kind: str, data_dir: str, batch_size: int, workers: int, image_size: int,
                 device: str, seed: int = 0) -> Loader:
    """A Loader of `kind` over the ImageFolder at data_dir. Raises LoaderError when it cannot
    run here (the reason says why) or the dataset holds no image."""
    reason = unavailable(kind, device)
    if reason:
        raise LoaderError(reason)
    if kind == "torchvision":
        return _TorchvisionLoader(data_dir, batch_size, workers, image_size, device, seed)
    return _DaliLoader(kind, data_dir, batch_size, workers, image_size, device, seed)


# --- torchvision --------------------------------------------------------------------------------

class _SafeImageFolder(ImageFolder):
    """ImageFolder whose failed samples come back as (None, path, reason), not raised."""

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        path, target = self.samples[index]
        try:
            return self.transform(self.loader(path)), target
        # PIL raises OSError for truncated data, SyntaxError/ValueError for broken headers.
        except (OSError, SyntaxError, ValueError) as exc:
            return None, path, f"{type(exc).__name__}: {exc}"


def _collate(items: list[tuple[Any, ...]]) -> tuple[torch.Tensor, torch.Tensor, list]:
    """Stack the decoded samples; hand the failures (path, reason) back beside the batch."""
    good = [it for it in items if it[0] is not None]
    failed = [(it[1], it[2]) for it in items if it[0] is None]
    if not good:
        return torch.empty(0), torch.empty(0, dtype=torch.int64), failed
    images = torch.stack([it[0] for it in good])
    return images, torch.tensor([it[1] for it in good], dtype=torch.int64), failed


class _Cycle(torch.utils.data.Sampler):
    """Indices of `n` samples, pass after pass, each pass a fresh random order: as many as
    the loader is asked for, every sample once per pass, as a training epoch reads them."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed

    def __iter__(self) -> Iterator[int]:
        gen = torch.Generator().manual_seed(self.seed)
        while True:
            yield from torch.randperm(self.n, generator=gen).tolist()

    def __len__(self) -> int:
        return sys.maxsize  # endless; DataLoader only needs an int


def _worker_context() -> Any:
    """forkserver, not fork: a worker forked while a native thread of this process (DALI's,
    OpenMP's) holds a lock deadlocks on that lock. forkserver is Python 3.14's default. Its
    server imports torch and torchvision once, so that each worker starts in milliseconds
    rather than importing them again (~4 s on a small machine); the preload list is only read
    when this process starts its forkserver, so setting it again later changes nothing."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torchvision", __name__])
    return ctx


class _TorchvisionLoader(Loader):
    def __init__(self, data_dir: str, batch_size: int, workers: int, image_size: int,
                 device: str, seed: int) -> None:
        super().__init__()
        self.kind, self.batch_size, self.workers = "torchvision", batch_size, workers
        self.threads = max(1, workers)  # workers=0 decodes in the main process: one core
        self.output_device = "cpu"
        transform = transforms.Compose([
            transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        try:
            dataset = _SafeImageFolder(data_dir, transform=transform, allow_empty=True)
        except (OSError, RuntimeError) as exc:
            raise LoaderError(f"torchvision cannot read {data_dir}: {exc}") from None
        if len(dataset) == 0:
            raise LoaderError(f"{data_dir} holds no image torchvision can load")
        self.images = len(dataset)
        if workers > 0 and multiprocessing.current_process().daemon:
            # multiprocessing refuses children to a daemonic process: say so, not assert.
            raise LoaderError("DataLoader workers cannot start in a daemonic process; the "
                              "probe must run in a non-daemonic one")
        self._loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, sampler=_Cycle(len(dataset), seed),
            num_workers=workers, collate_fn=_collate, pin_memory=device.startswith("cuda"),
            persistent_workers=workers > 0,
            multiprocessing_context=_worker_context() if workers > 0 else None)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels, failed in self._loader:
            for path, reason in failed:
                if path not in self.corrupt_files and self.corrupt < _MAX_WARNINGS:
                    warnings.warn(f"skipped corrupt image {path}: {reason}", stacklevel=2)
                self.corrupt_files.setdefault(path, reason)
            if len(images):
                yield images, labels

    def close(self) -> None:
        # Persistent workers live as long as the DataLoader's cached iterator; shut them down
        # now rather than whenever the garbage collector gets to it.
        it = getattr(self._loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self._loader._iterator = None


# --- DALI ---------------------------------------------------------------------------------------

class _DaliLoader(Loader):
    def __init__(self, kind: str, data_dir: str, batch_size: int, workers: int,
                 image_size: int, device: str, seed: int) -> None:
        super().__init__()
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator

        gpu = kind == "dali_gpu"
        device_id = int(device.split(":")[1]) if gpu and ":" in device else (0 if gpu else None)
        self.kind, self.batch_size, self.workers = kind, batch_size, workers
        self.threads = max(1, workers)  # DALI has no processes: workers sets its CPU threads
        self.output_device = f"cuda:{device_id}" if gpu else "cpu"

        @pipeline_def(batch_size=batch_size, num_threads=self.threads, device_id=device_id,
                      seed=seed)
        def pipe() -> tuple[Any, Any]:
            jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True,
                                            name="Reader")
            # The same crop distribution as torchvision's RandomResizedCrop defaults.
            images = fn.decoders.image_random_crop(
                jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
                random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
            images = fn.resize(images, resize_x=image_size, resize_y=image_size)
            images = fn.crop_mirror_normalize(
                images, dtype=types.FLOAT, output_layout="CHW",
                mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                mirror=fn.random.coin_flip(probability=0.5))
            return images, (labels.gpu() if gpu else labels)

        try:
            self._pipe = pipe()
            self._pipe.build()
            self.images = self._pipe.epoch_size("Reader")
            # No reader_name and no size: the iterator runs on across epochs, as DALI's reader
            # does, filling a batch from the next pass when the files run out.
            self._it = DALIGenericIterator(self._pipe, ["images", "labels"], size=-1)
        except RuntimeError as exc:
            self.close()
            raise LoaderError(f"DALI failed to start: {_first_line(exc)}") from None

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        it = iter(self._it)
        while True:
            try:
                out = next(it)
            except StopIteration:
                return
            except RuntimeError as exc:  # a corrupt file: DALI stops the whole pipeline
                raise LoaderError(f"DALI stopped: {_first_line(exc)}") from None
            batch = out[0]
            yield batch["images"], batch["labels"].reshape(-1).long()

    def close(self) -> None:
        # DALI frees the pipeline's threads and buffers with the last reference to it.
        self._it = None
        self._pipe = None


_DALI_BOILERPLATE = ("Critical error in pipeline", "Current pipeline object", "which was used",
                     "File ", "encountered", "[/", "Error in ")


def _first_line(exc: BaseException) -> str:
    """DALI wraps the cause ("Failed to decode sample #0 : class_0/x.jpg") in lines of context
    and C++ traces; keep the line that says what went wrong."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.startswith("Failed")]
    rest = [ln for ln in lines if not ln.startswith(_DALI_BOILERPLATE)]
    return (causes or rest or lines or [type(exc).__name__])[0]
