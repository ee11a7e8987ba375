"""The training section of report.md: throughput per precision, MFU, and precision speedups."""

from __future__ import annotations

from benchbench.analysis import derive as analysis
from benchbench.core import units as fmt
from benchbench.core.results import RunResult


def section(run: RunResult) -> list[str]:
    rows = []
    util = {str(u["key"]): u for u in analysis.training_utilisation(run)}
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
            mamfu = (f"{fmt.percent(u['mamfu'])} of {u['mamfu_basis']}"
                     if u.get("mamfu") is not None else u.get("mamfu_reason") or "—")
            backoff = m.context.get("oom_backoff") or []
            batch = str(m.context.get("batch")) + (
                f" (out of memory at {', '.join(map(str, backoff))})" if backoff else "")
            rows.append([probe, m.key["precision"], f"**{fmt.value(m.value, m.unit)}**",
                         batch, str(len(m.samples)),
                         fmt.iec(mem[str(m.key)]) if str(m.key) in mem else "—", mfu, mamfu])
    if not rows:
        return []
    out = ["## Training throughput", "",
           "Synthetic data already on the device: this is compute capacity, not the data path. "
           "Throughput is total work over total time of the timed steps, every round's; steps "
           "counts them. MFU divides the achieved FLOP/s by the datasheet peak of the dtype "
           "used (its boost clock); mamfu by the sustained matmul rate of that dtype measured "
           "in this run (the clock its power limit held), or of one the datasheet rates equal, "
           "as its cell says. ResNet50's FLOP: 24.3 GFLOP per 224 px training image (forward "
           "and backward, a multiply-add as 2), scaled by pixels.", ""]
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
