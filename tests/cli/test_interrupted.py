"""A run that SIGINT or SIGTERM stopped says so (issue 70): results.json records it, the
terminal, report.md and report.html open with it, no probe starts after the signal, and
compare, history and fleet refuse it unless --include-interrupted, with which they take it and
say so (compare without counting what the signal cut as a probe that stopped measuring)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synthetic_runs import cpu_run, environment

from benchbench import cli
from benchbench.core import interruption, results

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
# matmul ends in seconds; memory_bandwidth then times until its 60 s budget, so that the
# signal finds it running; stability comes after it and must never start.
RUN = ["run", "--only", "matmul,memory_bandwidth,stability", "--device", "cpu", "--rounds", "1",
       "--set", "matmul.sizes=64", "--set", "matmul.dtypes=fp32",
       "--set", "memory_bandwidth.max_repeats=1000", "--set", "memory_bandwidth.target_cv=0",
       "--time-budget", "60"]


@dataclasses.dataclass
class Stopped:
    sig: signal.Signals
    code: int
    stdout: str
    stderr: str
    out: Path
    exit_s: float  # from the signal to the process's exit


def _run_and_signal(sig: signal.Signals, out: Path) -> Stopped:
    # Its own process group, signalled whole, as a terminal's Ctrl-C and `timeout` do: the
    # forkserver and the worker get the signal too.
    proc = subprocess.Popen([sys.executable, "-m", "benchbench", *RUN, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until matmul is saved
        try:
            if results.load(out).probe("matmul"):
                break
        except results.ResultsError:
            pass
        time.sleep(0.1)
    time.sleep(1.0)  # memory_bandwidth's worker is timing by now
    sent = time.monotonic()
    os.killpg(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    return Stopped(sig, proc.returncode, stdout, stderr, out, time.monotonic() - sent)


@pytest.fixture(scope="module", params=[signal.SIGINT, signal.SIGTERM],
                ids=["SIGINT", "SIGTERM"])
def stopped(request, tmp_path_factory):
    return _run_and_signal(request.param, tmp_path_factory.mktemp("runs") / "stopped")


def _banner(sig: signal.Signals) -> str:
    return (f"Interrupted by {sig.name} after 1 of 3 probes: memory copy cut short; "
            "sustained compute not run. The verdict below rests on what finished.")


@pytest.mark.slow
def test_results_json_records_the_interruption(stopped):
    assert stopped.code == 130, stopped.stderr
    run = results.load(stopped.out)
    rec = run.extra["interrupted"]
    assert rec["signal"] == stopped.sig.name
    assert run.started_at <= rec["at"] <= run.finished_at
    assert rec["probes_planned"] == ["matmul", "memory_bandwidth", "stability"]
    assert rec["probes_finished"] == ["matmul"]
    assert rec["cut_short"] == {"probe": "memory_bandwidth", "round": 1}
    assert rec["probes_not_run"] == ["stability"]
    assert run.probe("matmul").status == "ok"
    # an interruption, never "the worker process exited with code 255"
    assert run.probe("memory_bandwidth").reason == (
        f"interrupted by {stopped.sig.name} before it finished")
    assert [p.name for p in stopped.out.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
def test_no_probe_starts_after_the_signal(stopped):
    run = results.load(stopped.out)
    assert run.probe("stability") is None
    assert "stability" not in run.extra["telemetry"]["probes"]
    assert not re.search(r"\] stability", stopped.stderr), stopped.stderr
    assert not list(stopped.out.glob("*.traceback.txt"))
    # the reports are all that is left to do after the signal, not another probe's start-up
    assert stopped.exit_s < 30


@pytest.mark.slow
def test_the_terminal_and_both_reports_open_with_it(stopped):
    banner = _banner(stopped.sig)
    assert stopped.stdout.splitlines()[0] == banner
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"benchbench: interrupted by {stopped.sig.name}; finished probes were kept")
    assert re.search(r"\] memory_bandwidth: cut short \(", stopped.stderr), stopped.stderr
    md = (stopped.out / "report.md").read_text().splitlines()
    assert md[:3] == [md[0], "", f"**{banner}**"] and md[0].startswith("# benchbench report")
    assert md.count(f"**{banner}**") == 1
    assert ("| Sustained compute (`stability`) | — | not run | — | the run was interrupted by "
            f"{stopped.sig.name} before it started |") in md
    assert any(re.match(r"\| Memory copy \(`memory_bandwidth`\) \| [^|]+ \| cut short \|", ln)
               for ln in md), md
    html = (stopped.out / "report.html").read_text()
    body = html[html.index("<body>"):]
    assert body.startswith(f'<body><section id="interrupted" class="interrupted"><p><strong>'
                           f"{banner}</strong></p></section>")
    assert body.count(banner) == 1
    # `report` re-renders it, banner first
    again = subprocess.run([sys.executable, "-m", "benchbench", "report", str(stopped.out),
                            "--out", str(stopped.out.parent / "again")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.splitlines()[0] == banner


@pytest.mark.slow
def test_compare_refuses_it_and_takes_it_with_the_flag(stopped, capsys):
    code = cli.main(["compare", str(FIXTURE), str(stopped.out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (
        f"benchbench: error: {stopped.out}: interrupted by {stopped.sig.name} after 1 of 3 "
        "probes (its results.json records \"interrupted\"); run it again, or take it as it "
        "is with --include-interrupted")
    code = cli.main(["compare", str(FIXTURE), str(stopped.out), "--include-interrupted"])
    md = capsys.readouterr().out
    assert code in (0, 3) and f"**interrupted by {stopped.sig.name} after 1 of 3 probes**" in md


# --- compare, history and fleet on hand-built runs: fast, and each decision visible ---------

CUT = interruption.Interruption(
    signal="SIGTERM", at="2026-12-03T00:10:00+00:00",
    planned=("matmul", "memory_bandwidth", "resnet50", "transformer", "dataloader", "storage"),
    finished=("matmul", "memory_bandwidth", "resnet50", "transformer"),
    cut_short="dataloader", not_run=("storage",))


def _cut(run, record=True):
    """The run as SIGTERM left it: the dataloader failed as it was cut short, no storage."""
    probes = [dataclasses.replace(p, status="failed", measurements=[],
                                  reason="interrupted by SIGTERM before it finished")
              if p.name == "dataloader" else p for p in run.probes if p.name != "storage"]
    extra = {**run.extra, **({"interrupted": CUT.to_dict()} if record else {})}
    return dataclasses.replace(run, probes=probes, extra=extra)


def _save(run, folder: Path) -> str:
    folder.mkdir(parents=True)
    results.save(run, folder / "results.json")
    return str(folder)


def _cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip()


def _refusal(path: str) -> str:
    return (f"benchbench: error: {path}: interrupted by SIGTERM after 4 of 6 probes (its "
            "results.json records \"interrupted\"); run it again, or take it as it is with "
            "--include-interrupted")


def test_compare_takes_it_with_the_flag_and_counts_no_cut_probe_as_stopped(tmp_path, capsys):
    base = _save(cpu_run("2026-12-02T00:00:00+00:00"), tmp_path / "base")
    cut = _save(_cut(cpu_run("2026-12-03T00:00:00+00:00")), tmp_path / "cut")
    assert _cli(capsys, "compare", base, cut) == (2, "", _refusal(cut))
    assert _cli(capsys, "compare", cut, base)[2] == _refusal(cut)  # as the baseline too
    code, md, _ = _cli(capsys, "compare", base, cut, "--include-interrupted")
    assert code == 0, md
    assert "**interrupted by SIGTERM after 4 of 6 probes**" in md
    # The same run without its record (an older benchbench's): the cut probe stopped.
    old = _save(_cut(cpu_run("2026-12-03T00:00:00+00:00"), record=False), tmp_path / "old")
    assert _cli(capsys, "compare", base, old)[0] == 3


def _history(tmp_path: Path, cut_one: bool) -> list[str]:
    paths = []
    for day in range(1, 5):
        run = cpu_run(f"2026-12-0{day}T00:00:00+00:00")
        paths.append(_save(_cut(run) if cut_one and day == 3 else run,
                           tmp_path / f"r{day}"))
    return paths


def test_history_refuses_it_and_takes_it_with_the_flag(tmp_path, capsys):
    paths = _history(tmp_path, cut_one=True)
    assert _cli(capsys, "history", *paths) == (2, "", _refusal(paths[2]))
    code, md, _ = _cli(capsys, "history", *paths, "--include-interrupted")
    assert code == 0, md
    assert (f"run `{paths[2]}` was interrupted by SIGTERM after 4 of 6 probes "
            "(--include-interrupted): what it measured counts, the rest is missing") in md


def test_fleet_refuses_it_and_takes_it_with_the_flag(tmp_path, capsys):
    nodes = [cpu_run("2026-12-03T00:00:00+00:00", env=environment(host=f"node-{i}"))
             for i in range(4)]
    paths = [_save(_cut(n) if i == 1 else n, tmp_path / f"n{i}") for i, n in enumerate(nodes)]
    assert _cli(capsys, "fleet", *paths) == (2, "", _refusal(paths[1]))
    code, md, _ = _cli(capsys, "fleet", *paths, "--include-interrupted")
    assert code in (0, 3), md
    assert f"run `{paths[1]}` was interrupted by SIGTERM after 4 of 6 probes" in md


def test_export_refuses_it_and_takes_it_with_the_flag(tmp_path, capsys):
    path = _save(_cut(cpu_run("2026-12-03T00:00:00+00:00")), tmp_path / "cut")
    prom = tmp_path / "bb.prom"
    assert _cli(capsys, "export", path, "--openmetrics", str(prom)) == (2, "", _refusal(path))
    assert not prom.exists()
    assert _cli(capsys, "export", path, "--openmetrics", str(prom),
                "--include-interrupted") == (0, "", f"written: {prom}")
    assert "benchbench_" in prom.read_text()


# The reports are being written when the signal comes: write_reports signals its own process
# first, as a Ctrl-C in the last seconds of a run would.
LATE = """
import os, signal, sys
from benchbench import cli
from benchbench.commands import run
write = run.write_reports
def late(*args):
    os.kill(os.getpid(), signal.{sig})
    return write(*args)
