"""The headline figures of a run beside the references of the GPU that ran, one table, for the
GPU check (scripts/gpu-validate.sh).

    python scripts/gpu_headline.py RUN_DIR_OR_RESULTS_JSON [--steps STEPS.tsv]
                                   [--ground-truth GROUND_TRUTH.json]

Every reference comes from the GPU's own rows: the published figures of its model
(references.toml, through analysis/reference_check) and its datasheet or PCIe link
(core/peaks.py), as scripts/_headline_references.py says; the first line names the GPU, and a
figure with no published reference for it says so. A figure the run did not measure is listed
as "not measured", with the probe's reason. With --ground-truth (scripts/ground_truth.py's
JSON: a minute of real training on the run's data) the verdict's predicted training rate and
limit are held against what that training measured. With --steps (gpu-validate.sh's
steps.tsv: step, exit, seconds, limit) the script's steps follow, a killed one as "timed out",
and the whole script's time against its 7 minutes.

GPT MFU: the reference is a band for what this probe runs, eager PyTorch (no torch.compile,
SDPA attention, fused AdamW) training gpt2-124m at 16 x 1024 tokens in bf16, against the GPU's
dense bf16 peak (989 TFLOP/s on an H100 or H200 SXM); 0.45 and more is what tuned, compiled
code reaches. The band's reasoning: gpt2-124m's width of 768 gives matmuls with K = 768 or
3072, at which cuBLAS runs well under the ~790 TFLOP/s of an 8192^3 matmul (0.8 of the peak,
the best case); its LayerNorm, GELU, residual adds and optimizer run unfused and memory-bound;
and nanoGPT reports that torch.compile nearly halves this model's step time on an A100 (about
250 ms to 135 ms), so eager code reaches about half of what tuned code does: 0.2 to 0.4 of the
peak. Under 0.2 says the GPU
is held back (clocks, power, a host too slow to launch the kernels); over 0.4 is better than
expected, not a fault.

The newer probes' figures follow, each with its reference: memory_fit's largest model per mode
(bounded by memory, the answer on a GPU) and its measured ÷ estimated memory at that size (near
1.0-1.2: the closed-form estimate leaves out the allocator's rounding and cuBLAS's workspaces);
the inference server's rate within MLPerf's p99 bound, with what drove it (LoadGen's Server
scenario, with its VALID/INVALID, p99 and completed samples/s; on the GPU box, which has no
network to install LoadGen, the simulated server, said so) and what stopped its search (at most
the offline rate at its largest batch; a search the budget cut short gives a lower bound); and
fp8 ÷ bf16, for the matmul (the GPU's published fp8 and bf16 matmul figures, mamf-finder's best
shapes: H100 SXM 1402.6 ÷ 794.5 = 1.77x) and for the transformer's training (at or below 1.0:
torchao's eager float8 is slower than bf16 below a width of about 2048, pytorch/ao#685, and
gpt2-124m's width is 768).

The matmul's SM clock: each peak's samples carry the SM clock NVML read around them
(analysis/clocks.py), shown with the rate per GHz of it, and fp16 ÷ bf16 per GHz held against
1.0 (Hopper's tensor cores do as many of each a cycle): the third H200 read fp16 9% under bf16
at its 700 W limit, and whether its clock or its work per cycle was short, the run could not
say.

GPT-2 124M decode TPOT: at batch 1 a token is ~300 small kernels, launch-bound, so a few ms in
eager PyTorch; the first two H200 runs read 35-58 ms, flat from step to step: cuDNN's attention
(first on Hopper in recent PyTorch) building a graph for every new key length. Generation now
leaves cuDNN out (models/gpt_generate.py): 2.2 ms on the third H200; this row keeps checking.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from itertools import takewhile
from typing import Any

import _headline_references as refs
import _headline_truth as truths

from benchbench.analysis import clocks, guide
from benchbench.analysis import derive as analysis
from benchbench.core import results
from benchbench.core import units as fmt
from benchbench.core.results import Measurement, RunResult

# The expected MFU of eager gpt2-124m in bf16 on Hopper-class GPUs (see the docstring).
MFU_BAND = (0.2, 0.4)
# A step killed by `timeout`: 124 when it stopped on the signal, 137 when --kill-after killed it.
TIMED_OUT = (124, 137)
SCRIPT_LIMIT_S = 420  # gpu_plan.py's TOTAL_LIMIT_S: the 7 minutes of one lent GPU's check


# (figure, reference text, test on the value, unit for display): the figures no published or
# datasheet row judges (_headline_references.py has those). The GPT MFU band's text names the
# GPU's peak (refs.mfu_reference).
REFERENCES: list[tuple[str, str, Callable[[float], bool], str]] = [
    ("GPT MFU amp_bf16", "", lambda v: v >= MFU_BAND[0], "ratio"),
    ("pipeline AU", "≥ 0.9, or the verdict names the loader and the cores it needs",
     lambda v: v >= 0.9, "ratio"),
    ("GPT-2 124M decode TPOT, bf16, batch 1", "≤ 10 ms: eager, ~300 kernels a token, bound by "
     "their launches on any GPU (see the docstring)", lambda v: v <= 0.010, "s"),
]

# The newer probes' references (see the docstring).
LARGEST_REF = ("bounded by memory, the answer on a GPU (time, free RAM or an estimate too far "
               "over the memory leave a lower bound)")
RATIO_BAND = (0.95, 1.25)  # "near 1.0-1.2"
RATIO_REF = "near 1.0-1.2 (the estimate leaves out the allocator's rounding and workspaces)"
SERVER_REF = ("within MLPerf's p99 bound; at most the offline rate at its largest batch; the "
              "search ends by narrowing or at that ceiling, not at the budget (then a lower "
              "bound)")
TRAINING_FP8 = 1.05  # at or below bf16, with a little noise
TRAINING_FP8_REF = ("≤ 1.0: eager float8 is slower than bf16 below a width of ~2048 "
                    "(pytorch/ao#685); gpt2-124m's is 768")


def _find(run: RunResult, probe: str, metric: str, **key: Any) -> float | None:
    pr = run.probe(probe)
    for m in pr.measurements if pr else []:
        if m.metric == metric and all(m.key.get(k) == v for k, v in key.items()):
            return m.value
    return None


def _note(run: RunResult, probe: str, prefix: str, what: str) -> str:
    """Why a figure is missing: the probe's own note about it, else its status."""
    pr = run.probe(probe)
    if pr is None:
        return f"the {probe} probe did not run"
    # The notes are joined by "; ", which a note may hold itself (the server's): the pieces
    # after it that begin no note of their own (no "because", no ":") are its.
    pieces = (pr.reason or "").split("; ")
    for i, piece in enumerate(pieces):
        if piece and piece.startswith(prefix):
            rest = takewhile(lambda p: "because" not in p and ":" not in p, pieces[i + 1:])
            return "; ".join([piece, *rest])
    if pr.status != "ok":
        return f"the {probe} probe {pr.status}: {pr.reason or 'no reason given'}"
    return f"the {probe} probe measured no {what}"


