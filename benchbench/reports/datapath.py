"""The data-path section of report.md: the dataset, the best loader, accelerator utilisation."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import derive as analysis
from benchbench.analysis import verdict
from benchbench.core import units as fmt
from benchbench.core.results import RunResult


def section(run: RunResult) -> list[str]:
    out: list[str] = []
    ds = run.extra.get("dataset")
    if ds:
        origin = ("your --data-dir" if ds.get("source") == "user" else
                  "a synthetic ImageNet-like set" + (" (reused from the cache)"
                                                     if ds.get("reused") else ""))
        mean, med = fmt.iec(ds.get("mean_file_size") or 0), fmt.iec(ds.get("median_file_size") or 0)
        out += [f"Dataset: {origin} at `{ds.get('path')}`: {ds.get('num_images')} images in "
                f"{ds.get('num_classes')} classes, mean file {mean}, median {med}.", ""]
    dl = run.probe("dataloader")
    best = next((m for m in dl.measurements if m.metric == "best_throughput"), None) if dl else None
    if best:
        out += [f"Best loader: {best.context.get('loader')} with {best.context.get('workers')} "
                f"workers, **{fmt.value(best.value, best.unit)}** decoded and augmented "
                "(files in the page cache).", ""]
    rows = analysis.accelerator_utilisation(run)
    if rows:
        out += fmt.table(["loader", "workers", "total_ips", "compute_ips", "timed steps", "AU",
                          ""], [
            [str(r["key"]["loader"]), str(r["key"]["workers"]),
             fmt.value(r["total_ips"], "samples/s"), fmt.value(r["compute_ips"], "samples/s"),
             f"{r['steps']} + {r['compute_steps']}" + (" (few steps)" if r["few_steps"] else ""),
             f"**{fmt.percent(r['au'])}**", _judged(run, r)] for r in rows])
        out += ["AU = `total_ips` / `compute_ips` (MLPerf Storage; 90% is the pass mark): "
                "the real loader feeding the real training step, against synthetic data on the "
                "device, same batch, size and precision; timed steps on loader batches + on "
                "synthetic data, in steady state (the prefetched batches discarded, a warm "
                "round, then whole rounds of the workers).", ""]
    return ["## Data path", "", *out] if out else []


def _judged(run: RunResult, r: dict[str, Any]) -> str:
    """Whether the AU passes, or why the verdict did not judge by it (analysis/verdict.py)."""
    why = verdict.distrust(run, r)
    if why:
        return f"not judged: {why.short}"
    return ("passes" if r["passes"] else
            f"below {fmt.percent(analysis.AU_PASS)}: the device waits for data")
