"""Build an ImageNet-style training input pipeline with torchvision or DALI, behind one interface.

`build_loader` returns a Loader: iterating it gives (images, labels) batches for as long as the
caller asks, images float32 NCHW normalized with the ImageNet mean and std, labels int64. It
cycles through the files, each pass in a fresh random order, so a loader is never limited by
the dataset's length: a set smaller than one batch still fills every batch, and a set of a few
batches never ends an epoch, which would idle most workers and stall at every restart while a
real training set keeps them busy. `stream(n)` gives n batches. The batches arrive on
`Loader.output_device`: the GPU for dali_gpu, else the CPU (in pinned memory for torchvision
when the device is CUDA, ready for a non_blocking copy). A Loader releases its worker
processes or DALI pipeline on `close()` or at the end of a `with` block. torchvision's workers
stamp each batch when they finish it (`Loader.made`), so that a caller can tell the rate the
workers make batches at from the rate it takes them at, which a full prefetch buffer inflates.

Each loader runs the pipeline the way its own documentation recommends, so that the comparison
is between what a user would really deploy:
- torchvision: ImageFolder + DataLoader, PIL decode, RandomResizedCrop, RandomHorizontalFlip,
  ToTensor, Normalize (the torchvision ImageNet reference recipe);
- DALI: readers.file → decoders.image_random_crop (decode fused with RandomResizedCrop's crop,
  so only the crop window is decoded) → resize → crop_mirror_normalize with a coin-flip mirror
  (the flip fused into the normalisation), as in NVIDIA's ResNet50 DALI example. dali_cpu
  decodes on the CPU with no GPU needed; dali_gpu decodes with nvJPEG ("mixed").

Both loaders read the same list of files (dataset.loader_samples: image files whose header a
decoder recognises), so they count the same files whatever the folder holds: JPEG, PNG, WebP,
grayscale or CMYK images are decoded (to RGB), and a file that is no image is left out of the
list for both. A listed file that fails to decode (truncated) is skipped and counted in
`Loader.corrupt` (unique files seen so far; `corrupt_files` maps path to reason): torchvision
warns once per file and a batch may hold fewer than batch_size images; DALI, which cannot skip
a sample inside its C++ pipeline, drops the file its error names and rebuilds the pipeline
without it (an error that names no file ends the loader with a LoaderError). A listed file
that no longer exists is no corrupt file: the dataset is being removed, and the loader ends
with dataset.DatasetVanished, which fails the probe in one line.
"""

from __future__ import annotations

import multiprocessing
import platform
import shutil
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torchvision import transforms
from torchvision.datasets.folder import pil_loader

from benchbench.probes._devices import cuda_available, process_context
from benchbench.probes.dataset import Samples, first_gone, loader_samples, vanished

KINDS = ("torchvision", "dali_cpu", "dali_gpu")
MEAN = (0.485, 0.456, 0.406)  # ImageNet channel mean and std, as torchvision's reference uses
STD = (0.229, 0.224, 0.225)
# NVIDIA publishes DALI for Linux on these machines only (pyproject.toml installs it there).
DALI_MACHINES = ("x86_64", "aarch64")


def dali_wheel(torch_cuda: str | None = None) -> str:
    """The DALI wheel that matches this torch's CUDA major (a CPU-only torch takes the newest:
    its CPU pipeline runs on either)."""
    cuda = torch.version.cuda if torch_cuda is None else torch_cuda
    major = int(str(cuda).split(".")[0]) if cuda and str(cuda)[0].isdigit() else None
    return "nvidia-dali-cuda120" if major is not None and major < 13 else "nvidia-dali-cuda130"


def _cuda_text() -> str:
    return f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA (a CPU build)"


def dali_missing() -> str:
    """Why DALI is absent, and how to add it where it can be."""
    system, machine = platform.system(), platform.machine()
    if system == "Linux" and machine in DALI_MACHINES:
        return ("DALI is not installed (benchbench installs it on Linux x86_64 and aarch64; "
                f"it was left out here): pip install {dali_wheel()} (the wheel for this "
                f"torch's {_cuda_text()})")
    return (f"DALI is not installed: NVIDIA publishes it for Linux on x86_64 and aarch64 only, "
            f"and this is {system} {machine}")


def dali_mismatch() -> str | None:
    """Why the installed DALI wheel cannot feed this torch's GPU (its CUDA major differs),
    with the fix; None when they match or either is unknown."""
    from benchbench.machine.environment import dali_wheels

    installed = dali_wheels()
    wanted = dali_wheel()
    if not installed or wanted in installed or not torch.version.cuda:
        return None
    return (f"the installed {installed[0]} is built for another CUDA than this torch's "
            f"{_cuda_text()}: pip uninstall -y {installed[0]} && pip install {wanted}")


