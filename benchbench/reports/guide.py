"""report.md's "Fine-tuning, fp8 and serving" section: the buyer's guide's three LLM-era claims
beside what the run measured (analysis/guide.py), then the memory_fit points against their
closed-form estimates, and the inference figures: offline, server, generation."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import guide, inference
from benchbench.analysis.capacities import metric, ok_probe
from benchbench.analysis.memory_fit import EDGE_HEADROOM, at_least, billions, edge_text
from benchbench.core import units as fmt
from benchbench.core.names import opened
from benchbench.core.results import Measurement, ProbeResult, RunResult


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
        rows.append([m.key["mode"], m.key["rung"], billions(int(est["params"])),
                     fmt.iec(m.value), f"{fmt.iec(est['total_B'])} ({_parts(est)})",
                     f"{m.context['ratio']:.2f}", fmt.seconds(m.context["step_s"][-1])])
    source = points[0].context.get("memory_source")
    edges = [f"Largest that fits, {m.key['mode']}: "
             + ("at least " if at_least(m) else "") + f"{m.context['rung']}; {edge_text(m)}."
             for m in metric(pr, "largest_model")
             if m.context.get("bounded_by") == "memory" and edge_text(m)]
    return ["### Memory fit", "",
            *fmt.table(["mode", "size", "parameters", "measured peak", "estimate",
                        "measured ÷ estimated", "step time"], rows),
            *edges, *([f"A fit with less than {EDGE_HEADROOM:.0%} of the device left fits at "
                       "its edge: allocator fragmentation or another process tips it over.",
                       ""] if edges else []),
            f"Measured: {source}. Estimate: the weights and AdamW's two moments, held "
            "throughout, plus the larger end of the backward: its start, with the working "
            "copy (autocast's low-precision weights) and the activations each layer keeps, by "
            "its shape, or its end, with every gradient (analysis/memory_fit.py). The "
            "estimators' sum of all of it (16-18 B a parameter and every activation) "
            "overstated the first H200s' peaks by 14-25%.", ""]


def _parts(est: dict[str, Any]) -> str:
    """The estimate's terms: what is held, and the two ends of the backward; for a run from
    before that rule (its estimate the sum of every part), that sum's terms."""
    per = est["bytes_per_param"]
    acts_B = sum(est["activations_B"].values())
    acts = fmt.iec(acts_B)
    if abs(est["total_B"] - (est["params"] * sum(per.values()) + acts_B)) < 1.0:
        return (" + ".join(f"{v:g}" for v in per.values()) + f" B/param + {acts} activations, "
                "all summed, as this run estimated it")
    start = (f"{per['working_copy']:g} B/param + {acts} activations" if per.get("working_copy")
             else f"{acts} activations")
    return (f"{per['weights'] + per['optimizer']:g} B/param + the larger of {start} and "
            f"{per['gradients']:g} B/param gradients")


def _inference(run: RunResult) -> list[str]:
    pr = ok_probe(run, "inference")
    if pr is None:
        return []
    out = ["### Inference", ""]
    offline = metric(pr, "offline_throughput")
    if offline:
        host = inference.host_bound(pr)
        out += fmt.table(["precision", "batch", "images/s", "what the time measures"],
                         [[m.key["precision"], str(m.key["batch_size"]),
                           fmt.value(m.value, m.unit),
                           host.get((m.key["precision"], m.key["batch_size"]), "—")]
                          for m in offline])
        out += [f"Best offline {p.key['precision']}, batch {p.context.get('best_batch_size')}: "
                f"{inference.peak_text(pr, p)}."
                for p in metric(pr, "peak_offline_throughput")]
        out += ["A batch times the host's launch path where the next larger batch measured ran "
                f"at least {inference.LINEAR_SHARE:g}x the batch ratio faster (a doubled batch "
                f"at {2 * inference.LINEAR_SHARE:g}x the rate or more: the call's time hardly "
                "grew with its work), or where fp32 ran as fast as a half precision at that "
                "batch: its rate is the host's (Python and kernel launches), not the GPU's.", ""]
    for m in metric(pr, "loadgen_offline_throughput"):
        c = m.context
        out += [f"Offline ({c.get('label')}): {fmt.value(m.value, m.unit)} at batch "
                f"{m.key['batch_size']}, {m.key['precision']}, {_verdict(c)}; "
                f"{c.get('samples')} samples, the batch sweep's best "
                f"{fmt.value(c.get('sweep_samples_per_s') or 0, m.unit)}."
                + _settings(c) + _logs(c.get("logs")), ""]
    # the target rates served (an older run's figure is its target)
    served = {m.context.get("target_qps", m.value) for m in metric(pr, "server_throughput")}
    out += [line for m in metric(pr, "server_latency") for line in _server(m, served)]
    return out + _generation(pr)


def _verdict(c: dict[str, Any]) -> str:
    """LoadGen's VALID or INVALID, and why not."""
    if c.get("valid"):
        return "VALID"
    return "INVALID" + (f" ({c['why_invalid']})" if c.get("why_invalid") else "")


