"""The headline figures of a run beside the references a healthy H100/H200-class GPU should
reach, one table, for the GPU check (scripts/gpu-validate.sh).

    python scripts/gpu_headline.py RUN_DIR_OR_RESULTS_JSON [--wall-s SECONDS]

The references are the GPU-validation issue's: measured figures for this class of GPU, with the
datasheet beside them where that is the ceiling. A figure the run did not measure is listed as
"not measured", with the probe's reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from benchbench.analysis import derive as analysis
from benchbench.core import results
from benchbench.core import units as fmt
from benchbench.core.results import RunResult

# (figure, reference text, test on the value, unit for display)
REFERENCES: list[tuple[str, str, Callable[[float], bool], str]] = [
    ("matmul bf16 peak", "≥ 750 TFLOP/s (measured max ~790 on H100/H200; datasheet 989)",
     lambda v: v >= 750e12, "FLOP/s"),
    ("matmul fp32 peak (TF32 off)", "≤ 67 TFLOP/s (datasheet)", lambda v: v <= 67e12 * 1.02,
     "FLOP/s"),
    ("GPU memory copy", "≥ 4.1 TB/s (datasheet 4.8)", lambda v: v >= 4.1e12, "B/s"),
    ("pinned H2D", "50-57 GB/s (PCIe Gen5 x16)", lambda v: 50e9 <= v <= 57e9, "B/s"),
    ("pinned D2H", "50-57 GB/s (PCIe Gen5 x16)", lambda v: 50e9 <= v <= 57e9, "B/s"),
    ("ResNet50 amp_bf16", "≥ 3,000 img/s at batch 256 (H100 published ~2,800)",
     lambda v: v >= 3000, "samples/s"),
    ("ResNet50 amp_fp16", "—", lambda v: True, "samples/s"),
    ("ResNet50 tf32", "—", lambda v: True, "samples/s"),
    ("ResNet50 fp32", "—", lambda v: True, "samples/s"),
    ("GPT MFU amp_bf16", "≥ 0.45 of the dense peak", lambda v: v >= 0.45, "ratio"),
    ("pipeline AU", "≥ 0.9, or the verdict names the loader and the cores it needs",
     lambda v: v >= 0.9, "ratio"),
]


def _find(run: RunResult, probe: str, metric: str, **key: Any) -> float | None:
    pr = run.probe(probe)
    for m in pr.measurements if pr else []:
        if m.metric == metric and all(m.key.get(k) == v for k, v in key.items()):
            return m.value
    return None


def figures(run: RunResult) -> dict[str, float | None]:
    mfu = [r["mfu"] for r in analysis.transformer_utilisation(run)
           if r["key"].get("precision") == "amp_bf16" and r["mfu"] is not None]
    au = [r["au"] for r in analysis.accelerator_utilisation(run)]
    out = {
        "matmul bf16 peak": _find(run, "matmul", "peak_flops", device="cuda:0", dtype="bf16"),
        "matmul fp32 peak (TF32 off)": _find(run, "matmul", "peak_flops", device="cuda:0",
                                             dtype="fp32"),
        "GPU memory copy": _find(run, "memory_bandwidth", "copy_bandwidth", memory="cuda:0"),
        "pinned H2D": _find(run, "host_device_copy", "peak_bandwidth", device="cuda:0",
                            direction="h2d", memory="pinned"),
        "pinned D2H": _find(run, "host_device_copy", "peak_bandwidth", device="cuda:0",
                            direction="d2h", memory="pinned"),
        "GPT MFU amp_bf16": max(mfu) if mfu else None,
        "pipeline AU": max(au) if au else None,
    }
    for p in ("amp_bf16", "amp_fp16", "tf32", "fp32"):
        out[f"ResNet50 {p}"] = _find(run, "resnet50", "throughput", precision=p)
    return out


def _show(v: float, unit: str) -> str:
    if unit == "ratio":
        return f"{v:.2f}"
    if unit == "samples/s":
        return f"{v:,.0f} img/s"
    return fmt.si(v, unit)


def table(run: RunResult, wall_s: float | None) -> list[str]:
    got = figures(run)
    lines = ["| figure | measured | reference | meets it |", "|---|---|---|---|"]
    for name, ref, ok, unit in REFERENCES:
        v = got.get(name)
        lines.append(f"| {name} | {_show(v, unit) if v is not None else 'not measured'} | "
                     f"{ref} | {'—' if v is None or ref == '—' else ('yes' if ok(v) else 'NO')} |")
    lines += ["", "| probe | status | seconds | note |", "|---|---|---|---|"]
    for p in run.probes:
        lines.append(f"| {p.name} | {p.status} | {p.duration_s or 0:.1f} | "
                     f"{(p.reason or '').replace('|', '/')[:160]} |")
    if wall_s is not None:
        lines += ["", f"whole run: {wall_s:.0f} s (reference: ≤ 600 s for the default run on "
                      f"one H200) — {'yes' if wall_s <= 600 else 'NO'}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a run folder or its results.json")
    ap.add_argument("--wall-s", type=float, help="the whole run's wall time, measured outside")
    a = ap.parse_args(argv)
    try:
        run = results.load(a.results)
    except results.ResultsError as exc:
        print(f"gpu_headline: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(run, a.wall_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
