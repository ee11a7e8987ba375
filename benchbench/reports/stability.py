"""The stability section of report.md: the judgement of the stability probe, its figures and
the evidence, with the slow windows lined up with the telemetry of the same moments."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import stability
from benchbench.core import units as fmt
from benchbench.core.results import RunResult

MEANING = {
    "stable": "sustained throughput held steady",
    stability.POWER_LIMIT: "throughput moved with the SM clock, which the power cap moved, and "
                           "per GHz of that clock it held steady: the GPU ran at its power "
                           "limit, as a data-center GPU under dense load does by design",
    "throttling": "the device slowed itself (its throttle reasons or clocks say so)",
    "noisy": "throughput dipped where neither a throttle reason nor the SM clock explains it: "
             "another tenant, process or the virtualisation layer is the likely cause",
    stability.UNCERTAIN: "throughput varied while the power cap held the GPU, and no SM clock "
                         "was read to tell the cap's doing from another tenant's",
    "too short": "too few windows to judge",
}


def _pct(x: float | None, sign: bool = False) -> str:
    return "—" if x is None else fmt.signed_percent(100 * x) if sign else fmt.percent(x)


def section(run: RunResult) -> list[str]:
    pr = run.probe("stability")
    if pr is None:
        return []
    out = ["## Stability", ""]
    j: dict[str, Any] | None = stability.judge_run(run)
    if j is None:
        return out + [f"Skipped, because {pr.reason or 'the probe measured nothing'}.", ""]
    s, key = j["summary"], j["key"]
    clocks = stability.clock_range(j.get("clock"))
    held = f" ({clocks})" if j["judgement"] == stability.POWER_LIMIT and clocks else ""
    out += [f"**{j['judgement']}**{held}: {MEANING[j['judgement']]}. A {key.get('dtype')} matmul "
            f"n={key.get('size')} ran back to back for {j.get('seconds')} s on "
            f"{key.get('device')}, in {s['n_windows']} windows of about "
            f"{(j.get('seconds') or 0) / max(1, s['n_windows']) * 1e3:.0f} ms.", ""]
    out += fmt.table(["median", "CV", "worst 1% / median", "drift (last 10% / first 10%)",
                      "windows > 10% below the median"],
                     [[fmt.value(j["median_flops"], "FLOP/s"), _pct(s["cv"]),
                       _pct(s["worst_1pct_ratio"]), _pct(s["drift"], sign=True),
                       str(s["drops"])]])
    out += [f"- {e}" for e in j["evidence"]]
    if j.get("reason"):
        out.append(f"- skipped, because {j['reason']}")
    if not j.get("aligned"):
        out.append("- the windows could not be put on the telemetry's clock: drops are matched "
                   "to the telemetry only roughly")
    drops = []
    for d in j["aligned_drops"][:5]:
        why = ", ".join(d["throttle"]) or ("clock drop" if d["clock_drop"] else "no reason")
        clock = f", SM {d['sm_clock_Hz'] / 1e6:.0f} MHz" if d.get("sm_clock_Hz") else ""
        power = f", {d['power_W']:.0f} W" if d.get("power_W") is not None else ""
        drops.append(f"at {d['t']:.1f} s {_pct(d['ratio'])} ({why}{clock}{power})")
    if drops:  # one line: five bullets of "no reason" said less than this
        out.append(f"- the deepest drops, as a share of the median: {'; '.join(drops)}")
    return out + [""]
