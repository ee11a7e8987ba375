"""Datasets that fail the way a real machine makes loader workers fail, for the loaders' tests
(importable by the workers, which unpickle them by module name)."""

import os
import signal

import torch


class BusErrorImages(torch.utils.data.Dataset):
    """Items of 3x8x8; in a worker process, the `after`-th item dies of SIGBUS, as a worker
    whose batch no longer fits a container's small /dev/shm does."""

    def __init__(self, images: int = 64, after: int = 2) -> None:
        self.images, self.after = images, after

    def __len__(self) -> int:
        return self.images

    def __getitem__(self, index):
        if torch.utils.data.get_worker_info() is not None and index >= self.after:
            os.kill(os.getpid(), signal.SIGBUS)
        return torch.rand(3, 8, 8), 0
