"""compare: alignment, pooling, the environment diff, the regression decision, refusals, cost
and the rendered files, on hand-built runs saved with results.save (no GPU, no /tmp runs)."""

import csv
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchbench import cli
from benchbench.analysis import regression
from benchbench.compare import align, comparison, sides
from benchbench.core import results
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.reports import compare_md

GiB = 2**30
FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def spread(value, n=10, rel=0.01):
    """n samples around value, within ±2·rel, deterministic (CV about 1.4·rel)."""
    return [value * (1 + rel * ((i * 7) % 5 - 2)) for i in range(n)]


ROUNDS = (-1, 0, 1)  # three rounds' deviations, in units of the round spread


def m(metric, key, samples, unit="FLOP/s", statistic="median", hib=True, round_rel=0.01):
    """A measurement of these samples, taken in three rounds that differ by ±round_rel."""
    value = max(samples) if statistic == "max" else sorted(samples)[len(samples) // 2]
    rounds = [value * (1 + round_rel * d) for d in ROUNDS]
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic=statistic,
        samples=list(samples),
        higher_is_better=hib,
        context={"round_values": rounds, "rounds": len(rounds)},
    )


def make_run(label="a", factor=1.0, n=10, rel=0.01, cpu="AMD EPYC 9654", gpus=(),
             driver=None, started="2026-11-30T00:00:00+00:00", probes=None, price=None,
             cudnn="9.24.0", image_size=224, round_rel=0.01):
    """A CPU run (or a GPU run with `gpus` names) whose figures scale with factor, each
    measured in three rounds that differ by ±round_rel."""
    if probes is None:
        mm = [m("flops", {"device": "cpu", "dtype": "fp32", "size": s},
                spread(1e11 * factor * s / 512, n, rel), round_rel=round_rel)
              for s in (256, 512)]
        mm.append(m("peak_flops", {"device": "cpu", "dtype": "fp32"}, [x.value for x in mm],
                    statistic="max"))
        probes = [
            ProbeResult(name="matmul", status="ok", resource="cpu_compute", measurements=mm),
            ProbeResult(name="resnet50", status="ok", resource="cpu_compute", measurements=[
                m("throughput", {"device": "cpu", "precision": "fp32",
                                 "image_size": image_size, "batch_size": 16},
                  spread(20.0 * factor, n, rel), "samples/s", "total_over_time",
                  round_rel=round_rel)]),
            ProbeResult(name="memory_bandwidth", status="ok", resource="host_memory", measurements=[
                m("copy_bandwidth", {"memory": "host", "size_bytes": 256 * 2**20},
                  spread(2e10 * factor, n, rel), "B/s", round_rel=round_rel)]),
        ]
    env = {"host": {"hostname": "box", "cpu_model": cpu, "cores_usable": 8,
                    "cores_physical": 8, "memory_total": 64 * GiB,
                    "memory_available": 60 * GiB, "kernel": "6.8.0"},
           "versions": {"python": "3.11.7", "torch": "2.5.0"},
           "driver": driver, "cuda_driver": None,
           "gpus": [{"index": i, "name": g, "memory_total": 80 * GiB}
                    for i, g in enumerate(gpus)],
           "torch": {"torch": "2.5.0", "cudnn": cudnn, "nccl": "2.21.5"}}
    return RunResult(tool={"name": "benchbench", "version": "t"}, label=label,
                     started_at=started, finished_at=started, environment=env,
                     config={"device_resolved": "cuda" if gpus else "cpu", "quick": False},
                     argv=[], probes=probes,
                     extra={"cost": {"usd_per_hour": price}} if price else {})


def save(tmp_path, name, run):
    d = tmp_path / name
    d.mkdir()
    results.save(run, d / "results.json")
    return str(d)


def bb(*args):
    """The CLI in-process: (exit code, stdout, stderr)."""
    return cli.main([str(a) for a in args])


def run_cli(capsys, *args):
    code = bb(*args)
    out, err = capsys.readouterr()
    return code, out, err


def build(*runs, baseline=None, **kw):
    made = [sides.Side(label="", runs=[r], sources=[r.label or "?"]) for r in runs]
    if baseline:
        made.insert(0, sides.Side(label="", runs=list(baseline), sources=["b"], baseline=True))
    else:
        made[0].baseline = True
    sides.assign_labels(made)
    for s in made:
        s.run = align.pooled_run(s.runs)
    return comparison.compare(made, **kw)


def row(comp, probe, metric, **key):
    (r,) = [r for r in comp.rows if r.probe == probe and r.metric == metric
            and all(r.key.get(k) == v for k, v in key.items())]
    return r


# --- the regression decision ------------------------------------------------------------------

def units(value, n=3, rel=0.01):
    """n values a side around value (rounds, runs), within ±rel."""
    return [value * (1 + rel * d) for d in (-1, 0, 1, -0.5, 0.5, 0.25)[:n]]


def test_one_value_a_side_has_no_known_noise_and_is_inconclusive():
    d = regression.decide([100.0], [50.0], True)
    assert d.outcome == regression.INCONCLUSIVE and d.noise_pct is None
    assert d.reason.startswith("noise unknown: no measurement of it has two values on a side")
    assert not d.noise_known and regression.noise_unknown(d)
    assert d.ratio == pytest.approx(0.5)


# --- several runs a side: the t-test on every round of every run -----------------------------

