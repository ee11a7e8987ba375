"""report.html, the plots and measurements.csv: escaping, self-containment, which plots exist,
the CSV's shape, and a headless Chromium that shows the verdict at the top of the page."""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import render_md

from benchbench.analysis import verdict as verdict_mod
from benchbench.analysis.verdict_types import Verdict
from benchbench.core import results
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.stats import summarize
from benchbench.reports import csv as csv_report
from benchbench.reports import html, markdown, outputs, plots

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
PNG = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>"


def m(metric, key, value, unit, samples=None, statistic="median", **context):
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic=statistic,
        samples=samples or [value * 0.98, value, value * 1.01],
        higher_is_better=True,
        context=context,
    )


def verdict(**over):
    """A typed verdict from the dict that results.json caches, with `over` replacing keys."""
    v = {"analysis_version": 3, "workload": "resnet50", "unit": "samples/s", "sample": "image",
         "limiting_resource": "cpu_compute",
         "capacities": {"cpu_compute": 18.7, "cpu_dataloading": 137.7, "storage": 2147.0,
                        "host_memory": 110000.0, "interconnect": None},
         "capacity_details": {
             "storage": {"value": 2147.0, "how": "the dataset's cold read rate",
                         "status": "measured"},
             "interconnect": {"value": None, "status": "unknown", "how": "",
                              "missing": "the allreduce probe was skipped"}},
         "predicted_accelerator_utilisation": 1.0,
         "evidence": ["The CPU trains at **18.7 images/s**."], "advice": ["Train on a GPU."],
         "unknown": ["interconnect: the allreduce probe was skipped"],
         "constraints": [{"check": "GPU memory fit", "status": "ok", "detail": "batch 256"}],
         "first_epoch": {"limiting_resource": "storage", "detail": "cold reads"},
         "per_workload": {}}
    v.update(over)
    return Verdict.from_dict(v)


def telemetry():
    t = [i * 0.1 for i in range(30)]
    probe = {"t": t, "cpu_util": [0.5] * 30, "cpu_util_per_core": [[0.5, 0.5]] * 30,
             "disk_read_Bps": [2e8 + i * 1e6 for i in range(30)],
             "host_memory_used_B": [1e9] * 30, "downsampled_by": 1, "samples": 30,
             "gpus": {"0": {"util": [0.9] * 30, "mem_util": [0.4] * 30,
                            "sm_clock_Hz": [1.98e9] * 30, "mem_clock_Hz": [2.6e9] * 30,
                            "power_W": [650.0 + i for i in range(30)],
                            "temp_degC": [60.0] * 30, "throttle": [[]] * 30}}}
    later = {**probe, "t": [3.5 + x for x in t]}
    return {"interval_s": 0.1, "probes": {"resnet50": probe, "dataloader": later},
            "flags": {"resnet50": [f"GPU 0 power-capped {EVIL}"]}, "source": {}}


def full_run() -> RunResult:
    """Every plot's data: training at two precisions, all-reduce by size, loaders by workers,
    telemetry."""
    gpu = {"gpu_name": "NVIDIA H100 80GB HBM3"}
    train = ProbeResult(name="resnet50", status="ok", resource="gpu_compute", measurements=[
        m("throughput", {"device": "cuda:0", "precision": p, "image_size": 224}, v,
          "samples/s", **gpu) for p, v in (("fp32", 900.0), ("tf32", 1500.0),
                                          ("amp_bf16", 3000.0))])
    sizes = [1 << s for s in range(10, 28, 2)]
    ar = ProbeResult(name="allreduce", status="ok", resource="interconnect",
                     params={"backend": "nccl", "world_size": 8}, measurements=[
                         m(metric, {"backend": "nccl", "world_size": 8, "size_bytes": s},
                           f * (1e-5 + s / 3e11) if unit == "s" else s / (1e-5 + s / 3e11) * f,
                           unit)
                         for s in sizes for metric, f, unit in (
                             ("allreduce_time", 1.0, "s"), ("algbw", 1.0, "B/s"),
                             ("busbw", 1.75, "B/s"))])
    dl = ProbeResult(
        name="dataloader",
        status="ok",
        resource="cpu_dataloading",
        params={"usable_cores": 8},
        measurements=[
            m(
                "throughput",
                {"loader": ld, "workers": w, "batch_size": 64},
                r * (w + 1),
                "samples/s",
            )
            for ld, r in (("torchvision", 150.0), ("dali_cpu", 300.0))
            for w in (0, 2, 4, 8)
        ],
    )
    rates = [7.0e14 * (0.8 if i % 17 == 5 else 1.0) for i in range(60)]
    steady = ProbeResult(name="stability", status="ok", resource="gpu_compute", measurements=[
        Measurement(metric="sustained_flops", key={"device": "cuda:0", "dtype": "bf16",
                                                   "size": 8192},
                    value=7.0e14, unit="FLOP/s", statistic="median", samples=rates,
                    higher_is_better=True,
                    context={"window_s": 0.1, "seconds": 6.0,
                             "window_starts_s": [0.1 * i for i in range(60)]})])
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at="2026-11-30",
                     environment={"host": {"hostname": "gpu-node"}}, config={}, argv=[],
                     probes=[train, steady, ar, dl], extra={"telemetry": telemetry()})


