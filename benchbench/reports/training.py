"""The training section of report.md: throughput per precision, MFU, and precision speedups."""

from __future__ import annotations

from benchbench.analysis import derive as analysis
from benchbench.core import units as fmt
from benchbench.core.results import RunResult


def section(run: RunResult) -> list[str]:
    rows = []
    util = {str(u["key"]): u for u in analysis.transformer_utilisation(run)}
    for probe in analysis.TRAINING_PROBES:
        pr = run.probe(probe)
        if pr is None or pr.status != "ok":
            continue
        mem = {str(m.key): m.value for m in pr.measurements if m.metric == "peak_memory"}
        for m in pr.measurements:
            if m.metric != "throughput":
                continue
            u = util.get(str(m.key), {})
            mfu = (fmt.percent(u["mfu"]) + f" of {u['peak_model']}" if u.get("mfu") is not None
                   else u.get("mfu_reason") or "—")
            mamfu = (fmt.percent(u["mamfu"]) if u.get("mamfu") is not None
                     else u.get("mamfu_reason") or "—")
            backoff = m.context.get("oom_backoff") or []
            batch = str(m.context.get("batch")) + (
                f" (out of memory at {', '.join(map(str, backoff))})" if backoff else "")
            rows.append([probe, m.key["precision"], f"**{fmt.value(m.value, m.unit)}**",
                         batch, str(m.context.get("steps")),
                         fmt.iec(mem[str(m.key)]) if str(m.key) in mem else "—", mfu, mamfu])
    if not rows:
        return []
    out = ["## Training throughput", "",
           "Synthetic data already on the device: this is compute capacity, not the data path. "
           "Throughput is total work over total time of the timed steps. MFU divides the "
           "achieved FLOP/s by the datasheet peak of the dtype used; mamfu by the matmul "
           "ceiling measured in this run.", ""]
    out += fmt.table(["model", "precision", "throughput", "batch", "steps", "peak memory", "MFU",
                   "mamfu"], rows)
    speedups = analysis.precision_speedups(run)
    if speedups:
        out += ["**Precision speedups**", ""]
        out += fmt.table(["model", "ratio", "measured", "datasheet"], [
            [s["model"], s["ratio"], f"{s['measured']:.2f}x",
             f"{s['expected']:.2f}x ({s['expected_source']})" if s["expected"] else
             "no datasheet figure for this device"] for s in speedups])
    return out