def _server(m: Measurement, served: set[float]) -> list[str]:
    """The server figure, or why there is none, with LoadGen's verdict and p99 (or the
    simulated server's, labelled so) and every rate tried."""
    c, k = m.context, m.key
    ms = f"{k['latency_bound_s'] * 1e3:g} ms"
    source = opened(c.get("bound_source") or "MLPerf's 15 ms")
    floor = "at least " if c.get("lower_bound") else ""
    done = c.get("completed_per_s") if c.get("driver") == "loadgen" else None
    head = (f"Server ({opened(c.get('label', 'simulated server'))}): "
            + ((f"{floor}{done:,.0f} samples/s completed, LoadGen's figure, at a target of "
                f"{k['rate']:,.0f} queries/s" if done else
                f"{floor}{m.key['rate']:,.0f} requests/s served")
               if k.get("rate") in served else "no rate served")
            + f" within the {ms} p99 bound ({source}).")
    loadgen = c.get("driver") == "loadgen"
    at = (f"At {k['rate']:,.0f} requests/s " + (f"LoadGen said {_verdict(c)}, " if loadgen
                                                 else "")
          + f"p99 {c['p99_s'] * 1e3:,.3g} ms, p90 {c['p90_s'] * 1e3:,.3g} ms, p50 "
          f"{c['p50_s'] * 1e3:,.3g} ms"
          + (f", {c['completed_per_s']:,.0f} samples/s completed" if c.get("completed_per_s")
             else "")
          + f"; mean batch {c['mean_batch']:.1f} of at most {k['max_batch']}, "
          f"{len(m.samples)} requests.")
    tried = [f"{t['rate']:,.0f}/s " + (("VALID" if t.get("valid") else "INVALID")
                                       + (" (a retry)" if t.get("retry") else "")
                                       if loadgen else f"p99 {t['p99_s'] * 1e3:,.3g} ms")
             for t in c.get("tried") or []]
    short = [f"Not judged: {guide.short_run(c)}."] if c.get("short_run") else []
    logs = (_settings(c) + _logs(c.get("best_logs") or c.get("logs"))).strip()
    return [head, at, *short, f"Rates tried, in order: {', '.join(tried)}; the search "
            f"stopped: {c.get('stopped_by')}.", *([logs] if logs else []), ""]


def _settings(c: dict[str, Any]) -> str:
    """' LoadGen's settings: mlperf.conf's resnet50 … .' where the run recorded them."""
    return f" LoadGen's settings: {c['settings_from']}." if c.get("settings_from") else ""


def _logs(files: Any) -> str:
    """' LoadGen's logs: `inference/offline_summary.txt`, ….' (in the run folder)."""
    if not files:
        return ""
    return " LoadGen's logs: " + ", ".join(f"`{f}`" for f in files) + "."


GENERATION = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"))


def _generation(pr: ProbeResult) -> list[str]:
    """vLLM's benchmark metrics per decode batch: latencies as mean / median / p99."""
    gen = {(m.metric, int(m.key["batch"])): m for m in pr.measurements
           if m.metric in ("ttft", "tpot", "itl", "output_throughput", "decode_throughput")}
    batches = sorted({b for _, b in gen})
    if not batches:
        return []

    def spread(name: str, b: int) -> str:
        m = gen.get((name, b))
        return "—" if m is None else " / ".join(
            fmt.seconds(m.context[s]) for s in ("mean_s", "median_s", "p99_s"))

    def rate(name: str, b: int) -> str:
        m = gen.get((name, b))
        return "—" if m is None else fmt.value(m.value, m.unit)

    first = next(iter(gen.values()))
    c = first.context
    runs = c.get("generations")
    out = [f"Generation ({first.key.get('preset')}, {c.get('prompt_tokens')}-token prompt, "
           f"{c.get('new_tokens')} new tokens, a KV cache, {runs} generation"
           f"{'' if runs == 1 else 's'} a batch), as vLLM's benchmark_serving defines its "
           "metrics: TTFT per request, TPOT = (latency - TTFT) / (output tokens - 1) per "
           "request, ITL every step; mean / median / p99. Output tokens/s include the "
           "prefill; decode tokens/s do not.", ""]
    return out + fmt.table(
        ["batch", *[f"{label} mean / median / p99" for _, label in GENERATION],
         "output tokens/s", "decode tokens/s"],
        [[str(b), *[spread(name, b) for name, _ in GENERATION],
          rate("output_throughput", b), rate("decode_throughput", b)] for b in batches])


def section(run: RunResult) -> list[str]:
    """The section, or nothing when the run measured none of it."""
    body = _memory_fit(run) + _inference(run)
    if not body and not any(ok_probe(run, p) for p in ("transformer", "matmul")):
        return []
    return ["## Fine-tuning, fp8 and serving: the buyer's guide's claims", "", *_claims(run),
            *body]