def test_make_draws_every_plot_whose_data_exists():
    problems: list[str] = []
    figs = plots.make(full_run(), verdict(), problems)
    assert problems == []
    assert list(figs) == list(plots.NAMES)
    for png in figs.values():
        assert png.startswith(PNG) and len(png) > 5000


def test_plots_skipped_without_data():
    run = results.load(FIXTURE)  # matmul and memory bandwidth only, no verdict
    assert plots.make(run, None) == {}
    assert list(plots.make(run, verdict())) == ["capacities"]
    nothing_known = verdict(capacities={"storage": None, "cpu_compute": None})
    assert plots.make(run, nothing_known) == {}


def test_capacity_chart_survives_unknowns_and_one_value():
    one = verdict(capacities={"storage": 10.0, "gpu_compute": None}, limiting_resource=None)
    assert plots.capacities(one).startswith(PNG)
    wide = verdict(capacities={"gpu_compute": 1e6, "storage": 3.0}, per_workload={
        "transformer": verdict(workload="transformer", sample="token",
                               capacities={"gpu_compute": 5e5, "storage": 4e5}).to_dict()})
    assert plots.capacities(wide).startswith(PNG)


def test_a_failing_plot_is_reported_not_raised(monkeypatch):
    def broken(run):
        raise ValueError("no axis")

    monkeypatch.setattr(plots, "precision_speedups", broken)
    run = results.load(FIXTURE)
    problems: list[str] = []
    assert list(plots.make(run, verdict(), problems)) == ["capacities"]
    assert problems == ["precision_speedups: not drawn, because ValueError: no axis"]
    with pytest.raises(ValueError):
        plots.make(run, None)


def evil_run() -> RunResult:
    run = results.load(FIXTURE)
    run.label = EVIL
    run.environment["host"]["hostname"] = "<b>host</b>"
    run.environment["gpus"] = [{"index": 0, "name": "<img src=x onerror=alert(2)>",
                                "memory_total": 1 << 30}]
    run.probes.append(ProbeResult(name="storage", status="skipped", resource="storage",
                                  reason=f"path /data/{EVIL} is missing"))
    return run


def test_every_user_and_machine_string_is_escaped():
    v = verdict(evidence=[f"evidence {EVIL}"], advice=["advice <iframe>"],
                unknown=[f"storage: {EVIL}"], limiting_resource="<b>odd</b>")
    run = evil_run()
    page = html.render(run, v, ["## Doctor", "", f"- governor {EVIL}"], {},
                       markdown.render(run, v, []))
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;host&lt;/b&gt;" in page and "<b>" not in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "<iframe" not in page


def test_markdown_subset():
    got = html.markdown_to_html(["## A <x>", "", "| k | v |", "|---|---|",
                                 "| a\\|b | **1.5 GB/s** |", "", "- `code` & more", "",
                                 "plain <tag>", "continued"])
    assert '<h2 id="s-a-x">A &lt;x&gt;</h2>' in got
    assert "<td>a|b</td>" in got and '<td class="num"><strong>1.5 GB/s</strong></td>' in got
    assert "<li><code>code</code> &amp; more</li>" in got
    assert "<p>plain &lt;tag&gt; continued</p>" in got


