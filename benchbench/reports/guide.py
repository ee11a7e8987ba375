"""report.md's "Fine-tuning, fp8 and serving" section: the buyer's guide's three LLM-era claims
beside what the run measured (analysis/guide.py), then the memory_fit points against their
closed-form estimates, and the inference figures: offline, server, generation."""

from __future__ import annotations

from benchbench.analysis import guide
from benchbench.analysis.capacities import metric, ok_probe
from benchbench.analysis.memory_fit import billions
from benchbench.core import units as fmt
from benchbench.core.results import RunResult


def _claims(run: RunResult) -> list[str]:
    claims = guide.claims(run)
    out = fmt.table(["the guide says", "measured here", "against the claim"],
                    [[c.claim, c.measured or "—", c.check] for c in claims])
    derived = [line for c in claims for line in c.derived]
    return out + [f"- {line}" for line in derived] + ([""] if derived else [])


def _memory_fit(run: RunResult) -> list[str]:
    pr = ok_probe(run, "memory_fit")
    points = metric(pr, "step_peak_memory")
    if not points:
        return []
    rows = []
    for m in points:
        est = m.context["estimate"]
        per = est["bytes_per_param"]
        parts = " + ".join(f"{v:g}" for v in per.values())
        rows.append([m.key["mode"], m.key["rung"], billions(int(est["params"])),
                     fmt.iec(m.value), f"{fmt.iec(est['total_B'])} ({parts} B/param + "
                     f"{fmt.iec(sum(est['activations_B'].values()))} activations)",
                     f"{m.context['ratio']:.2f}", fmt.seconds(m.context["step_s"][-1])])
    source = points[0].context.get("memory_source")
    return ["### Memory fit", "",
            *fmt.table(["mode", "size", "parameters", "measured peak", "estimate",
                        "measured ÷ estimated", "step time"], rows),
            f"Measured: {source}. Estimate: weights, gradients, AdamW's two moments and the "
            "working copy in bytes per parameter (the estimators' 16-18), plus the "
            "activations each layer keeps for the backward, by its shape "
            "(analysis/memory_fit.py).", ""]


def _inference(run: RunResult) -> list[str]:
    pr = ok_probe(run, "inference")
    if pr is None:
        return []
    out = ["### Inference", ""]
    offline = metric(pr, "offline_throughput")
    if offline:
        out += fmt.table(["precision", "batch", "images/s"],
                         [[m.key["precision"], str(m.key["batch_size"]),
                           fmt.value(m.value, m.unit)] for m in offline])
    for m in metric(pr, "server_latency"):
        c = m.context
        met = "within" if c.get("meets_bound") else "over"
        out.append(f"Server: {m.key['rate']:,.0f} requests/s offered, p50 "
                   f"{c['p50_s'] * 1e3:,.3g} ms, p90 {c['p90_s'] * 1e3:,.3g} ms, p99 "
                   f"{c['p99_s'] * 1e3:,.3g} ms ({met} the {m.key['latency_bound_s'] * 1e3:g} "
                   f"ms bound), max {c['max_s'] * 1e3:,.3g} ms; mean batch "
                   f"{c['mean_batch']:.1f} of at most {m.key['max_batch']}, {len(m.samples)} "
                   "requests, Poisson arrivals.")
        out.append("")
    gen = {(m.metric, int(m.key["batch"])): m for m in pr.measurements
           if m.metric in ("prefill_throughput", "time_to_first_token",
                           "time_per_output_token", "decode_throughput")}
    batches = sorted({b for _, b in gen})
    if batches:
        def cell(name: str, b: int) -> str:
            m = gen.get((name, b))
            return "—" if m is None else fmt.value(m.value, m.unit)

        first = next(iter(gen.values()))
        out += [f"Generation ({first.key.get('preset')}, {first.context.get('prompt_tokens')}-"
                f"token prompt, {first.context.get('new_tokens')} new tokens, a KV cache):", ""]
        out += fmt.table(["batch", "prefill", "time to first token", "time per output token",
                          "decode"],
                         [[str(b), cell("prefill_throughput", b), cell("time_to_first_token", b),
                           cell("time_per_output_token", b), cell("decode_throughput", b)]
                          for b in batches])
    return out


def section(run: RunResult) -> list[str]:
    """The section, or nothing when the run measured none of it."""
    body = _memory_fit(run) + _inference(run)
    if not body and not any(ok_probe(run, p) for p in ("transformer", "matmul")):
        return []
    return ["## Fine-tuning, fp8 and serving: the buyer's guide's claims", "", *_claims(run),
            *body]
