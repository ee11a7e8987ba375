"""The terminal ends with the answer: the verdict in words, the report's one path, and the
timing breakdown only with --verbose. The formatter from hand-built runs, then the real CLI."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_runs import cpu_run, gpu_node

from benchbench.analysis.verdict import verdict
from benchbench.commands import summary
from benchbench.core import results
from benchbench.core import units as fmt
from benchbench.core.results import RESOURCES

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
RAW_IDS = sorted(r for r in RESOURCES if "_" in r)  # "storage" is a word as well as an id
WRITTEN = [Path("/runs/a/report.md"), Path("/runs/a/report.html"),
           Path("/runs/a/measurements.csv"), Path("/runs/a/plots/verdict.png")]


def _no_raw_ids(text):
    return [r for r in RAW_IDS if r in text]


def test_cpu_run_names_the_limit_its_rate_the_next_limit_and_one_advice():
    v = verdict(cpu_run("2026-01-01T00:00:00Z"))
    got = summary.lines(v)
    compute = fmt.figure(v.main.capacity("cpu_compute"))
    loader = v.main.capacity("cpu_dataloading")
    assert got[0] == (f"Training here is limited by CPU compute: {compute} images/s of "
                      "ResNet50 training (fp32).")
    ratio = loader / v.main.capacity("cpu_compute")
    assert got[1] == (f"Next limit: CPU data loading at {fmt.figure(loader)} images/s "
                      f"({ratio:,.0f}× the current limit).")
    # The verdict's first advice restates the next limit, which has its own line: the
    # terminal shows the first one that says something new, whole (show() wraps it).
    assert "next limit" in v.main.advice[0]
    assert got[2] == "Advice: " + " ".join(v.main.advice[1].split())
    assert got[2].startswith("Advice: This machine trains on its CPU") and "…" not in got[2]
    assert len(got[2]) > 160  # longer than the cut it once had
    assert got[3] == "Not measured, so not judged: storage (the report says why)."
    assert len(got) <= summary.MAX_LINES
    assert not _no_raw_ids("\n".join(got)) and all("\n" not in line for line in got)


def test_raw_ids_in_the_verdicts_prose_become_names():
    v = verdict(cpu_run("2026-01-01T00:00:00Z"))
    main = dataclasses.replace(v.main, advice=["Give cpu_dataloading more cores; check "
                                               "host_device_link too."])
    got = summary.lines(dataclasses.replace(v, main=main))
    assert got[2] == ("Advice: Give CPU data loading more cores; check the host-to-GPU link "
                      "(PCIe) too.")


def test_a_gpu_limited_by_compute_as_it_should_be():
    v = verdict(gpu_node("h100"))
    got = summary.lines(v)
    assert got[0].startswith("Training here is limited by GPU compute: ")
    assert got[1].startswith("Next limit: the host-to-GPU link (PCIe) at ")
    # Its only advice restates the next limit: its lead clause stays.
    assert got[2] == "Advice: Compute is the bottleneck, as it should be."
    assert got[3] == ("Not measured, so not judged: CPU data loading, storage and the "
                      "interconnect (the report says why).")
    assert len(got) <= summary.MAX_LINES and not _no_raw_ids("\n".join(got))


def test_an_input_bound_gpu_gives_its_utilisation_and_a_close_call_as_such():
    v = verdict(gpu_node("h100"))
    link = v.main.capacity("host_device_link")
    compute = dataclasses.replace(v.main.capacity_details["gpu_compute"], value=link * 1.03)
    main = dataclasses.replace(
        v.main, limiting_resource="host_device_link", predicted_accelerator_utilisation=0.4,
        capacity_details={**v.main.capacity_details, "gpu_compute": compute},
        close_call=("host_device_link", "gpu_compute"))
    got = summary.lines(dataclasses.replace(v, main=main))
    assert got[0].startswith("Training here is limited by the host-to-GPU link (PCIe): ")
    assert got[0].endswith("; predicted accelerator utilisation 40.0%.")
    assert got[1].startswith("Next limit: GPU compute at ")
    assert got[1].endswith("(1.03× the current limit: a close call, within their measured "
                           "noise).")


def test_a_cpu_run_says_no_accelerator_utilisation():
    v = verdict(cpu_run("2026-01-01T00:00:00Z"))
    main = dataclasses.replace(v.main, limiting_resource="cpu_dataloading",
                               predicted_accelerator_utilisation=0.4)
    got = summary.lines(dataclasses.replace(v, main=main))
    assert got[0].startswith("Training here is limited by CPU data loading: ")
    assert "utilisation" not in got[0]


def test_no_verdict_says_so_in_one_line_with_the_reason():
    run = results.load(FIXTURES / "results_v1_cpu.json")
    got = summary.lines(verdict(run))
    assert got[0] == ("No verdict on what limits ResNet50 training: CPU compute was not "
                      "measured (the resnet50 probe did not run).")
    assert got[1] == "Not measured: CPU data loading and storage."
    assert got[2].startswith("Advice: ") and len(got) <= summary.MAX_LINES
    assert not _no_raw_ids("\n".join(got))


@pytest.mark.parametrize("terminal", [True, False])
def test_the_advice_is_printed_whole_wrapped_to_a_terminal_and_unwrapped_into_a_pipe(terminal):
    import io

    from rich.console import Console

    v = verdict(cpu_run("2026-01-01T00:00:00Z"))
    text = summary.summary(v, WRITTEN, Path("/runs/a/results.json"))
    advice = next(line for line in text.splitlines() if line.startswith("Advice: "))
    buf = io.StringIO()
    summary.show(text, Console(file=buf, force_terminal=terminal, width=60, color_system=None))
    printed = buf.getvalue()
    if terminal:  # every line within the width, the advice whole across its lines
        assert all(len(line) <= 60 for line in printed.splitlines())
        assert " ".join(advice.split()) in " ".join(printed.split())
        assert printed.count("\n") > text.count("\n") + 2
    else:  # a pipe or a file: the lines as they are, for logs and scripts
        assert printed == text + "\n"
    assert "…" not in printed


def test_the_report_line_is_one_path_and_what_lies_beside_it():
    assert summary.report_line(WRITTEN, Path("/runs/a/results.json")) == (
        "report: /runs/a/report.html (results.json, report.md, CSV and plots beside it)")
    # `report --out elsewhere`: results.json stays where it was, so it is not "beside it".
    assert summary.report_line(WRITTEN[:3], Path("/runs/b/results.json")) == (
        "report: /runs/a/report.html (report.md and CSV beside it)")


# --- the real CLI -------------------------------------------------------------------------------

def bb(*args):
    return subprocess.run([sys.executable, "-m", "benchbench", *args], capture_output=True,
                          text=True, timeout=300)


def _split(stdout, out):
    """(the summary's lines, the path lines): every line naming the run folder is a path."""
    lines = stdout.strip().splitlines()
    paths = [line for line in lines if str(out) in line]
    return lines[:lines.index(paths[0])], paths


@pytest.mark.slow
def test_run_ends_with_the_limit_in_words_and_one_path(tmp_path):
    out = tmp_path / "run"
    # The cheapest run that names a limit: ResNet50 alone, tiny, one round. The budget is a
    # ceiling that a busy CI box may need (its steps are seconds there); an idle one uses ~10 s.
    proc = bb("run", "--quick", "--device", "cpu", "--only", "resnet50", "--rounds", "1",
              "--set", "resnet50.image_size=32", "--set", "resnet50.batch_size=2",
              "--set", "resnet50.steps=2", "--set", "resnet50.precisions=fp32",
              "--time-budget", "120", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    said, paths = _split(proc.stdout, out)
    assert paths == [f"report: {out / 'report.html'} (results.json, report.md, CSV and plots "
                     "beside it)"], proc.stdout
    assert proc.stdout.strip().endswith(paths[0])  # the path closes the output
    assert 1 <= len(said) <= 5 and said[0].startswith("Training here is limited by CPU "
                                                      "compute: "), proc.stdout
    assert " images/s of ResNet50 training (fp32)." in said[0]
    assert not _no_raw_ids(proc.stdout), proc.stdout
    assert "in all:" not in proc.stdout + proc.stderr  # the timing only with --verbose
    # ... and in results.json either way
    timings = json.loads((out / "results.json").read_text())["timings"]
    assert {"probes", "reports"} <= set(timings)


@pytest.mark.slow
def test_verbose_adds_the_timing_and_no_verdict_says_why(tmp_path):
    out = tmp_path / "run"
    proc = bb("run", "--quick", "--device", "cpu", "--only", "matmul", "--rounds", "1",
              "--set", "matmul.sizes=64", "--set", "matmul.dtypes=fp32", "--time-budget", "10",
              "--verbose", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    said, paths = _split(proc.stdout, out)
    assert said[0] == ("No verdict on what limits ResNet50 training: CPU compute was not "
                       "measured (the resnet50 probe did not run)."), proc.stdout
    assert len(said) <= 5 and len(paths) == 1 and not _no_raw_ids(proc.stdout)
    (timing,) = [line for line in proc.stderr.splitlines() if " s in all: " in line]
    assert timing.startswith("benchbench: ") and "probes " in timing and "reports " in timing


def test_report_prints_the_same_summary(tmp_path):
    run = results.load(FIXTURES / "results_v1_cpu.json")
    proc = bb("report", str(FIXTURES / "results_v1_cpu.json"), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    written = [tmp_path / "report.md", tmp_path / "report.html", tmp_path / "measurements.csv",
               *sorted((tmp_path / "plots").glob("*.png"))]
    assert proc.stdout.strip().splitlines()[:-1] == summary.lines(verdict(run))
    assert proc.stdout.strip().splitlines()[-1] == summary.report_line(written)