_MAX_WARNINGS = 5  # a dataset full of broken files should not bury the output in warnings


class LoaderError(Exception):
    """A loader that cannot be built or that failed while loading; the message says why."""


def shm_advice(path: str = "/dev/shm") -> str:
    """Why a loader worker died of a bus error, and the fix: DataLoader workers hand their
    batches over in shared memory, and a container's /dev/shm is 64 MB unless told otherwise."""
    try:
        usage = shutil.disk_usage(path)
        room = f"{path} has {usage.free / 2**20:,.0f} MiB free of {usage.total / 2**20:,.0f} MiB"
    except OSError:
        room = f"{path} cannot be read"
    return (f"a loader worker was killed by a bus error: the workers pass batches through "
            f"shared memory and {room}; give the container more (docker run --shm-size=16g, "
            "or a Kubernetes emptyDir with medium Memory on /dev/shm) or use fewer workers")


def dali_available() -> str | None:
    """None when DALI and its PyTorch plugin import, else the reason they do not."""
    try:
        import nvidia.dali  # noqa: F401
        import nvidia.dali.plugin.pytorch  # noqa: F401
    except ImportError:
        return dali_missing()
    except Exception as exc:  # a broken install raises anything from its native libraries
        return f"DALI does not import: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    return None


def dali_installed() -> str | None:
    """None when DALI's package is installed (found, not imported), else why not."""
    import importlib.util

    try:
        found = importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else dali_missing()


def unavailable(kind: str, device: str, imported: bool = True) -> str | None:
    """Why `kind` cannot run here for `device` ('cpu' or 'cuda:N'), or None when it can.
    With `imported` False, DALI need only be installed: importing it costs ~0.7 s on a small
    machine, and build_loader imports it (and says why when that fails) when it runs."""
    if kind not in KINDS:
        return f"unknown loader {kind!r}; choose from {', '.join(KINDS)}"
    if kind == "torchvision":
        return None
    if kind == "dali_gpu" and not (device.startswith("cuda") and cuda_available()):
        return "it decodes on a CUDA GPU and this run uses none"
    dali = dali_available() if imported else dali_installed()
    return dali or (dali_mismatch() if kind == "dali_gpu" else None)


class Loader:
    """One configured input pipeline. Iterate for endless batches; `stream(n)` for n."""

    kind: str
    batch_size: int
    workers: int
    threads: int  # CPU processes or threads decoding: what "per core" figures divide by
    # How batches arrive, for timing a steady state: `parallel` are made at once (one per
    # worker process; DALI's threads share one batch), and up to `prefetch` more can be ready
    # before they are asked for. After parallel + prefetch batches every worker has delivered
    # and whatever start-up queued has drained; a multiple of `parallel` then spans whole
    # rounds of the workers.
    parallel: int
    prefetch: int
    # How its decoders started: "fork", "forkserver" or "spawn" (worker processes), "threads"
    # (DALI's), "in this process" (no workers): kept beside its rate, as where two probes'
    # loaders disagree it is one difference between them.
    start: str
    output_device: str  # where the images arrive: "cpu", or "cuda:N" for dali_gpu
    images: int  # files in one pass over the dataset

    def __init__(self) -> None:
        self.corrupt_files: dict[str, str] = {}
        # (when its worker finished it, on `made_clock`; its images; which worker) for each
        # batch delivered so far, in delivery order; empty for a loader that cannot say
        # (DALI's threads).
        self.made: list[tuple[float, int, int]] = []

    @staticmethod
    def made_clock() -> float:
        """The clock `made` is stamped on: CLOCK_MONOTONIC, the same in every process of
        this machine, so a worker's stamp and this process's reading compare."""
        return time.monotonic()

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


def build_loader(kind: str, data: Samples | str, batch_size: int, workers: int,
                 image_size: int, device: str, seed: int = 0) -> Loader:
    """A Loader of `kind` over an ImageFolder's files (a folder, or the Samples a caller
    already listed for several loaders). Raises LoaderError when it cannot run here (the
    reason says why) or the dataset holds no image."""
    reason = unavailable(kind, device)
    if reason:
        raise LoaderError(reason)
    samples = data if isinstance(data, Samples) else _samples(data)
    if not samples.files:
        raise LoaderError(f"{samples.root} holds no image file a decoder recognises")
    if kind == "torchvision":
        return _TorchvisionLoader(_Files(samples, _transform(image_size)), batch_size, workers,
                                  device, seed)
    return _DaliLoader(kind, samples, batch_size, workers, image_size, device, seed)


def _samples(data_dir: str) -> Samples:
    try:
        return loader_samples(data_dir)
    except OSError as exc:
        raise LoaderError(f"cannot read {data_dir}: {exc.strerror or exc}") from None


