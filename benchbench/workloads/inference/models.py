"""What the inference workload serves: ResNet50 and the transformer workload's GPT on a device,
behind one small interface, so that the simulator can serve its own (engine/sim_models.py)
and plan with the workload's own code.

A call returns once its work is queued on a GPU; the meter that times it synchronizes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torchvision

from benchbench.probes.meter import free_memory
from benchbench.workloads.inference.scenarios import bucket
from benchbench.workloads.models.gpt import GPT
from benchbench.workloads.models.gpt_generate import KVCache, forward_cached, next_token
from benchbench.workloads.transformer.config import PRESETS

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
Call = Callable[[], Any]


class Models(Protocol):
    def classify(self, precision: str, batch: int) -> Call:
        """One forward pass of ResNet50 on a batch of random images, kept for later calls."""

    def generate(self, precision: str, batch: int, prompt: int, new: int
                 ) -> tuple[Call, Call]:
        """(prefill and first token, one decode step) of a fresh generation of `new` tokens
        after a random prompt of `prompt` tokens, at `batch` sequences."""

    def release(self) -> None:
        """Free every model and tensor held."""


class TorchModels:
    """The real models, built once per precision and device."""

    def __init__(self, dev: str, image_size: int, channels_last: bool, preset: str) -> None:
        self.dev, self.size, self.preset = dev, image_size, preset
        self.fmt = torch.channels_last if channels_last else torch.contiguous_format
        self._resnet: dict[str, torch.nn.Module] = {}
        self._gpt: dict[str, GPT] = {}

    def classify(self, precision: str, batch: int) -> Call:
        if precision not in self._resnet:
            self._resnet.clear()
            free_memory()
            model = torchvision.models.resnet50(weights=None).eval()
            self._resnet[precision] = model.to(self.dev, dtype=DTYPES[precision],
                                               memory_format=self.fmt)
        model = self._resnet[precision]
        gen = torch.Generator(device=self.dev).manual_seed(batch)
        x = torch.randn(batch, 3, self.size, self.size, device=self.dev, generator=gen)
        x = x.to(DTYPES[precision]).contiguous(memory_format=self.fmt)

        def call() -> Any:
            with torch.inference_mode():
                return model(x)

        return call

    def library(self, precision: str, count: int, buckets: Sequence[int]
                ) -> Callable[[Sequence[int]], list[int]]:
        """LoadGen's sample library: `count` random images on the device, and a call that
        classifies those at the given indices as one batch, padded to the next of `buckets`
        (shapes cuDNN has tuned, as a serving engine's batch buckets are), returning their
        classes on the host: so it returns when the device is done."""
        self.classify(precision, 1)  # builds the model at this precision
        model = self._resnet[precision]
        gen = torch.Generator(device=self.dev).manual_seed(count)
        images = torch.randn(count, 3, self.size, self.size, device=self.dev, generator=gen)
        images = images.to(DTYPES[precision]).contiguous(memory_format=self.fmt)
        def serve(indices: Sequence[int]) -> list[int]:
            rows = bucket(buckets, len(indices))
            picked = list(indices) + [indices[0]] * (rows - len(indices))
            at = torch.tensor(picked, device=self.dev)
            with torch.inference_mode():
                x = images.index_select(0, at).contiguous(memory_format=self.fmt)
                classes: list[int] = model(x)[:len(indices)].argmax(1).tolist()
            return classes

        return serve

    def generate(self, precision: str, batch: int, prompt: int, new: int
                 ) -> tuple[Call, Call]:
        dims, dtype = PRESETS[self.preset], DTYPES[precision]
        if precision not in self._gpt:
            self._gpt.clear()
            free_memory()
            self._gpt[precision] = GPT(dims["n_layers"], dims["d_model"], dims["n_heads"],
                                       dims["vocab_size"], dims["max_seq_len"]
                                       ).eval().to(self.dev, dtype=dtype)
        model = self._gpt[precision]
        gen = torch.Generator(device=self.dev).manual_seed(batch)
        idx = torch.randint(0, dims["vocab_size"], (batch, prompt), device=self.dev,
                            generator=gen)
        cache = KVCache(model, batch, prompt + new, dtype, torch.device(self.dev))
        state: dict[str, torch.Tensor] = {}

        def first() -> None:
            state["tok"] = next_token(forward_cached(model, idx, cache))

        def step() -> None:
            state["tok"] = next_token(forward_cached(model, state["tok"], cache))

        return first, step

    def release(self) -> None:
        self._resnet.clear()
        self._gpt.clear()
        free_memory()