def _missing(why: str) -> str:
    return f"not measured: {why}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def memory_fit_rows(run: RunResult) -> list[tuple[str, str, str, str]]:
    """Per mode: the largest model that fitted, and measured ÷ estimated memory at its size."""
    pr = run.probe("memory_fit")
    largest = [m for m in (pr.measurements if pr else []) if m.metric == "largest_model"]
    if not largest:
        why = _missing(_note(run, "memory_fit", "", "largest model")).replace("|", "/")
        return [("memory_fit largest model", why, LARGEST_REF, "—"),
                ("memory_fit measured ÷ estimated", why, RATIO_REF, "—")]
    rows = []
    for m in largest:
        mode, c = m.key.get("mode"), m.context
        bound, rung = c.get("bounded_by"), c.get("rung")
        peak = fmt.si(c["peak_B"], "B") if c.get("peak_B") else "unknown"
        rows.append((f"memory_fit largest model ({mode})",
                     f"{m.value / 1e9:.2f} B parameters ({rung}, peak {peak}), bounded by "
                     f"{bound}", LARGEST_REF, _yes(bound == "memory")))
        ratio = _find(run, "memory_fit", "estimate_ratio", mode=mode, rung=rung)
        rows.append((f"memory_fit measured ÷ estimated ({mode}, {rung})",
                     f"{ratio:.2f}" if ratio else _missing(f"no estimate_ratio at {rung}"),
                     RATIO_REF,
                     _yes(RATIO_BAND[0] <= ratio <= RATIO_BAND[1]) if ratio else "—"))
    return rows


def _max_batch_rate(m: Measurement) -> float | None:
    """Images/s at the server's largest batch, as its own batch times measured it."""
    top = m.key.get("max_batch")
    took = (m.context.get("batch_s") or {}).get(str(top))
    return top / took if top and took else None