@pytest.mark.parametrize("n", [2, 3, 6])
def test_pooled_clear_drop_beyond_the_noise_is_a_regression(n):
    d = regression.decide(units(100, n), units(80, n), True, pooled=True)
    assert d.outcome == regression.REGRESSED and d.test == regression.TEST
    assert d.ratio == pytest.approx(0.8) and d.change_pct == pytest.approx(-20)
    assert d.units == (n, n) and d.noise_pct is not None and d.noise_pct < 20


def test_pooled_lower_is_better_turns_the_direction():
    d = regression.decide(units(1.0), units(1.25), False, pooled=True)  # step time up 25 %
    assert d.outcome == regression.REGRESSED and d.ratio == pytest.approx(0.8)
    assert regression.decide(units(1.0), units(0.75), False,
                             pooled=True).outcome == regression.IMPROVED


def test_pooled_small_significant_drop_is_within_threshold():
    small = regression.decide(units(100, 6, 0.002), units(97, 6, 0.002), True, pooled=True)
    assert small.outcome == regression.WITHIN and small.p_value < 0.01
    assert regression.decide(units(100, 6, 0.002), units(97, 6, 0.002), True, pooled=True,
                             threshold_pct=2).outcome == regression.REGRESSED


def test_pooled_change_the_noise_explains_is_inconclusive_and_says_how_noisy():
    d = regression.decide([100, 84, 116], [92, 78, 106], True, pooled=True)  # -8% vs ±16%
    assert d.outcome == regression.INCONCLUSIVE
    assert re.match(r"with nothing changed, this machine's values of it differ by up to "
                    r"\d+%: a smaller change cannot be called here", d.reason)
    assert d.noise_pct > 8


def test_pooled_large_drop_on_a_noisy_side_is_still_a_regression():
    d = regression.decide([17.6, 17.2, 17.4, 17.5], [4.2, 9.0, 3.1, 5.0], True, pooled=True)
    assert d.outcome == regression.REGRESSED


# --- one run a side: the family's spread, and the family moving together -------------------

def fam(name, base, cand, hib=True):
    return regression.family_of(name, list(zip(base, cand, strict=True)), hib)


def test_one_kernel_in_a_slow_state_is_not_a_regression():
    """Recorded on this VM with nothing changed: bf16 n=512 at half speed in both rounds of
    the second run, its family steady (n=256's rounds swung 85% in the first)."""
    base = [[245, 204], [223, 220], [358, 661], [884, 908]]
    cand = [[221, 237], [230, 180], [372, 364], [422, 421]]
    f = fam("matmul flops", base, cand)
    d = regression.decide(base[3], cand[3], True, family=f)
    assert d.outcome == regression.INCONCLUSIVE
    assert "matmul flops did not move with it" in d.reason and "pool runs" in d.reason


def test_a_loaded_machine_moves_the_family_and_is_a_regression():
    """Recorded on this VM with a process spinning on each core in the second run: every
    matmul size slower, the loaded side's rounds scattered; ResNet50 4x slower."""
    base = [[268, 281], [261, 291], [603, 646], [925, 867]]
    cand = [[68, 4], [87, 34], [350, 366], [939, 477]]
    f = fam("matmul flops", base, cand)
    d = regression.decide(base[0], cand[0], True, family=f, samples=([270, 268, 281],
                                                                     [68, 4, 30]))
    # the loaded rounds scatter (68 and 4): they are the family's widest spread, and 4x is
    # within it; the steadier training figure shows the load instead (the next test)
    assert d.outcome == regression.INCONCLUSIVE
    assert "the candidate run's own samples varied by CV" in d.reason
    resnet = fam("resnet50 throughput", [[33.3, 28.6]], [[7.2, 5.6]])
    d = regression.decide([33.3, 28.6], [7.2, 5.6], True, family=resnet)
    assert d.outcome == regression.REGRESSED and d.test == regression.SPREAD
    assert "resnet50 throughput moved with it (median −79%)" in d.reason


def test_a_change_within_the_familys_spread_is_inconclusive():
    f = fam("resnet50 throughput", [[33.3, 28.6]], [[27.0, 25.9]])
    d = regression.decide([33.3, 28.6], [27.0, 25.9], True, family=f)
    assert d.outcome == regression.INCONCLUSIVE and d.noise_pct == pytest.approx(16.4, 0.01)
    assert "resnet50 throughput differ by up to 16% between rounds" in d.reason


def test_one_run_a_side_without_a_second_value_anywhere_is_inconclusive():
    f = fam("storage read_bandwidth", [[5e9], [3e9]], [[1e9], [0.5e9]])
    d = regression.decide([5e9], [1e9], True, family=f)
    assert d.outcome == regression.INCONCLUSIVE and d.reason.startswith("noise unknown")
    assert regression.noise_unknown(d)
    assert not regression.noise_unknown(regression.decide([5e9, 5.1e9], [1e9, 1.1e9], True))


def test_identical_values_are_no_change():
    assert regression.decide([5.0, 5.0], [5.0, 5.0], True).outcome == regression.NO_CHANGE


def test_overlapping_values_are_no_significant_change():
    d = regression.decide([100, 90, 110, 95, 105], [101, 91, 108, 96, 104], True, pooled=True)
    assert d.outcome == regression.NO_CHANGE and d.test == regression.TEST


def test_a_peak_over_sizes_is_not_tested_but_has_its_ratio():
    d = regression.decide([1, 2, 10], [1, 2, 5], True, statistic="max", values=(10, 5))
    assert d.outcome == regression.NOT_TESTED and d.ratio == 0.5 and "peak" in d.reason


# --- alignment ----------------------------------------------------------------------------------