# --- torchvision --------------------------------------------------------------------------------

class _Files(torch.utils.data.Dataset[tuple[Any, ...]]):
    """The listed files as ImageFolder serves them (PIL, converted to RGB); a file that fails
    to decode comes back as (None, path, reason), not raised."""

    def __init__(self, samples: Samples, transform: Any) -> None:
        self.files, self.labels, self.transform = samples.files, samples.labels, transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        path = self.files[index]
        try:
            return self.transform(pil_loader(path)), self.labels[index]
        # PIL raises OSError for truncated data, SyntaxError/ValueError for broken headers.
        except (OSError, SyntaxError, ValueError) as exc:
            return None, path, f"{type(exc).__name__}: {exc}"


def _collate(items: list[tuple[Any, ...]]
             ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[str, str]], tuple[float, int]]:
    """Stack the decoded samples; hand the failures (path, reason) back beside the batch, and
    when which worker finished it (Loader.made_clock; 0 for the main process)."""
    good = [it for it in items if it[0] is not None]
    failed = [(it[1], it[2]) for it in items if it[0] is None]
    info = torch.utils.data.get_worker_info()
    if not good:
        images, labels = torch.empty(0), torch.empty(0, dtype=torch.int64)
    else:
        images = torch.stack([it[0] for it in good])
        labels = torch.tensor([it[1] for it in good], dtype=torch.int64)
    return images, labels, failed, (time.monotonic(), info.id if info is not None else 0)


class _Cycle(torch.utils.data.Sampler[int]):
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
    """fork while this process has one thread (workers then start in milliseconds), else
    forkserver: a worker forked while a native thread of this process (DALI's, OpenMP's) holds
    a lock deadlocks on that lock. The forkserver imports torch and torchvision once, so that
    each worker starts in milliseconds rather than importing them again (~4 s on a small
    machine), but starting it costs that import once; the preload list is only read when this
    process starts its forkserver, so setting it again later changes nothing."""
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(["torch", "torchvision", __name__])
    return process_context(fallback=server)


# DataLoader's own default: each worker holds this many batches' indices at a time.
PREFETCH_FACTOR = 2
DALI_QUEUE_DEPTH = 2  # DALI's default, stated so that the prefetch count follows it


def batching(kind: str, workers: int) -> tuple[int, int]:
    """(how many batches a loader delivers at once, how many it holds ready ahead), which its
    warm-up and the pipeline's drain must cover. torchvision: worker i makes batches i, i + W,
    ..., W at once, and each holds PREFETCH_FACTOR batches' indices, so that many can be done
    before they are asked for. DALI: its threads share each batch; the pipeline runs
    DALI_QUEUE_DEPTH batches ahead, and the iterator takes one more when it is built."""
    if kind == "torchvision":
        return max(1, workers), PREFETCH_FACTOR * workers
    return 1, DALI_QUEUE_DEPTH + 1