def server_row(run: RunResult) -> tuple[str, str, str, str]:
    """The inference server's best rate within its p99 bound, and what stopped its search."""
    pr = run.probe("inference")
    rates = [m for m in (pr.measurements if pr else []) if m.metric == "server_throughput"]
    best = max(rates, key=lambda m: m.value, default=None)
    if best is None:
        why = _note(run, "inference", "server", "server rate").replace("|", "/")
        return ("inference server rate", _missing(why), SERVER_REF, "—")
    precision, c = best.key.get("precision"), best.context
    offline = _find(run, "inference", "peak_offline_throughput", precision=precision)
    stopped = c.get("stopped_by")
    bound_ms = float(best.key.get("latency_bound_s") or 0) * 1e3
    # What drove it: LoadGen (its verdict, p99, completed rate) or the simulated server.
    driver = c.get("label") or "simulated server"
    if c.get("driver") == "loadgen":
        driver += (f": {'VALID' if c.get('valid') else 'INVALID'}, p99 "
                   f"{(c.get('p99_s') or 0) * 1e3:,.3g} ms, "
                   f"{c.get('completed_per_s') or 0:,.0f} samples/s completed")
    shown = (f"{best.value:,.0f} img/s ({precision}, p99 ≤ {bound_ms:g} ms; search stopped by "
             f"{stopped}" + (f"; {best.value / offline:.2f}x the offline peak" if offline
                             else "") + f"; {driver})")
    # A quick run's offline sweep may stop short of the server's largest batch, which the
    # server timed for itself (batch_s): its ceiling is the faster of the two.
    ceilings = [x for x in (offline, _max_batch_rate(best)) if x]
    ok = not guide.rate_is_lower_bound(best) and (not ceilings or
                                                  best.value <= max(ceilings) * 1.02)
    return ("inference server rate", shown.replace("|", "/"), SERVER_REF, _yes(ok))


def fp8_rows(run: RunResult) -> list[tuple[str, str, str, str]]:
    """fp8 ÷ bf16: the matmul's peaks, and the transformer's training throughput."""
    rows = []
    fp8 = _find(run, "matmul", "peak_flops", device="cuda:0", dtype="fp8")
    bf16 = _find(run, "matmul", "peak_flops", device="cuda:0", dtype="bf16")
    ref, least = refs.matmul_fp8_reference(run)
    if fp8 and bf16:
        rows.append(("matmul fp8 ÷ bf16", f"{fp8 / bf16:.2f}x", ref,
                     _yes(fp8 / bf16 >= least) if least else "—"))
    else:
        why = _note(run, "matmul", "bf16" if fp8 else "fp8", "fp8 and bf16 peak on cuda:0")
        rows.append(("matmul fp8 ÷ bf16", _missing(why.replace("|", "/")), ref, "—"))
    fp8 = _find(run, "transformer", "throughput", precision="fp8")
    bf16 = _find(run, "transformer", "throughput", precision="amp_bf16")
    if fp8 and bf16:
        rows.append(("transformer fp8 ÷ amp_bf16", f"{fp8 / bf16:.2f}x", TRAINING_FP8_REF,
                     _yes(fp8 / bf16 <= TRAINING_FP8)))
    else:
        why = _note(run, "transformer", "amp_bf16" if fp8 else "fp8",
                    "fp8 and amp_bf16 throughput")
        rows.append(("transformer fp8 ÷ amp_bf16", _missing(why.replace("|", "/")),
                     TRAINING_FP8_REF, "—"))
    return rows


PER_CYCLE_BAND = (0.95, 1.05)
PER_CYCLE_REF = ("≈ 1.0: Hopper's tensor cores do as many fp16 as bf16 FLOP a cycle, so where "
                 "the rates differ and this does not, the clocks do (the power the data draws)")


def clock_rows(run: RunResult) -> list[tuple[str, str, str, str]]:
    """The SM clock each matmul peak's samples ran at, and fp16 against bf16 per GHz of it:
    the third H200 read fp16 9% under bf16 at its power limit, with no clock per sample to
    say why."""
    pr = run.probe("matmul")
    at: dict[str, clocks.AtClock] = {}
    for m in pr.measurements if pr else []:
        if m.metric == "peak_flops" and m.key.get("device") == "cuda:0":
            got = clocks.at_clock(run, clocks.behind(pr, m))
            if got is not None:
                at[str(m.key.get("dtype"))] = got
    if not at:
        on_gpu = pr is not None and any(m.key.get("device") == "cuda:0"
                                        for m in pr.measurements)
        why = ("the matmul probe did not run" if pr is None else
               "the matmul measured no GPU" if not on_gpu else
               "its samples carry no SM clock (NVML unreadable, or a run before the clocks "
               "were read)")
        return [("matmul SM clock", _missing(why), "—", "—")]
    rows = []
    for dt, c in at.items():
        share = f" ({c.share:.0%} of {c.max_Hz / 1e6:,.0f})" if c.max_Hz else ""
        rows.append((f"matmul {dt} SM clock", f"{c.clock_Hz / 1e6:,.0f} MHz{share}, "
                     f"{fmt.si(c.per_GHz, 'FLOP/s')} per GHz", "—", "—"))
    if "fp16" in at and "bf16" in at:
        r = at["fp16"].per_GHz / at["bf16"].per_GHz
        rows.append(("matmul fp16 ÷ bf16 per GHz of SM clock", f"{r:.3f}", PER_CYCLE_REF,
                     _yes(PER_CYCLE_BAND[0] <= r <= PER_CYCLE_BAND[1])))
    return rows


