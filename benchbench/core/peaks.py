"""Datasheet peaks per GPU model and PCIe link rates, for "% of peak" in reports.

All compute figures are dense (no 2:4 sparsity) tensor-core FLOP/s, as a plain torch.mm (fp8:
a scaled_mm of e4m3 inputs) can reach them; fp32 is the non-tensor-core CUDA-core rate.
Memory bandwidth is the datasheet figure in B/s. A figure the part does not have in hardware
is None (T4 and V100 have no bf16 or TF32 tensor cores, nor Ampere fp8). Never hard-code one
GPU's peak elsewhere: look it up here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

T = 1e12
# The matmul dtype each training precision runs its tensor-core work in: MFU divides by that
# dtype's datasheet peak, mamfu by that dtype's measured matmul ceiling.
PRECISION_DTYPE = {"fp32": "fp32", "tf32": "tf32", "amp_bf16": "bf16", "amp_fp16": "fp16",
                   "fp8": "fp8"}


@dataclass(frozen=True)
class GpuPeak:
    model: str
    fp32: float
    tf32: float | None
    bf16: float | None
    fp16: float | None
    memory_bandwidth: float  # B/s
    source: str
    fp8: float | None = None  # e4m3 tensor cores (Ada and Hopper); None where absent

    def flops(self, dtype: str) -> float | None:
        return getattr(self, dtype, None)


# (pattern on the NVML/torch name, peak). Order matters: the first match wins, so the more
# specific names (H100 PCIe, H100 NVL, A100 80GB) come before the general ones.
_TABLE: list[tuple[str, GpuPeak]] = [
    # NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column; sparsity figures halved.
    (r"H200 NVL", GpuPeak("H200 NVL", 60 * T, 417.5 * T, 835.5 * T, 835.5 * T, 4.8e12,
                          "NVIDIA H200 datasheet, H200 NVL column, dense = sparse / 2",
                          fp8=1670.5 * T)),
    (r"H200", GpuPeak("H200 SXM", 67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 4.8e12,
                      "NVIDIA H200 datasheet, H200 SXM column, dense = sparse / 2",
                      fp8=1979 * T)),
    # NVIDIA H100 Tensor Core GPU datasheet (2023): SXM, PCIe and NVL columns.
    (r"H100.*PCIe", GpuPeak("H100 PCIe", 51 * T, 378 * T, 756 * T, 756 * T, 2.0e12,
                            "NVIDIA H100 datasheet, H100 PCIe column, dense = sparse / 2",
                            fp8=1513 * T)),
    (r"H100 NVL", GpuPeak("H100 NVL", 60 * T, 417.5 * T, 835.5 * T, 835.5 * T, 3.9e12,
                          "NVIDIA H100 datasheet, H100 NVL column, dense = sparse / 2",
                          fp8=1670.5 * T)),
    (r"H100", GpuPeak("H100 SXM", 67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 3.35e12,
                      "NVIDIA H100 datasheet, H100 SXM column, dense = sparse / 2",
                      fp8=1979 * T)),
    # NVIDIA A100 Tensor Core GPU datasheet (2021): 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s,
    # 40GB (both forms) 1,555 GB/s; compute identical across forms.
    (r"A100.*80GB.*PCIe|A100-PCIE-80GB", GpuPeak(
        "A100 80GB PCIe", 19.5 * T, 156 * T, 312 * T, 312 * T, 1.935e12,
        "NVIDIA A100 datasheet, A100 80GB PCIe column")),
    (r"A100.*PCIe|A100-PCIE", GpuPeak("A100 40GB PCIe", 19.5 * T, 156 * T, 312 * T, 312 * T,
                                      1.555e12, "NVIDIA A100 datasheet, A100 40GB PCIe column")),
    (r"A100.*80GB", GpuPeak("A100 80GB SXM", 19.5 * T, 156 * T, 312 * T, 312 * T, 2.039e12,
                            "NVIDIA A100 datasheet, A100 80GB SXM column")),
    (r"A100", GpuPeak("A100 40GB SXM", 19.5 * T, 156 * T, 312 * T, 312 * T, 1.555e12,
                      "NVIDIA A100 datasheet, A100 40GB SXM column")),
    # NVIDIA L40S datasheet (2023): TF32 183, BF16/FP16 362.05 dense, 864 GB/s.
    (r"L40S", GpuPeak("L40S", 91.6 * T, 183 * T, 362.05 * T, 362.05 * T, 864e9,
                      "NVIDIA L40S datasheet, dense = sparse / 2", fp8=733 * T)),
    # NVIDIA L4 datasheet (2023): TF32 120, BF16/FP16 242.5 with sparsity; 300 GB/s.
    (r"\bL4\b", GpuPeak("L4", 30.3 * T, 60 * T, 121 * T, 121 * T, 300e9,
                        "NVIDIA L4 datasheet, dense = sparse / 2", fp8=242.5 * T)),
    # NVIDIA A10 datasheet (2021): TF32 62.5, BF16/FP16 125 dense; 600 GB/s.
    (r"\bA10\b", GpuPeak("A10", 31.2 * T, 62.5 * T, 125 * T, 125 * T, 600e9,
                         "NVIDIA A10 datasheet")),
    # NVIDIA T4 datasheet (2019): FP32 8.1, mixed-precision FP16 65; no TF32 or BF16; 320 GB/s.
    (r"\bT4\b", GpuPeak("T4", 8.1 * T, None, None, 65 * T, 320e9, "NVIDIA T4 datasheet")),
    # NVIDIA V100 datasheet (2020): SXM2 15.7 / 125 tensor FP16, PCIe 14 / 112; 900 GB/s.
    (r"V100.*PCIE|V100.*PCIe", GpuPeak("V100 PCIe", 14 * T, None, None, 112 * T, 900e9,
                                       "NVIDIA V100 datasheet, PCIe column")),
    (r"V100", GpuPeak("V100 SXM2", 15.7 * T, None, None, 125 * T, 900e9,
                      "NVIDIA V100 datasheet, SXM2 column")),
    # NVIDIA Ada Lovelace architecture whitepaper (2022), appendix table for RTX 4090:
    # TF32 82.6, BF16 and FP16 with FP32 accumulate 165.2 dense; 1,008 GB/s GDDR6X.
    (r"RTX 4090", GpuPeak("GeForce RTX 4090", 82.6 * T, 82.6 * T, 165.2 * T, 165.2 * T,
                          1.008e12, "NVIDIA Ada Lovelace whitepaper, RTX 4090 column")),
]


def gpu_peak(name: str | None) -> GpuPeak | None:
    """The datasheet peaks for a GPU name as NVML or torch reports it, or None if unknown."""
    if not name:
        return None
    for pattern, peak in _TABLE:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return peak
    return None


# PCIe per-lane rate per direction in B/s, after line encoding (PCI-SIG base specifications):
# Gen1 2.5 GT/s and Gen2 5 GT/s use 8b/10b; Gen3 8 GT/s, Gen4 16 GT/s and Gen5 32 GT/s use
# 128b/130b; Gen6 64 GT/s PAM4 with FLIT mode (242/256 payload efficiency).
_PCIE_LANE = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5e9 * 8 / 10 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}


def pcie_rate(gen: int | None, width: int | None) -> float | None:
    """Per-direction line rate of a PCIe link in B/s (x16 Gen4 = 31.5e9), None if unknown."""
    if not gen or not width or gen not in _PCIE_LANE:
        return None
    return _PCIE_LANE[gen] * width