run.write_reports = late
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_reports_are_written_lets_them_finish(sig, tmp_path):
    out = tmp_path / "late"
    proc = subprocess.run([sys.executable, "-c", LATE.format(sig=sig), "run", "--only", "matmul",
                           "--device", "cpu", "--rounds", "1", "--set", "matmul.sizes=64",
                           "--set", "matmul.dtypes=fp32", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"benchbench: {sig} came as the reports were written; every probe had run and the "
        "reports were finished")
    assert {"report.md", "report.html", "results.json"} <= {p.name for p in out.iterdir()}
    assert "</html>" in (out / "report.html").read_text()
    run = results.load(out)
    assert "interrupted" not in run.extra and "timings" in run.extra  # whole, and saved after
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_an_interrupted_run_reads_back_and_older_runs_have_no_record():
    run = _cut(cpu_run("2026-12-03T00:00:00+00:00"))
    again = results.RunResult.from_dict(json.loads(json.dumps(run.to_dict())))
    assert interruption.of(again) == CUT
    assert interruption.of(results.load(FIXTURE)) is None


def test_the_verdict_cites_no_probe_the_signal_kept_from_running():
    """Compute measured at 224 px, the loader at 160 px: the evidence used to say 'the real
    pipeline below compares them at one size' whether or not the pipeline ran."""
    from verdict_runs import gpu_run

    from benchbench.analysis import verdict

    def loader_at_160(run):
        dl = run.probe("dataloader")
        best = next(x for x in dl.measurements if x.metric == "best_throughput")
        moved = dataclasses.replace(best, key={**best.key, "image_size": 160})
        return dataclasses.replace(run, probes=[dataclasses.replace(
            p, measurements=[moved if x is best else x for x in p.measurements])
            if p is dl else p for p in run.probes])

    ran = loader_at_160(gpu_run(pipeline_au=0.9))
    ran.probes = [dataclasses.replace(p, measurements=[dataclasses.replace(
        x, key={**x.key, "image_size": 160}) for x in p.measurements])
        if p.name == "pipeline" else p for p in ran.probes]
    assert any("the real pipeline below compares" in e
               for e in verdict.verdict(ran).main.evidence)
    cut = loader_at_160(gpu_run())
    cut.extra["interrupted"] = interruption.Interruption(
        "SIGTERM", None, ("resnet50", "dataloader", "pipeline", "host_device_copy"),
        ("resnet50", "dataloader"), not_run=("pipeline", "host_device_copy")).to_dict()
    cut.probes = [p for p in cut.probes if p.name != "host_device_copy"]
    v = verdict.verdict(cut).main
    said = " ".join(v.evidence)
    assert "real pipeline below" not in said
    assert "no real pipeline ran to compare the loader and the step at one size" in said
    assert ("host_device_link: the host_device_copy probe did not run: the run was "
            "interrupted by SIGTERM before it") in v.unknown


def test_the_probe_a_signal_cut_short_reads_cut_short_not_failed(tmp_path):
    """results.json keeps it "failed" (the record names it); every sentence and table a person
    reads says it was cut short, as the signal is no failure of the probe."""
    from benchbench.analysis import capacities, verdict
    from benchbench.reports import markdown

    run = _cut(cpu_run("2026-12-03T00:00:00+00:00"))
    dl = run.probe("dataloader")
    assert dl.status == "failed" and interruption.status(run, dl) == interruption.CUT
    assert capacities.why_missing(run, "dataloader") == (
        "the dataloader probe was cut short: interrupted by SIGTERM before it finished")
    md = markdown.render(run, verdict.verdict(run), [])
    assert ("| The data loader (`dataloader`) | CPU data loading | cut short | "
            in md), md
    assert ("- The data loader (`dataloader`): cut short: interrupted by SIGTERM before it "
            "finished") in md
    assert "failed" not in md.split("## Probes")[1].split("## ")[0]
    from benchbench.doctor.checks import check_storage

    check = check_storage(run.environment, run)
    assert (check.status, check.detail) == (
        "skipped", "the storage probe did not run: the run was interrupted by SIGTERM before it")
    # a probe that failed of itself in an interrupted run still reads failed
    broken = dataclasses.replace(run, probes=[dataclasses.replace(
        p, status="failed", reason="RuntimeError: boom") if p.name == "matmul" else p
        for p in run.probes])
    mm = broken.probe("matmul")
    assert interruption.status(broken, mm) == "failed"
    assert interruption.outcome(broken, mm) == "the matmul probe failed: RuntimeError: boom"
    # without the record (an older run), a failed probe is a failure
    old = _cut(cpu_run("2026-12-03T00:00:00+00:00"), record=False)
    assert interruption.status(old, old.probe("dataloader")) == "failed"