def test_runs_with_different_probes_align_what_matches():
    a, b = make_run("a"), make_run("b")
    a.probes.append(ProbeResult(name="storage", status="ok", resource="storage", measurements=[
        m("read_bandwidth", {"job": "seq1m", "bs": 2**20, "engine": "io_uring", "iodepth": 32,
                             "numjobs": 1}, spread(1e9), "B/s", "total_over_time")]))
    b.probes = [p for p in b.probes if p.name != "resnet50"]
    b.probes.append(
        ProbeResult(name="resnet50", status="skipped", resource="cpu_compute", reason="no time")
    )
    comp = build(a, b)
    assert {(r.probe, r.metric) for r in comp.partial} == {("storage", "read_bandwidth"),
                                                           ("resnet50", "throughput")}
    assert ("matmul", "flops") in {(r.probe, r.metric) for r in comp.matched}
    text = compare_md.render(comp)
    assert "## Only in some runs" in text and "| storage | read_bandwidth |" in text
    assert "| resnet50 | ok | skipped (no time) |" in text
    # the verdict first, then what it was judged under and by which rule
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## Summary", "## Conditions", "## The rule"]
    rule = text.split("## The rule")[1].split("## ")[0]
    assert "- **A measurement regressed** when it is worse than the baseline" in rule
    lines = [x for x in rule.splitlines() if x.strip()]  # a list, a bolded term a line
    assert len(lines) == 6 and all(x.startswith("- **") for x in lines), lines


def test_a_measurement_one_run_lacks_is_shown_with_what_that_runs_probe_said():
    a, b = make_run("a"), make_run("b")
    (mb,) = [p for p in b.probes if p.name == "matmul"]
    mb.measurements = [x for x in mb.measurements if x.key.get("size") != 512]
    mb.reason = "fp32 n=512 skipped, because one call would take ~0.2 s, beyond its budget"
    (ma,) = [p for p in a.probes if p.name == "matmul"]
    ma.reason = "a's own note, not shown: a has every matmul measurement"
    text = compare_md.render(build(a, b))
    part = text.split("## Only in some runs")[1]
    assert "| matmul | flops | device=cpu, dtype=fp32, size=512 | a |" in part
    assert "what its probe said" in part
    assert "| matmul | b | fp32 n=512 skipped, because one call would take ~0.2 s" in part
    assert "a's own note" not in part


def test_incidental_key_fields_are_ignored_and_noted():
    def pipe(loader, workers, size, engine):
        key = {"device": "cpu", "precision": "fp32", "image_size": 224, "batch_size": 16,
               "loader": loader, "workers": workers}
        return [
            ProbeResult(
                name="pipeline",
                status="ok",
                resource="cpu_dataloading",
                measurements=[m("total_throughput", key, spread(50.0), "samples/s")],
            ),
            ProbeResult(
                name="memory_bandwidth",
                status="ok",
                resource="host_memory",
                measurements=[
                    m("copy_bandwidth", {"memory": "host", "size_bytes": size}, spread(2e10), "B/s")
                ],
            ),
            ProbeResult(
                name="storage",
                status="ok",
                resource="storage",
                measurements=[
                    m(
                        "read_bandwidth",
                        {
                            "job": "rand4k",
                            "bs": 4096,
                            "engine": engine,
                            "iodepth": 32,
                            "numjobs": 4,
                        },
                        spread(1e8),
                        "B/s",
                    )
                ],
            ),
        ]

    a = make_run("a", probes=pipe("torchvision", 4, GiB, "io_uring"))
    b = make_run("b", probes=pipe("dali_cpu", 8, 256 * 2**20, "libaio"))
    comp = build(a, b)
    assert not comp.partial and len(comp.rows) == 3
    p = row(comp, "pipeline", "total_throughput")
    assert "loader" not in p.key and p.key["precision"] == "fp32"
    assert "loader: torchvision (a) / dali_cpu (b)" in p.incidental_note()
    assert "engine: io_uring (a) / libaio (b)" in row(comp, "storage",
                                                      "read_bandwidth").incidental_note()
    # a key field that matters (the precision) keeps two rows apart
    c = make_run("c", probes=pipe("torchvision", 4, GiB, "io_uring"))
    c.probes[0].measurements[0] = m("total_throughput", {
        "device": "cpu", "precision": "amp_bf16", "image_size": 224, "batch_size": 16,
        "loader": "torchvision", "workers": 4}, spread(50.0), "samples/s")
    assert len(build(a, c).partial) == 2


def test_two_measurements_of_one_run_that_differ_only_incidentally_stay_apart():
    key = {"job": "rand4k", "bs": 4096, "iodepth": 32, "numjobs": 4}
    probes = [ProbeResult(name="storage", status="ok", resource="storage", measurements=[
        m("read_bandwidth", {**key, "engine": "io_uring"}, spread(1e8), "B/s"),
        m("read_bandwidth", {**key, "engine": "psync"}, spread(5e7), "B/s")])]
    comp = build(make_run("a", probes=probes), make_run("b", probes=probes))
    assert len(comp.rows) == 2 and {r.key["engine"] for r in comp.rows} == {"io_uring", "psync"}