def _transform(image_size: int) -> Any:
    return transforms.Compose([
        transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


class _TorchvisionLoader(Loader):
    """A DataLoader over any map-style dataset whose items are (image, label), or
    (None, path, reason) for a file that failed: the files of an ImageFolder here, or an
    emulated dataset (probes/emulated.py) whose items cost a known wall time."""

    def __init__(self, dataset: torch.utils.data.Dataset[tuple[Any, ...]], batch_size: int,
                 workers: int, device: str, seed: int, context: Any = None) -> None:
        super().__init__()
        self.kind, self.batch_size, self.workers = "torchvision", batch_size, workers
        self.threads = max(1, workers)  # workers=0 decodes in the main process: one core
        self.parallel, self.prefetch = batching(self.kind, workers)
        self.output_device = "cpu"
        self.images = len(dataset)  # type: ignore[arg-type]
        if workers > 0 and multiprocessing.current_process().daemon:
            # multiprocessing refuses children to a daemonic process: say so, not assert.
            raise LoaderError("DataLoader workers cannot start in a daemonic process; the "
                              "probe must run in a non-daemonic one")
        starter = (context or _worker_context()) if workers > 0 else None
        self.start = starter.get_start_method() if starter else "in this process"
        self._loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, sampler=_Cycle(self.images, seed),
            num_workers=workers, collate_fn=_collate, pin_memory=device.startswith("cuda"),
            persistent_workers=workers > 0,
            prefetch_factor=PREFETCH_FACTOR if workers > 0 else None,
            multiprocessing_context=starter)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        try:
            yield from self._batches()
        except RuntimeError as exc:
            if not self._bus_error(exc):
                raise
            raise LoaderError(shm_advice()) from None

    def _bus_error(self, exc: RuntimeError) -> bool:
        """A worker killed by SIGBUS: torch says so, or only that it "exited unexpectedly"."""
        if "bus error" in str(exc).lower():
            return True
        workers = getattr(getattr(self._loader, "_iterator", None), "_workers", None) or []
        return any(w.exitcode == -signal.SIGBUS for w in workers)

    def _batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels, failed, (made, worker) in self._loader:
            self.made.append((made, len(images), worker))
            gone = first_gone(path for path, _ in failed)
            if gone:  # not a corrupt file: the dataset is going, and every file may follow
                raise vanished(f"the dataset's file {gone} was removed")
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
    def __init__(self, kind: str, samples: Samples, batch_size: int, workers: int,
                 image_size: int, device: str, seed: int) -> None:
        super().__init__()
        gpu = kind == "dali_gpu"
        self._device_id = int(device.split(":")[1]) if gpu and ":" in device else (
            0 if gpu else None)
        self.kind, self.batch_size, self.workers = kind, batch_size, workers
        self.threads = max(1, workers)  # DALI has no processes: workers sets its CPU threads
        self.parallel, self.prefetch = batching(kind, workers)
        self.start = "threads"
        self.output_device = f"cuda:{self._device_id}" if gpu else "cpu"
        self._files, self._labels = list(samples.files), list(samples.labels)
        self._image_size, self._seed = image_size, seed
        self.images = len(self._files)
        self._pipe: Any = None
        self._it: Any = None
        self._build()

    def _build(self) -> None:
        """The pipeline over the current file list, and an iterator that runs on across
        passes (no reader_name, no size: DALI's reader fills a batch from the next pass when
        the files run out)."""
        from nvidia.dali import fn, types
        from nvidia.dali.pipeline import pipeline_def
        from nvidia.dali.plugin.pytorch import DALIGenericIterator

        gpu, size, files, labels = (self.kind == "dali_gpu", self._image_size, self._files,
                                    self._labels)

        @pipeline_def(batch_size=self.batch_size, num_threads=self.threads,
                      prefetch_queue_depth=DALI_QUEUE_DEPTH,
                      # None (no GPU) is valid; DALI's stub says int.
                      device_id=self._device_id,  # type: ignore[arg-type]
                      seed=self._seed)
        def pipe() -> tuple[Any, Any]:
            jpegs, labs = fn.readers.file(files=files, labels=labels, random_shuffle=True,
                                          name="Reader")
            # The same crop distribution as torchvision's RandomResizedCrop defaults.
            images = fn.decoders.image_random_crop(
                jpegs, device="mixed" if gpu else "cpu", output_type=types.DALIImageType.RGB,
                random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
            # One input, one output: a DataNode (the stub allows for several, or none).
            images = fn.resize(images, resize_x=size, resize_y=size)  # type: ignore[assignment]
            images = fn.crop_mirror_normalize(
                images, dtype=types.DALIDataType.FLOAT, output_layout="CHW",
                mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                mirror=fn.random.coin_flip(probability=0.5))
            return images, (labs.gpu() if gpu else labs)

        try:
            self._pipe = pipe()
            self._pipe.build()
            self._it = DALIGenericIterator(self._pipe, ["images", "labels"], size=-1)
        except RuntimeError as exc:
            self.close()
            gone = first_gone(files)
            if gone:
                raise vanished(f"the dataset's file {gone} was removed") from None
            raise LoaderError(f"DALI failed to start: {_first_line(exc)}") from None

    def _drop(self, exc: BaseException) -> None:
        """Leave out the file DALI's error names and rebuild without it, or give up with a
        LoaderError when the error names none (or no file is left)."""
        cause = _first_line(exc)
        bad = next((f for f in self._files if f in str(exc)), None)
        gone = first_gone([bad] if bad else self._files)
        if gone:  # not a corrupt file: the dataset is going, and every file may follow
            self.close()
            raise vanished(f"the dataset's file {gone} was removed")
        if bad is None:
            self.close()
            raise LoaderError(f"DALI stopped: {cause}") from None
        index = self._files.index(bad)
        del self._files[index], self._labels[index]
        if bad not in self.corrupt_files and self.corrupt < _MAX_WARNINGS:
            warnings.warn(f"skipped corrupt image {bad}: {cause}", stacklevel=3)
        self.corrupt_files.setdefault(bad, cause)
        self.close()
        if not self._files:
            raise LoaderError("DALI stopped: no file it can decode is left")
        self._build()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        it = iter(self._it)
        while True:
            try:
                out = next(it)
            except StopIteration:
                return
            except RuntimeError as exc:  # a corrupt file: DALI stops the whole pipeline
                self._drop(exc)
                it = iter(self._it)
                continue
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