def test_a_count_of_named_things_is_text_and_a_speedup_a_number():
    got = html.markdown_to_html(["| hardware | speedup | nodes |", "|---|---|---|",
                                 "| 8× NVIDIA H100 80GB HBM3 · Intel Xeon | 2.1× | 32 |",
                                 "| 4× NVIDIA L4 | 1.05× | 4 |"])
    assert "<td>8× NVIDIA H100 80GB HBM3 · Intel Xeon</td>" in got
    assert '<td class="num">2.1×</td>' in got and '<td class="num">32</td>' in got


def test_a_sentence_that_opens_with_a_figure_is_text_that_wraps():
    """A cell of a figure stays right-aligned on one line; a long one that opens with a figure
    (history's outlier runs: their values against the level around them) wraps as text."""
    long = ("575 TFLOP/s to 604 TFLOP/s against 782 TFLOP/s to 789 TFLOP/s; 2.24 kimages/s "
            "against 3.01 kimages/s")
    got = html.markdown_to_html(["| run | its value |", "|---|---|", f"| 5 | {long} |",
                                 "| 9 | 700 TFLOP/s against 789 TFLOP/s |"])
    assert f"<td>{long}</td>" in got and "<td>700 TFLOP/s against 789 TFLOP/s</td>" in got
    assert '<td class="num">5</td>' in got


def test_a_span_of_two_figures_breaks_before_its_to_only():
    """history's spans ("784 TFLOP/s to 787 TFLOP/s") kept on one line pushed the change points'
    "what changed" into a column a few words wide: a span may break before its "to", each
    figure whole; a single figure stays on one line."""
    got = html.markdown_to_html(["| series | before |", "|---|---|",
                                 "| a | 784 TFLOP/s to 787 TFLOP/s |", "| b | 3.01 kimages/s |"])
    assert ('<td class="num wrap">784&nbsp;TFLOP/s to&nbsp;787&nbsp;TFLOP/s</td>' in got
            and '<td class="num">3.01 kimages/s</td>' in got), got
    assert "td.num.wrap { white-space: normal; }" in html.CSS


def self_contained(page: str, n_images: int) -> None:
    links = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.I)
    assert not [u for u in links if "http" in u.lower() or u.startswith("//")]
    assert not re.search(r"<(script|link|iframe)\b|@import|url\(", page, re.I)
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == n_images
    assert all(base64.b64decode(i).startswith(PNG) for i in images)


def test_page_is_self_contained_and_opens_with_the_verdict():
    run = full_run()
    figs = plots.make(run, verdict())
    page = html.render(run, verdict(), [], figs, markdown_text="# t\n\n## Data path\n\nx\n")
    self_contained(page, len(plots.NAMES))
    body = page.split("<body>", 1)[1]
    assert body.lstrip().startswith('<section id="verdict"')
    assert "<h1>CPU compute <code>cpu_compute</code></h1>" in body
    # a CPU trains here: its rate leads, not an accelerator utilisation
    assert "No GPU here: training runs on the CPU at <strong>18.7 images/s</strong>" in \
        body.split("</section>")[0]
    # the loader figure sits under its section; the others without one are not dropped
    assert body.index("Data path") < body.index('id="fig-loader_workers"')
    assert 'id="fig-allreduce_busbw"' in body and 'id="fig-precision_speedups"' in body
    assert "GPU 0 power-capped &lt;script&gt;" in body


def test_an_old_run_opens_with_its_recomputed_verdict():
    run = results.load(FIXTURE)  # version 1: no verdict cached
    page = html.render(run, verdict_mod.verdict(run), [], {}, render_md(run))
    assert page.split("<body>")[1].lstrip().startswith('<section id="verdict"')
    assert "## " not in page and '<h2 id="s-environment">' in page  # report.md, converted
    self_contained(page, 0)