def test_environment_diff_highlights_the_driver_upgrade():
    a = make_run("old", gpus=["NVIDIA H100 80GB HBM3"] * 2, driver="550.54", cudnn=90100)
    b = make_run("new", gpus=["NVIDIA H100 80GB HBM3"] * 2, driver="560.35", cudnn="9.1.0")
    comp = build(a, b)
    env = {e.name: e for e in comp.env}
    assert env["driver"].differs and env["driver"].values == {"old": ["550.54"],
                                                             "new": ["560.35"]}
    assert not env["cuDNN"].differs and env["cuDNN"].values["old"] == ["9.1.0"]
    assert not env["GPUs"].differs and env["GPUs"].values["old"] == ["2× NVIDIA H100 80GB HBM3"]
    text = compare_md.render(comp)
    assert "Differs: driver." in text and "| **≠ driver** | **550.54** | **560.35** |" in text


# --- sides, pooling and hardware ------------------------------------------------------------------

def test_labels_default_to_hostname_and_get_the_time_on_collision():
    a = make_run(None, started="2026-11-30T01:00:00+00:00")
    b = make_run(None, started="2026-11-30T02:00:00+00:00")
    comp = build(a, b)
    assert [s.label for s in comp.sides] == ["box @ 2026-11-30 01:00", "box @ 2026-11-30 02:00"]


def test_colliding_labels_get_their_times_to_one_precision():
    """Five quick runs a minute apart: two share a minute, so all five are told apart to the
    second, in one format (a mix of '13:17' and '2026-12-05T13:16:57+00:00' read as two kinds
    of side); runs that started at the same second are numbered."""
    starts = ["13:16:19", "13:16:57", "13:17:32", "13:18:13", "13:18:50"]
    comp = build(*[make_run(None, started=f"2026-12-05T{t}+00:00") for t in starts])
    assert [s.label for s in comp.sides] == [f"box @ 2026-12-05 {t}" for t in starts]
    same = [make_run(None, started="2026-12-05T13:16:19+00:00") for _ in range(2)]
    assert [s.label for s in build(*same).sides] == ["box @ 2026-12-05T13:16:19+00:00",
                                                     "box @ 2026-12-05T13:16:19+00:00 #2"]


def test_a_run_without_its_finish_time_is_said_to_be_unfinished(tmp_path, capsys):
    """A run writes results.json after each probe and its finish time at the end: one read
    while it still runs, or killed before its end, is compared for what it measured, and the
    header says it is unfinished; a side of pooled runs names which."""
    base = save(tmp_path, "base", make_run("base"))
    late = make_run("new")
    late.finished_at = None
    new = save(tmp_path, "new", late)
    code, out, _ = run_cli(capsys, "compare", base, new)
    heads = [x for x in out.splitlines() if x.startswith("- **")]
    assert heads[0].endswith(" — CPU AMD EPYC 9654") and heads[1].endswith(
        " — CPU AMD EPYC 9654; no finish time (still running, or stopped before the end)"), heads
    save(tmp_path, "new2", make_run("new", started="2026-11-30T01:00:00+00:00"))
    code, out, _ = run_cli(capsys, "compare", base, str(tmp_path / "new*"))
    head = next(x for x in out.splitlines() if x.startswith("- **new** (compared, 2 runs"))
    assert head.endswith(f"; 1 of its 2 runs has no finish time (still running, or stopped "
                         f"before the end): `{new}`"), head


def test_baseline_runs_are_pooled(tmp_path, capsys):
    bases = [save(tmp_path, f"base{i}", make_run("base", factor=f, n=3,
                                                 started=f"2026-11-3{i}T00:00:00+00:00"))
             for i, f in enumerate((1.0, 1.02))]
    new = save(tmp_path, "new", make_run("new", factor=0.8, n=3))
    comp = build(*[results.load(p) for p in [new]],
                 baseline=[results.load(p) for p in bases])
    r = row(comp, "matmul", "flops", size=512)
    base = r.cells["base"]
    assert base.runs == 2 and len(base.samples) == 6
    # the units are each run's rounds: 2 runs x 3 rounds against 1 run x 3 rounds
    assert len(base.units) == 6 and r.cells["new"].decision.units == (6, 3)
    assert r.cells["new"].decision.outcome == regression.REGRESSED
    # the pooled run stands for the side in the verdict and the cost
    pooled = comp.baseline.run.probe("matmul").measurements[1]
    assert len(pooled.samples) == 6
    # on the command line: --baseline twice, or a quoted glob as one positional side
    code, out, _ = run_cli(capsys, "compare", "--baseline", bases[0], "--baseline", bases[1],
                           new)
    assert code == 3 and "base** (baseline, 2 runs pooled)" in out
    news = [save(tmp_path, f"new{i}", make_run("new", factor=0.8, n=3)) for i in (1, 2)]
    (tmp_path / "base-compare").mkdir()  # a folder without a run, which the glob skips
    (tmp_path / "base-compare" / "compare.md").write_text("# an earlier comparison\n")
    (tmp_path / "base.xml").write_text("<testsuites/>")  # history --junit's beside the runs
    code, out, _ = run_cli(capsys, "compare", str(tmp_path / "base*"), str(tmp_path / "new?"))
    assert code == 3 and "new** (compared, 2 runs pooled)" in out
    assert "| 6 / 6 |" in out and len(news) == 2  # values a side: 2 runs x 3 rounds each
    # a glob that matches no run but other files names what it looked for
    code, _, err = run_cli(capsys, "compare", bases[0], str(tmp_path / "base.*"))
    assert code == 2 and "base.*: matches no results.json or run folder" in err
    # and a .json it matches must be a run
    (tmp_path / "new3.json").write_text("{")
    code, _, err = run_cli(capsys, "compare", bases[0], str(tmp_path / "new*"))
    assert code == 2 and "new3.json: corrupt JSON" in err
    # a folder of run folders is the side its runs pool into, as its quoted glob 'DIR/*' is
    (tmp_path / "nights").mkdir()
    for i in (1, 2):
        save(tmp_path / "nights", f"new{i}", make_run("new", factor=0.8, n=3))
    code, out, _ = run_cli(capsys, "compare", "--baseline", bases[0], "--baseline", bases[1],
                           tmp_path / "nights")
    assert code == 3 and "new** (compared, 2 runs pooled)" in out and "| 6 / 6 |" in out


