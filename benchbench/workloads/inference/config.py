"""The inference workload's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, SamplingConfig, check_choices, doc_field
from benchbench.probes._config import sampling_defaults
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.workloads._config import best_amp, check_image_size
from benchbench.workloads.transformer.config import PRESETS, check_preset

PRECISIONS = ("bf16", "fp16", "fp32")
PARTS = ("offline", "server", "generation")
# MLPerf's official load generator, the `mlcommons-loadgen` wheel (a default dependency where a
# wheel exists; the [inference] extra elsewhere).
LOADGEN_MODULE = "mlperf_loadgen"


def loadgen_installed() -> bool:
    """Whether LoadGen can drive the scenarios here, looked for without importing it (the
    simulator plans what this machine would run: the GPU box has no LoadGen)."""
    return importlib.util.find_spec(LOADGEN_MODULE) is not None


@dataclass(frozen=True)
class InferenceConfig(SamplingConfig):
    parts: tuple[str, ...] | None = doc_field(
        None, "offline (ResNet50, a batch sweep, then LoadGen's Offline scenario), server "
              "(ResNet50, LoadGen's Server scenario: Poisson arrivals against a p99 bound), "
              "generation (GPT with a KV cache, vLLM's benchmark metrics); auto: all three")
    loadgen: bool | None = doc_field(
        None, "drive offline and server with MLPerf's LoadGen (pip install "
              "'benchbench[inference]'); off: the simulated server, on a virtual clock; auto: "
              "on where mlperf_loadgen is installed")
    precisions: tuple[str, ...] | None = doc_field(
        None, "bf16, fp16, fp32 (the weights cast, torch.inference_mode); auto: bf16 (fp16 "
              "where the GPU has no bf16) and fp32 on GPU, fp32 on CPU")
    batch_sizes: tuple[int, ...] | None = doc_field(
        None, "offline batch sizes; auto: 1, 2, 4 … 256 on GPU, 1, 2, 4, 8 on CPU (1, 4 with "
              "--quick)")
    image_size: int | None = doc_field(None, "square input side; auto: 224 on GPU (MLPerf's), "
                                             "32 on CPU")
    channels_last: bool | None = doc_field(None, "NHWC memory format; auto: on for GPU")
    latency_bound_s: float | None = doc_field(
        None, "server: the p99 latency a rate must stay under, in seconds; auto: MLPerf's 15 "
              "ms for ResNet50 on a GPU; on a CPU, or where one image alone takes longer, 5x "
              "one image's latency (LoadGen SingleStream's p90; without LoadGen, the batch "
              "sweep's), rounded up to whole 10 ms (not MLPerf's)")
    max_batch: int | None = doc_field(
        None, "server: dynamic batching takes at most this many queued requests; auto: 64 on "
              "GPU, 8 on CPU")
    requests: int | None = doc_field(
        None, "server without LoadGen: requests per rate tried on the virtual clock; auto: "
              "2000 on GPU, 200 on CPU (100 with --quick)")
    preset: str | None = doc_field(
        None, f"generation: the transformer preset, one of {', '.join(PRESETS)}; auto: "
              "gpt2-124m on GPU, small on CPU")
    prompt_tokens: int | None = doc_field(None, "generation: prompt length; auto: 512 on GPU, "
                                                "64 on CPU")
    new_tokens: int | None = doc_field(None, "generation: tokens generated per sequence; auto: "
                                             "128 on GPU, 16 on CPU (8 with --quick)")
    decode_batches: tuple[int, ...] | None = doc_field(
        None, "generation: sequences decoded together; auto: 1, 8, 64")
    generations: int | None = doc_field(
        None, "generation: timed generations per decode batch, each of `batch` requests, for "
              "the per-request statistics; auto: 3 on GPU, 2 on CPU")

    def validate(self) -> None:
        super().validate()
        check_choices("parts", self.parts, PARTS)
        check_choices("precisions", self.precisions, PRECISIONS)
        for name in ("batch_sizes", "decode_batches"):
            v = getattr(self, name)
            if v is not None and (not v or min(v) < 1):
                raise ConfigError(f"{name} must be a non-empty list of counts >= 1")
        if self.latency_bound_s is not None and not self.latency_bound_s > 0:
            raise ConfigError(f"latency_bound_s must be positive, not {self.latency_bound_s:g}")
        for name in ("max_batch", "requests", "prompt_tokens", "generations"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.new_tokens is not None and self.new_tokens < 2:
            raise ConfigError("new_tokens must be at least 2: a first token, then decoding")
        check_image_size(self.image_size)
        check_preset(self.preset)
        if self.preset and self.prompt_tokens and self.new_tokens and \
                self.prompt_tokens + self.new_tokens > PRESETS[self.preset]["max_seq_len"]:
            raise ConfigError(f"prompt_tokens + new_tokens exceed the {self.preset} model's "
                              f"{PRESETS[self.preset]['max_seq_len']} positions")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    sampling = sampling_defaults(device, quick)
    if device == "cuda":
        half = best_amp(device, facts).removeprefix("amp_")
        return {**sampling, "parts": PARTS, "loadgen": loadgen_installed(),
                "precisions": (half, "fp32"), "batch_sizes": tuple(2**i for i in range(9)),
                "image_size": 224, "channels_last": True, "max_batch": 64, "requests": 2000,
                "preset": "gpt2-124m", "prompt_tokens": 512, "new_tokens": 128,
                "decode_batches": (1, 8, 64), "generations": 3}
    # 32 px on a CPU: LoadGen calls a Server run VALID only after 459 queries (its early
    # stopping at p99, none over the bound), so a run lasts 459 / rate. On a 2-core VM one
    # image takes 21 ms at 64 px and 15 ms at 32 px, a batch of 8 60 ms and 35-40 ms; at 64
    # px a rate of 69/s already missed 5x one image's latency (p99 138 ms), at 32 px 66-109/s
    # were VALID (p99 69-81 ms within 80-90 ms): 4-7 s a run, which the full CPU budget pays.
    return {**sampling, "parts": PARTS, "loadgen": loadgen_installed(),
            "precisions": ("fp32",), "batch_sizes": (1, 4) if quick else (1, 2, 4, 8),
            "image_size": 32, "channels_last": False, "max_batch": 8,
            "requests": 100 if quick else 200, "preset": "small", "prompt_tokens": 64,
            "new_tokens": 8 if quick else 16, "decode_batches": (1, 8, 64), "generations": 2}


SPEC = ProbeSpec(
    name="inference",
    budget_weight=1.5,
    description="batch serving: ResNet50 offline (a batch sweep, then MLPerf's LoadGen "
                "Offline), server (LoadGen's Server: the highest target rate it calls VALID "
                "within a p99 bound; without LoadGen a simulated server), and GPT generation "
                "with a KV cache (vLLM's benchmark metrics: TTFT, TPOT, ITL, output tokens/s)",
    config_cls=InferenceConfig,
    run="benchbench.workloads.inference.run",
    gpu_resource="gpu_compute",
    cpu_resource="cpu_compute",
    defaults=defaults,
)