def figures(run: RunResult) -> dict[str, float | None]:
    """The figures of REFERENCES, by name."""
    mfu = [r["mfu"] for r in analysis.transformer_utilisation(run)
           if r["key"].get("precision") == "amp_bf16" and r["mfu"] is not None]
    # A pipeline timed over less than one round of its workers timed no rate (derive.py).
    au = [r["au"] for r in analysis.accelerator_utilisation(run) if not r["partial_round"]]
    return {
        "GPT MFU amp_bf16": max(mfu) if mfu else None,
        "pipeline AU": max(au) if au else None,
        "GPT-2 124M decode TPOT, bf16, batch 1": _find(run, "inference", "tpot",
                                                       preset="gpt2-124m", precision="bf16",
                                                       batch=1),
    }


def read_steps(path: str) -> list[dict[str, Any]]:
    """gpu-validate.sh's steps.tsv: one row per step (step, exit, seconds, limit)."""
    with open(path, encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
    return [{"step": r[0], "exit": int(r[1]), "seconds": int(r[2]), "limit": int(r[3])}
            for r in rows[1:] if len(r) == 4]


def step_status(row: dict[str, Any]) -> str:
    if row["exit"] in TIMED_OUT:
        return f"timed out at its {row['limit']} s limit"
    return "ok" if row["exit"] == 0 else f"exit {row['exit']}"


def table(run: RunResult, steps: list[dict[str, Any]] | None = None,
          truth: dict[str, Any] | None = None) -> list[str]:
    got = figures(run)
    lines = [refs.gpu_line(run), "", "| figure | measured | reference | meets it |",
             "|---|---|---|---|"]
    lines += [f"| {name} | {shown} | {ref} | {meets} |"
              for name, shown, ref, meets in refs.reference_rows(run)]
    for name, ref, ok, unit in REFERENCES:
        v = got.get(name)
        ref = ref or refs.mfu_reference(run, MFU_BAND)
        lines.append(f"| {name} | {refs.show(v, unit) if v is not None else 'not measured'} | "
                     f"{ref} | {'—' if v is None else ('yes' if ok(v) else 'NO')} |")
    newer = [*memory_fit_rows(run), server_row(run), *fp8_rows(run), *clock_rows(run)]
    if truth is not None:
        newer.append(truths.truth_row(run, truth))
    lines += [f"| {name} | {shown} | {ref} | {meets} |" for name, shown, ref, meets in newer]
    lines += ["", "| probe | status | seconds | note |", "|---|---|---|---|"]
    for p in run.probes:
        lines.append(f"| {p.name} | {p.status} | {p.duration_s or 0:.1f} | "
                     f"{(p.reason or '').replace('|', '/')[:160]} |")
    if steps is not None:
        lines += ["", "| step | status | seconds | limit |", "|---|---|---|---|"]
        lines += [f"| {r['step']} | {step_status(r)} | {r['seconds']} | {r['limit']} |"
                  for r in steps]
        run_row = next((r for r in steps if r["step"].startswith("benchbench run")), None)
        if run_row and run_row["exit"] in TIMED_OUT:
            lines += ["", f"benchbench run: timed out after {run_row['seconds']} s (its limit "
                          f"{run_row['limit']} s); the probes after the one in flight did not "
                          "run"]
        elif run_row:
            lines += ["", f"benchbench run: {run_row['seconds']} s (limit {run_row['limit']} s)"]
        total = sum(r["seconds"] for r in steps)
        lines += [f"steps in all: {total} s (reference: ≤ {SCRIPT_LIMIT_S} s, the 7 minutes "
                  f"of one lent GPU) — {'yes' if total <= SCRIPT_LIMIT_S else 'NO'}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a run folder or its results.json")
    ap.add_argument("--steps", help="gpu-validate.sh's steps.tsv")
    ap.add_argument("--ground-truth", help="scripts/ground_truth.py's JSON (a missing file: "
                                           "the ground truth did not run)")
    a = ap.parse_args(argv)
    try:
        run = results.load(a.results)
        steps = read_steps(a.steps) if a.steps else None
        truth = truths.read_truth(a.ground_truth) if a.ground_truth else None
    except (results.ResultsError, OSError, ValueError) as exc:
        print(f"gpu_headline: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(run, steps, truth)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
