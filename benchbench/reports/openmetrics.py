"""A run's headline figures as a node_exporter textfile: one gauge family per figure, its key
fields, device and GPU model as labels, written by prometheus-client's exposition code
(`generate_latest` on a registry of our own, not the library's global one).

Metric names follow Prometheus' conventions, the unit spelled at the end in base units
(`_bytes_per_second`, `_images_per_second`): that is the exposition format's way of carrying
the unit, which results.json carries as data. The values are the run's figures in those SI
units, unconverted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from benchbench.compare.series import Figure, figures
from benchbench.core.gpus import gpu_for
from benchbench.core.results import RunResult

# (probe, metric) -> (metric name, help)
METRICS: dict[tuple[str, str], tuple[str, str]] = {
    ("matmul", "peak_flops"): ("benchbench_matmul_peak_flop_per_second",
                               "torch.mm peak over sizes, per dtype"),
    ("memory_bandwidth", "copy_bandwidth"): ("benchbench_memory_copy_bytes_per_second",
                                             "memory copy bandwidth, bytes read + written"),
    ("host_device_copy", "peak_bandwidth"): ("benchbench_host_device_copy_bytes_per_second",
                                             "host-device copy peak over sizes"),
    ("resnet50", "throughput"): ("benchbench_resnet50_images_per_second",
                                 "ResNet50 training throughput, synthetic data"),
    ("transformer", "throughput"): ("benchbench_transformer_tokens_per_second",
                                    "GPT-style decoder training throughput"),
    ("dataloader", "best_throughput"): ("benchbench_dataloader_images_per_second",
                                        "best data loader configuration's decode rate"),
    ("storage", "read_bandwidth"): ("benchbench_storage_read_bytes_per_second",
                                    "fio sequential 1 MiB read bandwidth, direct I/O"),
    ("allreduce", "peak_busbw"): ("benchbench_allreduce_busbw_bytes_per_second",
                                  "all_reduce peak bus bandwidth (nccl-tests' busbw)"),
}


def _labels(run: RunResult, f: Figure) -> dict[str, str]:
    """The key fields, and the model of the GPU a figure was measured on (by its device, or
    the memory a copy ran in) where there is one."""
    labels = {k: str(v) for k, v in f.fields.items()}
    gpu = gpu_for(run.environment or {}, f.gpu_device or "") or {}
    if gpu.get("name"):
        labels["gpu"] = str(gpu["name"])
    return labels


def families(run: RunResult) -> list[Any]:
    """The run's gauge families: each headline figure, the run's start time and its info."""
    from prometheus_client.core import GaugeMetricFamily

    grouped: dict[tuple[str, str], list[tuple[dict[str, str], float]]] = {}
    for f in figures(run):
        if (f.probe, f.metric) in METRICS:
            grouped.setdefault((f.probe, f.metric), []).append((_labels(run, f), f.value))
    out = []
    for pm, samples in grouped.items():
        name, doc = METRICS[pm]
        names = sorted({k for labels, _ in samples for k in labels})
        g = GaugeMetricFamily(name, doc, labels=names)
        for labels, v in samples:
            g.add_metric([labels.get(k, "") for k in names], v)
        out.append(g)
    env = run.environment or {}
    start = GaugeMetricFamily("benchbench_run_start_time_seconds",
                              "when the run started, seconds since the Unix epoch")
    start.add_metric([], datetime.fromisoformat(run.started_at).timestamp())
    info = {"host": str((env.get("host") or {}).get("hostname") or ""),
            "label": run.label or "", "benchbench": str(run.tool.get("version") or ""),
            "driver": str(env.get("driver") or ""),
            "torch": str((env.get("versions") or {}).get("torch") or "")}
    run_info = GaugeMetricFamily("benchbench_run_info", "the run's host and versions",
                                 labels=list(info))
    run_info.add_metric(list(info.values()), 1.0)
    return [*out, start, run_info]


def exposition(run: RunResult) -> bytes:
    """The textfile's bytes, in the Prometheus text format node_exporter reads."""
    from prometheus_client import generate_latest
    from prometheus_client.registry import Collector, CollectorRegistry

    class _Run(Collector):
        def collect(self) -> Iterator[Any]:
            yield from families(run)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Run())
    return bytes(generate_latest(registry))
