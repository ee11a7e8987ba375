"""report.md and report.html read by a new user of a 2-core CPU VM (issue 30): warnings one line
per probe, a section with nothing measured as one line, no table that repeats another, a
first screen about the CPU that trains, human names in prose, advice from the workload's own
measurements."""

import re
from pathlib import Path

import pytest
from helpers import render_md
from synthetic_runs import cpu_run

from benchbench.analysis import verdict as verdict_mod
from benchbench.core import results
from benchbench.core import units as fmt
from benchbench.core.results import RESOURCES, Measurement, ProbeResult, RunResult
from benchbench.core.stats import summarize
from benchbench.reports import csv as csv_report
from benchbench.reports import energy as energy_report
from benchbench.reports import html, interconnect, markdown

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
# results.json of a real `run --quick` on a loaded 2-core VM (no GPU, no NVML, no RAPL), its
# telemetry's time series cut to two points (they only feed the telemetry plot).
QUICK = FIXTURES / "results_quick_cpu.json"
RAW_IDS = sorted(r for r in RESOURCES if "_" in r)  # "storage" is a word as well as an id


def meas(metric, key, samples, unit, statistic="median", **context):
    return Measurement(metric=metric, key=key, value=sorted(samples)[len(samples) // 2],
                       unit=unit, statistic=statistic, samples=list(samples),
                       higher_is_better=unit != "s", context=context)


def spread(v, d):
    """Three samples around v, d apart (relative): CV grows with d."""
    return [v * (1 - d), v, v * (1 + d)]


def allreduce(world=2, sizes=20, noisy=14):
    """gloo all-reduce at `sizes` sizes from 1 KiB; the first `noisy` sizes vary 30–60%
    between samples, the rest 1%. busbw = algbw × 2(n−1)/n, which is algbw at 2 ranks."""
    factor = 2 * (world - 1) / world
    ms = []
    for i in range(sizes):
        size = 1024 << i
        d = 0.3 + 0.3 * i / max(1, noisy - 1) if i < noisy else 0.01
        t = spread(1e-4 + size / 1e9, d)
        key = {"backend": "gloo", "world_size": world, "size_bytes": size}
        alg = [size / x for x in t]
        ms += [meas("allreduce_time", key, t, "s", iters_per_sample=20),
               meas("algbw", key, alg, "B/s"),
               meas("busbw", key, [a * factor for a in alg], "B/s")]
    return ProbeResult(name="allreduce", status="ok", resource="interconnect",
                       params={"backend": "gloo", "world_size": world}, measurements=ms)


def noisy_run(world=2):
    matmul = ProbeResult(name="matmul", status="ok", resource="cpu_compute", measurements=[
        meas("flops", {"device": "cpu", "dtype": "fp32", "size": n}, spread(1e10, d), "FLOP/s")
        for n, d in ((256, 0.2), (512, 0.01))])
    return RunResult(tool={"name": "benchbench", "version": "t"}, started_at="t",
                     environment={"host": {"hostname": "vm"}},
                     config={"device_resolved": "cpu"}, argv=[],
                     probes=[matmul, allreduce(world)])


def section(text, title):
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


# --- 1. warnings: one line per probe, worst first; the rows in the HTML fold and the CSV ------

def test_noisy_measurements_are_one_line_per_probe_worst_first():
    run = noisy_run()
    text = render_md(run)
    assert len(re.findall("re-run", text, re.IGNORECASE)) <= 10  # was one per row: 44
    bullets = [ln for ln in section(text, "Noisy measurements").splitlines()
               if ln.startswith("- ")]
    cvs = [summarize(m.samples).cv for m in run.probe("allreduce").measurements
           if summarize(m.samples).unstable]
    low, high = fmt.percent(min(cvs)).removesuffix("%"), fmt.percent(max(cvs))
    matmul = fmt.percent(summarize(spread(1e10, 0.2)).cv)
    assert bullets == [f"- All-reduce (`allreduce`): 14 of 20 sizes noisy, CV {low}–{high}",
                       f"- Matrix multiply (`matmul`): 1 of 2 sizes noisy, CV {matmul}"]
    assert "size_bytes=" not in section(text, "Noisy measurements")  # no row-by-row wall


def test_the_noisy_rows_stay_behind_a_fold_and_in_the_csv():
    run = noisy_run()
    v = verdict_mod.verdict(run)
    page = html.render(run, v, [], {}, markdown.render(run, v, []))
    fold = page.split("<details><summary>The ", 1)[1].split("</details>", 1)[0]
    # 14 noisy sizes: time and algbw = busbw (one row: the same samples), and the matmul row
    assert fold.startswith("29 noisy measurements, one by one</summary>")
    assert fold.count("<tr>") == 1 + 29 and "algbw = busbw" in fold  # the header, the rows
    columns, rows = csv_report.rows(run)
    assert columns[-1] == "warning"
    flagged = [r for r in rows if r["warning"]]
    assert len(flagged) == 14 * 3 + 1 and len(rows) == 20 * 3 + 2
    assert flagged[0]["warning"].startswith("noisy: CV 20.0% over 3 samples, above 5.0%")


# --- 2. a section with nothing measured is one line that says why ----------------------------

def test_energy_without_nvml_or_rapl_is_one_line():
    run = results.load(QUICK)
    text = "\n".join(energy_report.section(run))
    assert text.count("Energy: not measured, because") == 1
    assert "| probe | time | GPU energy" not in text and "skipped |" not in text
    assert text.count("no RAPL zone") == 1 and text.count("NVML is unavailable") == 1
    # steal was measured: one line for the calm probes, not twelve
    assert len([ln for ln in text.splitlines() if ln.startswith("- CPU steal")]) == 1


# --- 3. a table that repeats another at this scale is merged ---------------------------------

def test_algbw_and_busbw_are_one_column_and_one_table_at_two_ranks():
    two = "\n".join(interconnect.section(noisy_run(world=2)))
    assert "| size | time | algbw = busbw | all-reduces per sample |" in two
    assert "At 2 ranks the bus factor 2(n−1)/n is 1" in two
    probe = section(render_md(noisy_run(world=2)), "Measurements, probe by probe")
    assert probe.count("**`algbw`** = **`busbw`**") == 1 and "\n**`busbw`**\n" not in probe
    eight = "\n".join(interconnect.section(noisy_run(world=8)))
    assert "| size | time | algbw | busbw | all-reduces per sample |" in eight
    assert "\n**`busbw`**\n" in section(render_md(noisy_run(world=8)),
                                       "Measurements, probe by probe")


# --- 4. the first screen speaks to what this machine is --------------------------------------

def test_a_cpu_box_opens_with_the_cpu_that_trains_not_accelerator_utilisation():
    run = cpu_run("2026-01-01T00:00:00Z")
    v = verdict_mod.verdict(run)
    rate = fmt.figure(v.main.capacity("cpu_compute"))
    text = render_md(run)
    verdict_part = section(text, "Verdict")
    assert verdict_part.startswith(": CPU compute limits ResNet50 training here\n\nNo GPU here: "
                                   f"training runs on the CPU at **{rate} images/s** "
                                   "(ResNet50, fp32), limited by CPU compute. A GPU would")
    assert "accelerator utilisation" not in verdict_part
    page = html.render(run, v, [], {}, text)
    hero = page.split('<section id="verdict"', 1)[1].split("</section>", 1)[0]
    assert "No GPU here: training runs on the CPU at <strong>" in hero
    assert "accelerator utilisation" not in hero.lower()


def test_a_gpu_box_keeps_the_predicted_accelerator_utilisation():
    from test_verdict import gpu_run

    run = gpu_run(loader=1200.0)
    text = render_md(run)
    assert "predicted accelerator utilisation **48.0%**" in section(text, "Verdict")
    page = html.render(run, verdict_mod.verdict(run), [], {}, text)
    assert "Predicted accelerator utilisation: <strong>48.0%</strong>" in page


def test_evidence_opens_with_the_limits_own_and_repeats_nothing():
    """A CPU run whose set fits in RAM: compute limits, so the storage/first-epoch line is
    not the first evidence; the set's name is not said twice in one sentence."""
    run = cpu_run("2026-01-01T00:00:00Z")
    run.environment["host"]["memory_available"] = 1024 * 2**30
    run.extra["dataset"] = {"source": "generated", "num_images": 256, "mean_file_size": 110e3}
    v = verdict_mod.verdict(run).main
    assert v.limiting_resource == "cpu_compute" and v.first_epoch is not None
    about_storage = [i for i, e in enumerate(v.evidence) if "storage" in e.lower()]
    about_compute = [i for i, e in enumerate(v.evidence) if "compute" in e.lower()]
    assert about_compute[0] == 0 and min(about_storage) > max(about_compute)
    text = render_md(run)
    evidence = section(text, "Verdict").split("**Evidence**", 1)[1].split("**What", 1)[0]
    first = [ln for ln in evidence.splitlines() if ln.startswith("- ")][0]
    assert "storage" not in first.lower() and "first epoch" not in first
    assert "fits in the" not in evidence  # said once, on the First epoch line
    for line in text.splitlines():
        assert line.count("ImageNet-1k") <= 1, line


# --- 5. human names in prose; ids only in code -----------------------------------------------

def _prose(md: str) -> str:
    """report.md without its code spans: what a person reads as words."""
    return re.sub(r"`[^`\n]*`", "", md)


@pytest.mark.parametrize("run", [
    pytest.param(lambda: results.load(QUICK), id="real quick run"),
    pytest.param(lambda: results.load(FIXTURES / "results_v1_cpu.json"), id="v1 cpu fixture"),
    pytest.param(lambda: cpu_run("2026-01-01T00:00:00Z"), id="cpu run"),
    pytest.param(lambda: noisy_run(), id="noisy run"),
])
def test_no_raw_resource_ids_in_report_md_prose(run):
    text = _prose(render_md(run()))
    found = {r: text.count(r) for r in RAW_IDS if r in text}
    assert not found, [ln for ln in text.splitlines() if any(r in ln for r in found)][:5]


def test_no_raw_resource_ids_in_a_gpu_report():
    from test_verdict import gpu_run

    for run in (gpu_run(), gpu_run(loader=1200.0), gpu_run(h2d=1e9), gpu_run(
            gpus=8, busbw=10e9, h2d=400e9, loader=1e6, cold_files=1e6)):
        text = _prose(render_md(run))
        assert not [r for r in RAW_IDS if r in text], run


# --- 6. advice rests on the workload it speaks of --------------------------------------------

def _training(resnet_amp=None):
    """ResNet50 fp32 (amp_bf16 measured only when `resnet_amp` is its speedup, else skipped
    for time); the transformer in fp32 and amp_bf16, 1.42× apart."""
    run = cpu_run("2026-01-01T00:00:00Z")
    res = run.probe("resnet50")
    if resnet_amp is None:
        res.reason = "amp_bf16 skipped, because one warm step takes ~31 s, beyond its budget"
    else:
        fp32 = res.measurements[0]
        res.measurements.append(meas("throughput", {**fp32.key, "precision": "amp_bf16"},
                                     [fp32.value * resnet_amp] * 2, "samples/s",
                                     "total_over_time"))
    tr = run.probe("transformer")
    fp32 = tr.measurements[0]
    tr.measurements.append(meas("throughput", {**fp32.key, "precision": "amp_bf16"},
                                [fp32.value * 1.42] * 2, "tokens/s", "total_over_time"))
    return run


def test_amp_advice_for_resnet50_only_from_resnet50s_own_amp():
    v = verdict_mod.verdict(_training())
    assert v.main.precision == "fp32"
    assert not any("train in AMP" in a or "train it in mixed" in a for a in v.main.advice)
    assert ("The transformer trained 1.42× faster in bf16 mixed precision than in fp32; "
            "ResNet50's mixed precision was not measured, because amp_bf16 skipped, because one "
            "warm step takes ~31 s, beyond its budget: measure it before changing its recipe."
            ) in v.main.advice
    measured = verdict_mod.verdict(_training(resnet_amp=0.5)).main
    # ResNet50's own AMP was measured, and slower: no AMP advice, whatever the transformer did
    assert not any("mixed precision" in a for a in measured.advice)


def test_amp_advice_when_resnet50s_own_amp_was_faster():
    run = _training(resnet_amp=2.0)
    # judged in its best precision, AMP already: nothing to advise
    assert verdict_mod.verdict(run).main.precision == "amp_bf16"
    assert not any("mixed precision" in a for a in verdict_mod.verdict(run).main.advice)


def test_why_resnet50s_amp_is_missing_from_a_quick_cpu_run():
    run = _training()
    run.probe("resnet50").reason = None
    run.probe("resnet50").params = {"precisions": ["fp32"]}
    (line,) = [a for a in verdict_mod.verdict(run).main.advice if "transformer" in a]
    assert "because this run asked only for fp32 (`resnet50.precisions`" in line


# --- the page's height ------------------------------------------------------------------------

def test_the_probe_tables_are_folded_in_html():
    run = results.load(QUICK)
    v = verdict_mod.verdict(run)
    page = html.render(run, v, [], {}, markdown.render(run, v, []))
    measured = [p for p in run.probes if p.status == "ok"]
    assert page.count("<details><summary>") >= len(measured) + 1
    for p in measured:
        assert f"<summary>{html.inline(markdown.probe_title(p.name, p.resource))}</summary>" \
            in page


def test_every_report_signs_a_change_alike_with_a_true_minus():
    """compare, history, fleet, the stability probe and the clocks all print a change through
    one formatter: '−20.0%' (U+2212, as wide as the plus), never '-20.0%' beside '−20.0%'."""
    assert fmt.signed_percent(-20) == "−20.0%" and fmt.signed_percent(3.24) == "+3.2%"
    assert fmt.signed_percent(-79.3, 0) == "−79%"
    from benchbench.reports import history_text
    assert history_text.pct(-5.44) == "−5.4%"