def _step_time_run(label, step_s, started):
    """memory_fit's step time, a time judged on its own (no throughput stands for it)."""
    key = {"mode": "plain", "rung": "125m", "seq_len": 64, "precision": "fp32"}
    return make_run(label, started=started, probes=[ProbeResult(
        name="memory_fit", status="ok", resource="gpu_memory", measurements=[
            m("step_time", key, spread(step_s), "s", hib=False)])])


def test_a_time_that_grew_says_how_many_times_slower_everywhere(tmp_path, capsys):
    """A step that takes 2.77 times as long: '2.77× slower' in the change column, the value's
    cell, the terminal's last line and compare.html, never an oriented '−177.1%'."""
    bases = [save(tmp_path, f"base{i}", _step_time_run("base", 0.356, f"2026-11-0{i}T00:00:00"
                                                       "+00:00")) for i in (1, 2)]
    for i in (1, 2):
        save(tmp_path, f"new{i}", _step_time_run("new", 0.356 * 2.771,
                                                 f"2026-11-1{i}T00:00:00+00:00"))
    code, out, _ = run_cli(capsys, "compare", "--baseline", bases[0], "--baseline", bases[1],
                           tmp_path / "new*", "--out", tmp_path / "cmp")
    assert code == 3
    regressions = out.split("## Regressions")[1].split("\n## ")[0]
    assert "| memory_fit step_time " in regressions and "| 2.77× slower |" in regressions
    assert "| 356 ms (2 runs) | 986 ms (2 runs) · 2.77× slower ▼ |" in out
    assert "2.77× slower" in out.strip().splitlines()[-1]  # the terminal's last line
    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert "2.77× slower" in html
    for text in (out, html):
        assert "177" not in text
    faster = compare_md.render(build(_step_time_run("a", 0.5, "2026-11-01T00:00:00+00:00"),
                                     _step_time_run("b", 0.25, "2026-11-02T00:00:00+00:00")))
    assert "| 2.00× faster |" in faster and "500 ms · " not in faster
    assert "| 500 ms | 250 ms · 2.00× faster ▲ |" in faster


def test_different_hardware_is_compared_but_no_regression_called(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("h100", gpus=["NVIDIA H100 80GB HBM3"]))
    b = save(tmp_path, "b", make_run("a100", factor=0.5, gpus=["NVIDIA A100-SXM4-80GB"]))
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0
    assert "**Different hardware**: a100 (GPU NVIDIA A100-SXM4-80GB)" in out
    assert "0.50× –" in out
    c = save(tmp_path, "c", make_run("other-cpu", factor=0.5, cpu="Intel Xeon 8480+"))
    d = save(tmp_path, "d", make_run("cpu"))
    assert run_cli(capsys, "compare", d, c)[0] == 0


# --- the verb end to end ------------------------------------------------------------------------

def test_clear_drop_exits_3_and_identical_runs_exit_0(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("before"))
    b = save(tmp_path, "b", make_run("after", factor=0.8))
    code, out, err = run_cli(capsys, "compare", a, b)
    assert code == 3 and "**4 regressions** (exit 3)" in out
    assert re.search(r"\| after \| matmul flops dtype=fp32 size=512 \| 100 GFLOP/s \| "
                     r"80.0 GFLOP/s \| −20.0% \| ±\d+% \| 3 / 3 \|", out)
    assert "Not tested: 1 × a peak over sizes" in out
    # the terminal's last line, where a CI log ends, says the outcome and names the worst
    assert re.search(r"compared 2 runs in [\d.]+ s: 4 regressions \(matmul flops "
                     r"dtype=fp32 size=256 −20.0%; matmul flops dtype=fp32 size=512 −20.0%; "
                     r"resnet50 fp32 224px −20.0%; and 1 more\), exit 3\n$", err), err
    same = save(tmp_path, "same", make_run("again"))
    code, out, err = run_cli(capsys, "compare", a, same)
    assert code == 0 and "**No regression** (exit 0)" in out
    assert err.endswith(": no regression, exit 0\n"), err


def test_improvements_and_inconclusive_are_listed_and_keep_exit_0(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("before"))
    b = save(tmp_path, "b", make_run("faster", factor=1.3))
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0 and "## Improvements" in out and "+30.0%" in out
    # -10% on a side whose rounds scatter by ±25%: within what the noise explains
    noisy = save(tmp_path, "n", make_run("noisy", factor=0.9, round_rel=0.25))
    code, out, _ = run_cli(capsys, "compare", a, noisy)
    assert code == 0 and "## Inconclusive" in out
    assert "values of matmul flops differ by up to" in out and "--rounds" in out