def test_light_import_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import benchbench.reports.html, benchbench.reports.plots\n"
            "import benchbench.reports.csv, benchbench.reports.outputs\n"
            "heavy = {'matplotlib', 'pandas'} & set(sys.modules)\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_csv_has_a_row_per_measurement_and_its_statistics(tmp_path):
    pd = pytest.importorskip("pandas")
    run = results.load(FIXTURE)
    path = tmp_path / "measurements.csv"
    csv_report.write(run, path)
    frame = pd.read_csv(path)
    measurements = [(p.name, x) for p in run.probes for x in p.measurements]
    assert len(frame) == len(measurements)
    keys = list(dict.fromkeys(f"key.{k}" for _, x in measurements for k in x.key))
    assert list(frame.columns) == ["probe", "metric", *keys, *csv_report.TRAILING]
    probe, first = measurements[0]
    s = summarize(first.samples)
    row = frame.iloc[0]
    assert (row["probe"], row["metric"], row["unit"]) == (probe, first.metric, first.unit)
    assert row["n"] == s.n and row["q1"] == pytest.approx(s.q1)
    assert row["cv"] == pytest.approx(s.cv) and bool(row["higher_is_better"])
    assert all(row[f"key.{k}"] == v for k, v in first.key.items())


def test_write_all_writes_the_files_and_drops_stale_plots(tmp_path):
    run = full_run()
    paths = outputs.write_all(run, tmp_path, verdict(), [], "# t\n")
    names = {p.relative_to(tmp_path).as_posix() for p in paths}
    assert names == {"report.html", "measurements.csv",
                     *(f"plots/{n}.png" for n in plots.NAMES)}
    assert all(p.is_file() for p in paths)
    assert (tmp_path / "plots" / "telemetry.png").read_bytes().startswith(PNG)
    run.extra.pop("telemetry")
    run.probes = []
    outputs.write_all(run, tmp_path, verdict(), [], "# t\n")
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["capacities.png"]


# --- headless Chromium: what a reader sees --------------------------------------------------

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(b)), None)
VERDICT_BG = (255, 243, 224)  # html.CSS's .verdict background, #fff3e0


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium) to "
                                             "render report.html; none is installed here")
def test_chromium_shows_the_verdict_at_the_top(tmp_path):
    image = pytest.importorskip("PIL.Image")
    run = evil_run()
    outputs.write_all(run, tmp_path, verdict(), ["## Doctor", "", "- all fine"],
                      markdown.render(run, verdict(), []))
    url = (tmp_path / "report.html").as_uri()
    shot = tmp_path / "shot.png"
    done = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.is_file()
    with image.open(shot) as im:
        rgb = im.convert("RGB")
        assert rgb.size == (1200, 900)
        assert len(rgb.getcolors(maxcolors=1 << 20)) > 16  # not blank
        top = rgb.crop((0, 0, 1200, 300))
        colours = top.getcolors(maxcolors=1 << 16)
        assert colours is not None and len(colours) > 8  # text on the top, not a uniform band
        share = sum(n for n, c in colours if c == VERDICT_BG) / (1200 * 300)
        assert share > 0.5, "the verdict block does not fill the top of the page"
    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = dom.stdout.split("<body>", 1)[1].lstrip()
    assert body.startswith('<section id="verdict" class="verdict">')
    assert "CPU compute" in body.split("</section>", 1)[0]
    assert "<script" not in dom.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium) to "
                                             "render report.html; none is installed here")
def test_a_quick_cpu_runs_page_is_short(tmp_path):
    """Issue 30: a `run --quick` on a 2-core VM gave a page 14,885 px tall at 1280 px wide (a
    wall of warnings, an energy table of "skipped", three all-reduce tables, every probe's
    tables open). Folded and merged, it is about 8,400 px; 10,000 leaves room for fonts."""
    image = pytest.importorskip("PIL.Image")
    run = results.load(FIXTURE.parent / "results_quick_cpu.json")
    v = verdict_mod.verdict(run)
    outputs.write_all(run, tmp_path, v, [], markdown.render(run, v, []))
    shot = tmp_path / "tall.png"
    done = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,12000",
                    (tmp_path / "report.html").as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    with image.open(shot) as im:
        rgb = im.convert("RGB")
        background = rgb.getpixel((1279, 11999))  # the margin beside the 1100 px column
        rows = [y for y in range(0, 12000, 10)
                if any(rgb.getpixel((x, y)) != background for x in range(0, 1200, 8))]
    assert rows and rows[-1] < 10_000, f"the page is {rows[-1] if rows else '?'} px tall"
