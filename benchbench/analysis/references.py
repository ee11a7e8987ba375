"""Published known-good figures per GPU model (references.toml): the loader and the GPU match.

A reference is what healthy machines of a model measured in a published source (NVIDIA's
DeepLearningExamples, Lambda, nccl-tests threads, ml-engineering ...), with its conditions and
a quote. A datasheet peak (core/peaks.py) is a ceiling no machine reaches; the two stay apart.
docs/references.md says how each row was found and its caveats.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from benchbench.core.peaks import gpu_peak
from benchbench.core.results import UNITS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# Each metric of the table and its unit.
METRICS = {
    "resnet50_throughput": "samples/s",
    "matmul_flops": "FLOP/s",
    "memory_copy_bandwidth": "B/s",
    "h2d_bandwidth": "B/s",
    "d2h_bandwidth": "B/s",
    "allreduce_busbw": "B/s",
    "gpt_mfu": "ratio",
}
# Matmul dtypes and training precisions; "n/a" in the file (TOML has no null) becomes None.
PRECISIONS = frozenset({"fp32", "tf32", "bf16", "fp16", "fp8", "amp_bf16", "amp_fp16"})
SOURCE_FIELDS = ("publisher", "document", "url", "date", "quote")


@dataclass(frozen=True)
class Reference:
    """One published figure: a range (low == high for a single figure), where it was measured
    and who published it."""

    gpu: str  # the table's model name: "H100 SXM", "A100 80GB PCIe", "A100 SXM" (any memory)
    metric: str
    precision: str | None
    low: float
    high: float
    unit: str
    conditions: dict[str, Any]  # batch, gpus, data, software, notes, and the compared keys
    source: dict[str, str]  # publisher, document, url, date, quote


def _reference(row: dict[str, Any], n: int) -> Reference:
    where = f"references.toml row {n} ({row.get('gpu')}, {row.get('metric')})"
    metric, unit = row.get("metric"), row.get("unit")
    if metric not in METRICS or unit != METRICS[metric] or unit not in UNITS:
        raise ValueError(f"{where}: metric {metric!r} in {unit!r} is not one of {METRICS}")
    precision = None if row.get("precision") in (None, "n/a") else row["precision"]
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"{where}: precision {precision!r} is not one of {sorted(PRECISIONS)}")
    low, high = float(row["low"]), float(row["high"])
    if not 0 < low <= high:
        raise ValueError(f"{where}: needs 0 < low <= high, got {low} and {high}")
    source = row.get("source") or {}
    if any(not str(source.get(k) or "").strip() for k in SOURCE_FIELDS if k != "url"):
        raise ValueError(f"{where}: a source needs {', '.join(SOURCE_FIELDS[:-1])} and quote")
    conditions = row.get("conditions")
    if not isinstance(conditions, dict) or not conditions:
        raise ValueError(f"{where}: no conditions")
    return Reference(gpu=str(row["gpu"]), metric=metric, precision=precision, low=low,
                     high=high, unit=unit, conditions=dict(conditions),
                     source={k: str(v) for k, v in source.items()})


@functools.cache
def _table() -> tuple[Reference, ...]:
    text = resources.files("benchbench.analysis").joinpath("references.toml").read_text("utf-8")
    rows = tomllib.loads(text).get("reference") or []
    return tuple(_reference(row, n) for n, row in enumerate(rows, 1))


def load() -> list[Reference]:
    """Every row of references.toml, validated (read once; a fresh list each call)."""
    return list(_table())


def _family(model: str) -> str:
    """The name a source uses when it did not state the memory size: "A100 SXM"."""
    return re.sub(r"\s+\d+GB\b", "", model)


def models(gpu_name: str | None) -> list[str]:
    """The table's names for a GPU as NVML or torch reports it ("NVIDIA A100-SXM4-80GB" ->
    "A100 80GB SXM", "A100 SXM"). The datasheet table's patterns decide the model, so the two
    tables never disagree on what a GPU is; a model that table lacks (B200) matches a name of
    this table that appears in the reported name as a whole word."""
    if not gpu_name:
        return []
    peak = gpu_peak(gpu_name)
    if peak is not None:
        return list(dict.fromkeys([peak.model, _family(peak.model)]))
    names = dict.fromkeys(r.gpu for r in _table())
    return [n for n in names
            if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", gpu_name, flags=re.IGNORECASE)]


def match(gpu_name: str | None, metric: str, precision: str | None = None) -> list[Reference]:
    """The references for this GPU and metric, in the table's order; with `precision`, only
    those of that precision (None: any)."""
    names = models(gpu_name)
    return [r for r in _table() if r.gpu in names and r.metric == metric
            and (precision is None or r.precision == precision)]