def test_inconclusive_for_unknown_noise_says_why_once_and_each_rows_unsteadiness(tmp_path,
                                                                                 capsys):
    """A probe measured once a run has no second value to say the noise: the reason is said
    once for all its rows, which keep their change and, where a run's own samples varied by
    more than 10%, by how much."""
    def once(label, factor, jitter):
        run = make_run(label)
        run.probes.append(ProbeResult(name="storage", status="ok", resource="storage",
                                      measurements=[
            Measurement(metric="read_bandwidth", key={"job": job}, value=1e9 * factor,
                        unit="B/s", statistic="median", higher_is_better=True,
                        samples=[1e9 * factor * (1 + jitter * d) for d in (-1, 0, 1)])
            for job in ("seq1m", "rand128k")]))
        return run

    a = save(tmp_path, "a", once("before", 1.0, 0.01))
    b = save(tmp_path, "b", once("after", 0.9, 0.2))
    code, out, _ = run_cli(capsys, "compare", a, b)
    section = out.split("## Inconclusive")[1].split("\n## ")[0]
    assert code == 0 and section.count("no measurement of their kind") == 1
    assert "Noise unknown in 2 measurements of storage reads (`storage`):" in section
    assert "| after | storage read_bandwidth job=seq1m | −10.0% | candidate CV 20% |" in section
    assert "noise unknown:" not in section  # not once a row

def test_threshold_and_alpha_flags(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("before"))
    b = save(tmp_path, "b", make_run("after", factor=0.9))
    assert run_cli(capsys, "compare", a, b)[0] == 3
    assert run_cli(capsys, "compare", a, b, "--threshold", "15")[0] == 0
    # alpha is the pooled t-test's: a looser one calls what the strict one leaves open
    a2 = save(tmp_path, "a2", make_run("before", started="2026-11-29T00:00:00+00:00"))
    for i in range(2):
        save(tmp_path, f"c{i}", make_run("after2", factor=0.93, round_rel=0.12,
                                         started=f"2026-11-30T0{i}:00:00+00:00"))
    args = ["--baseline", a, "--baseline", a2, str(tmp_path / "c?")]
    assert run_cli(capsys, "compare", *args)[0] == 0
    assert run_cli(capsys, "compare", *args, "--alpha", "0.2")[0] == 3


