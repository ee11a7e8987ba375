"""Point the caches of the libraries benchbench loads into benchbench's own cache folder.

benchbench writes only to --out, to scratch it removes again, and to its cache folder
(dataset.cache_root()). The libraries it loads keep caches of their own in the user's home or
the temp folder; cli.main() calls contain_caches() before anything imports them, and every
process a run starts (the forkserver, probe workers, DataLoader workers, rank processes, fio)
inherits the variables. tests/test_no_stray_writes.py traces a whole run to prove the promise.

A variable the user has set wins: only unset (or empty) ones are given a value.

Left alone, on purpose:
- XDG_CACHE_HOME: cache_root() falls back to it, and every library does too, so moving it
  would hide the user's existing caches from them; each writer is named below instead, and the
  test catches one that is missed.
- TORCH_HOME (torch.hub's downloads): benchbench downloads nothing; every model is built with
  weights=None.
- PYTHONPYCACHEPREFIX: .pyc files belong to the installation (pip writes them at install time,
  so an installed benchbench writes none at run time); a prefix would make every new process
  ignore them and compile all of torch again into the cache.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# variable -> folder under <cache root>/libs, and what would otherwise write where.
LIBRARY_CACHES = {
    # matplotlib's font list (fontlist-v*.json, written on its first import) and its config
    # folder: ~/.cache/matplotlib and ~/.config/matplotlib, or under XDG_*_HOME. It also means
    # a user's ~/.config/matplotlib/matplotlibrc no longer restyles the reports' plots.
    "MPLCONFIGDIR": "matplotlib",
    # torch imports torch._dynamo when an optimizer is built, and that import creates
    # $TMPDIR/torchinductor_<user> and leaves it; torch.compile (transformer.compile=true)
    # fills it with compiled kernels, FX graphs and autotuning results, and its CuTe DSL
    # cache falls back to ~/.cache/torch_inductor. Inductor keeps its Triton kernels in here
    # too, as <dir>/triton/<device>, unless TRITON_CACHE_DIR says otherwise.
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    # Triton's own cache, dump and override folders: ~/.triton/{cache,dump,override}.
    # TRITON_HOME, not TRITON_CACHE_DIR: the latter would also move the kernels of a user who
    # chose only TORCHINDUCTOR_CACHE_DIR or TRITON_HOME.
    "TRITON_HOME": "triton",
    # The CUDA driver's JIT cache (~/.nv/ComputeCache): PTX compiled for a GPU that a
    # library's kernels (torch's, DALI's, NCCL's) ship no machine code for.
    "CUDA_CACHE_PATH": "cuda-compute-cache",
    # PyTorch's jiterator kernels, compiled with NVRTC at run time for some CUDA element-wise
    # operations: $XDG_CACHE_HOME/torch/kernels, else ~/.cache/torch/kernels.
    "PYTORCH_KERNEL_CACHE_PATH": "torch-kernels",
}


def cache_env(environ: Mapping[str, str], root: Path) -> dict[str, str]:
    """The variables to add to `environ`: each library cache it leaves unset, in root/libs.

    An empty value counts as unset: it names no folder, and torch and Triton would read it as
    the current directory.
    """
    return {name: str(root / "libs" / folder) for name, folder in LIBRARY_CACHES.items()
            if not environ.get(name)}


def contain_caches() -> dict[str, str]:
    """Add cache_env() to os.environ, which every child process inherits; return what was
    added. Creates no folder: each library creates its own when it first writes."""
    from benchbench.probes.dataset import cache_root

    # Absolute: a relative BENCHBENCH_CACHE must name the same folder in every process.
    added = cache_env(os.environ, cache_root().absolute())
    os.environ.update(added)
    return added