@pytest.mark.parametrize("args,needle", [
    (["--threshold", "-1"], "--threshold"),
    (["--alpha", "0"], "--alpha"),
    (["--alpha", "1.5"], "--alpha"),
    (["--utilization", "0"], "--utilization"),
    (["--utilization", "1.2"], "--utilization"),
    (["--price", "before2.5"], "expected LABEL=NUMBER"),
    (["--price", "nobody=2.5"], "matches no run"),
    (["--price", "before=0"], "must be positive"),
    (["--price", "before=cheap"], "is not a number"),
    (["--buy", "before"], "expected LABEL=NUMBER"),
    (["--tokens", "0"], "--tokens"),
])
def test_bad_flags_are_refused_with_one_line(tmp_path, capsys, args, needle):
    a = save(tmp_path, "a", make_run("before"))
    b = save(tmp_path, "b", make_run("after"))
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "compare", a, b, "--out", out_dir, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not out_dir.exists()


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("before"))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 1, "probes": [')
    newer = tmp_path / "newer.json"
    data = json.loads((FIXTURES / "results_v1_cpu.json").read_text())
    data["schema_version"] = 99
    newer.write_text(json.dumps(data))
    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}')
    cases = [([a, newer], "newer than"), ([a, other], "no schema_version"),
             ([a, tmp_path / "nope"], "no such"), ([a], "nothing to compare"),
             (["--baseline", a], "nothing to compare"),
             ([tmp_path / "zz*"], "matches no results.json"),
             ([a, tmp_path / "empty"], "no results.json in it or in the folders")]
    (tmp_path / "empty").mkdir()
    for args, needle in cases:
        code, out, err = run_cli(capsys, "compare", *args, "--out", tmp_path / "out")
        assert code == 2 and out == "", (args, err)
        assert err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "out").exists()
    # as a user runs it: one line on stderr, no traceback
    proc = subprocess.run([sys.executable, "-m", "benchbench", "compare", a, str(corrupt)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "corrupt JSON" in proc.stderr
    # the same run as baseline and as the other side would compare a run with itself
    code, out, err = run_cli(capsys, "compare", "--baseline", a, a)
    assert code == 2 and "the same run is on two sides" in err


def test_the_fixture_of_an_older_benchbench_compares(capsys, tmp_path):
    """A run recorded by an earlier version (cuDNN as an integer) still compares."""
    fixture = FIXTURES / "results_v1_cpu.json"
    copy = tmp_path / "copy.json"
    copy.write_text(fixture.read_text())
    code, out, _ = run_cli(capsys, "compare", fixture, copy)
    assert code == 0 and "| cuDNN | 9.24.0 | 9.24.0 |" in out


def test_out_must_be_new_or_empty(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("before"))
    b = save(tmp_path, "b", make_run("after"))
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    code, _, err = run_cli(capsys, "compare", a, b, "--out", full)
    assert code == 2 and "not empty" in err


def test_files_html_escapes_and_csv_columns(tmp_path, capsys):
    evil = "<script>alert(1)</script>"
    a = save(tmp_path, "a", make_run(evil, cpu="AMD <b>EPYC</b>"))
    b = save(tmp_path, "b", make_run("after", factor=0.8, cpu="AMD <b>EPYC</b>"))
    out = tmp_path / "out"
    code, printed, _ = run_cli(capsys, "compare", a, b, "--out", out)
    assert code == 3
    assert sorted(p.name for p in out.iterdir()) == ["compare.csv", "compare.html",
                                                     "compare.md"]
    assert (out / "compare.md").read_text() == printed
    page = (out / "compare.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>" not in page and "&lt;b&gt;" in page
    assert "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 1  # headline bars; no all-reduce here
    assert "4 regressions" in page
    with open(out / "compare.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["probe", "metric", "key.device", "key.dtype", "key.size",
                             "key.precision", "key.image_size", "key.batch_size", "key.memory",
                             *compare_md.TRAILING]
    reg = [r for r in rows if r["outcome"] == "regressed"]
    assert {r["side"] for r in reg} == {"after"} and len(reg) == 4
    base = [r for r in rows if r["baseline"] == "True"]
    assert base and all(r["side"] == evil and r["ratio"] == "" for r in base)


def test_allreduce_curves_are_drawn(tmp_path, capsys):
    def ar(factor):
        ms = [m("busbw", {"backend": "nccl", "dtype": "fp32", "world_size": 8, "nodes": 1,
                          "size_bytes": s}, spread(1e9 * factor * (i + 1)), "B/s")
              for i, s in enumerate((2**20, 2**24, 2**28))]
        ms.append(m("peak_busbw", {"backend": "nccl", "dtype": "fp32", "world_size": 8,
                                   "nodes": 1}, [x.value for x in ms], "B/s", "max"))
        return [
            ProbeResult(name="allreduce", status="ok", resource="interconnect", measurements=ms)
        ]

    a = save(tmp_path, "a", make_run("a", probes=ar(1.0)))
    b = save(tmp_path, "b", make_run("b", probes=ar(0.7)))
    out = tmp_path / "out"
    code, text, _ = run_cli(capsys, "compare", a, b, "--out", out)
    assert code == 3 and "all_reduce peak busbw nccl ×8" in text
    assert (out / "compare.html").read_text().count("data:image/png;base64,") == 2


# --- cost ---------------------------------------------------------------------------------------

def test_cost_uses_the_stored_price_and_ranks_the_runs(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("cheap", price=2.0))
    b = save(tmp_path, "b", make_run("dear", factor=1.0, price=4.0,
                                     started="2026-11-30T01:00:00+00:00"))
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 0 and "## Cost" in out
    # 20 images/s for $2/h: 72,000 images per $2 -> $27.78 per million images
    assert "| cheap | $2.00/h (stored in the run) | $27.78 |" in out
    assert "| dear | $4.00/h (stored in the run) | $55.56 |" in out
    assert "Cheapest per job first: cheap < dear." in out
    # --price overrides the stored one, by label or by the path given
    code, out, _ = run_cli(capsys, "compare", a, b, "--price", f"{b}=1")
    assert "| dear | $1.00/h (--price) | $13.89 |" in out
    assert "Cheapest per job first: dear < cheap." in out


def test_cost_marks_a_run_that_does_not_represent_training(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("small", image_size=64, price=2.0))
    b = save(tmp_path, "b", make_run("real", price=2.0))
    _, out, _ = run_cli(capsys, "compare", a, b)
    assert "| small ⚠ |" in out and "| real |" in out and "not representative" in out


def test_buy_vs_rent_takes_an_equivalent_priced_run(tmp_path, capsys):
    a = save(tmp_path, "a", make_run("cloud", price=3.0))
    b = save(tmp_path, "b", make_run("mine"))
    code, out, _ = run_cli(capsys, "compare", a, b, "--buy", "mine=20000", "--power-watts",
                           "500", "--utilization", "0.8")
    assert code == 0 and "### Buy mine for $20,000.00 or rent it" in out
    assert "the cheapest priced run with the same hardware, cloud" in out
    # 20000 / (3 × 8760) / 0.8 + 0.5 kW × $0.15 = $1.03 per useful hour
    assert "| owned, per useful hour | $1.03/h at 80% utilisation |" in out
    assert "The buyer's guide claims:" in out
    c = save(tmp_path, "c", make_run("other", cpu="Intel Xeon 8480+"))
    _, out, _ = run_cli(capsys, "compare", c, b, "--buy", "other=20000")
    assert "no cloud price to hold it against" in out


def test_compare_imports_without_torch(tmp_path):
    a = save(tmp_path, "a", make_run("a"))
    b = save(tmp_path, "b", make_run("b", factor=0.8))
    # A finder that refuses torch and friends, as on a machine without them (None in
    # sys.modules would also do, but scipy.stats trips over a None "torch" entry there).
    code = ("import sys\n"
            "BLOCKED = {'torch', 'torchvision', 'pynvml', 'nvidia'}\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in BLOCKED:\n"
            "            raise ImportError(f'{name} is blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from benchbench import cli\n"
            "code = cli.main(['compare', sys.argv[1], sys.argv[2], '--out', sys.argv[3]])\n"
            "assert not BLOCKED & set(sys.modules), BLOCKED & set(sys.modules)\n"
            "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code, a, b, str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "o" / "compare.html").exists()


def test_a_probe_that_stopped_measuring_is_a_regression(tmp_path, capsys):
    """The loaded machine's transformer ran out of its budget: that is a regression of the
    probe, with its reason, not an "only in some runs" footnote."""
    a = make_run("before")
    b = make_run("after")
    b.probes[1] = ProbeResult(name="resnet50", status="skipped", resource="cpu_compute",
                              reason="fp32 skipped, because one warm step takes ~9 s, beyond "
                                     "its time budget")
    code, out, err = run_cli(capsys, "compare", save(tmp_path, "a", a), save(tmp_path, "b", b))
    assert code == 3 and "**0 regressions and 1 probe that stopped measuring** (exit 3)" in out
    assert err.endswith(": 1 regression (resnet50 skipped), exit 3\n"), err
    assert "## Probes that stopped measuring" in out
    assert "| after | resnet50 | skipped | fp32 skipped, because one warm step takes ~9 s" in out
    # not asked for in the candidate: not a regression
    c = make_run("after2")
    c.probes = c.probes[:1]
    comp = build(a, c)
    assert comp.stopped == []


def test_pooling_catches_a_small_drop_one_pair_cannot_claim(tmp_path, capsys):
    """Three runs a side of two rounds each, with the ~3% run-to-run noise of a cloud GPU:
    the pooled sides call an 8% drop; one run a side leaves it open."""
    noise = [(-1.0, 0.6), (0.4, -0.8), (0.9, -0.3)]  # each run's two rounds, in units of 3%

    def runs(name, factor):
        out = []
        for i, (r1, r2) in enumerate(noise):
            run = make_run(name, factor=factor, started=f"2026-11-30T0{i}:00:00+00:00")
            for p in run.probes:
                p.measurements = [dataclasses.replace(m, context={
                    **m.context, "round_values": [m.value * (1 + 0.03 * r1),
                                                  m.value * (1 + 0.03 * r2)]})
                    for m in p.measurements]
            out.append(save(tmp_path, f"{name}{i}", run))
        return out

    before, after = runs("before", 1.0), runs("after", 0.92)
    code, out, _ = run_cli(capsys, "compare", str(tmp_path / "before?"),
                           str(tmp_path / "after?"))
    assert code == 3 and "resnet50 throughput" in out.split("## Regressions")[1]
    code, out, _ = run_cli(capsys, "compare", before[0], after[0])
    assert code == 0 and "## Inconclusive" in out


def test_a_drop_measured_while_the_machine_was_flagged_says_so():
    """A slowdown seen while telemetry flagged throttling or another tenant's CPU steal on the
    candidate (and never on the baseline) names the machine as the first suspect."""
    base = [make_run("a", started=f"2026-11-30T0{i}:00:00+00:00") for i in range(3)]
    slow = [make_run("b", factor=0.5, started=f"2026-11-30T0{i}:30:00+00:00") for i in range(3)]
    flag = "another tenant took 4.1% of this VM's CPU time while matmul ran"
    for r in slow:
        r.extra["telemetry"] = {"flags": {"matmul": [flag]}}
    comp = build(*slow, baseline=base)
    cells = [c for row in comp.rows if row.probe == "matmul" for c in row.cells.values()
             if c.decision and c.decision.outcome == regression.REGRESSED]
    assert cells and all(f"measured while {flag}" in c.decision.reason for c in cells)
    others = [c for row in comp.rows if row.probe == "resnet50" for c in row.cells.values()
              if c.decision and c.decision.outcome == regression.REGRESSED]
    assert others and not any("measured while" in c.decision.reason for c in others)


# --- the clock a changed figure ran at ---------------------------------------------------------

def clocked_side(label, per_ghz, ghz, runs=3, baseline=False):
    """Runs of one GPU's bf16 matmul whose samples carry their SM clock: per_ghz TFLOP/s per
    GHz at ghz, each run's rounds within ±1%."""
    made = []
    for i in range(runs):
        hz = [ghz * 1e9 * (1 + 0.003 * d) for d in (-1, 0, 1)]
        samples = [per_ghz * 1e12 * h / 1e9 * (1 + 0.002 * i) for h in hz]
        mm = m("flops", {"device": "cuda:0", "dtype": "bf16", "size": 8192}, samples)
        mm.context["sm_clock_Hz"] = hz
        run = make_run(label=f"{label}{i}", gpus=("NVIDIA H200",), driver="580.1",
                       started=f"2026-11-3{i}T00:00:00+00:00" if i < 1 else
                       f"2026-12-0{i}T00:00:00+00:00", probes=[ProbeResult(
                           name="matmul", status="ok", resource="gpu_compute",
                           measurements=[mm])])
        made.append(run)
    side = sides.Side(label=label, runs=made, sources=[label], baseline=baseline)
    side.run = align.pooled_run(made)
    return side


@pytest.mark.parametrize("after, says", [
    ((488, 1.485), "SM clock 1,755 → 1,485 MHz (−15.4%) while the samples ran, per GHz of it "
                   "+0.0%: the clock moved, not the work per cycle"),
    ((413, 1.755), "SM clock 1,755 → 1,755 MHz (+0.0%) while the samples ran, per GHz of it "
                   "−15.4%: the work per cycle moved, not the clock"),
])
def test_a_regression_says_whether_the_clock_or_the_work_per_cycle_moved(after, says):
    """A driver upgrade that costs 15% of the matmul: at a lower clock (power, cooling, a clock
    policy) the rate per GHz holds; with slower kernels the clock holds."""
    base = clocked_side("before", 488, 1.755, baseline=True)
    comp = comparison.compare([base, clocked_side("after", *after)])
    (r,) = comp.rows
    d = r.cells["after"].decision
    assert d.outcome == regression.REGRESSED
    assert says in d.reason


def test_a_side_without_clocks_gets_no_clock_clause():
    base = clocked_side("before", 488, 1.755, baseline=True)
    after = clocked_side("after", 488, 1.485)
    for run in after.runs:
        run.probes[0].measurements[0].context.pop("sm_clock_Hz")
    after.run = align.pooled_run(after.runs)
    d = comparison.compare([base, after]).rows[0].cells["after"].decision
    assert d.outcome == regression.REGRESSED and "SM clock" not in d.reason
