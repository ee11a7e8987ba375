import json
from pathlib import Path

import pytest

from benchbench.core import results
from benchbench.core.results import Measurement, ProbeResult, ResultsError, RunResult

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def make_run(**extra) -> RunResult:
    m = Measurement(
        metric="flops",
        key={"device": "cpu", "dtype": "fp32", "size": 256},
        value=2.0e11,
        unit="FLOP/s",
        statistic="median",
        samples=[1.9e11, 2.0e11, 2.1e11],
        higher_is_better=True,
        context={"calls_per_sample": 10},
    )
    return RunResult(
        tool={"name": "benchbench", "version": "0"},
        started_at="t0",
        environment={"host": {"hostname": "h"}},
        config={"quick": True},
        argv=["run"],
        probes=[ProbeResult(name="matmul", status="ok", resource="cpu_compute", measurements=[m])],
        **extra,
    )


def test_round_trip(tmp_path):
    run = make_run(label="x", extra={"dataset": {"n": 1}, "not_reserved": 1})
    path = tmp_path / "results.json"
    results.save(run, path)
    back = results.load(path)
    assert back.to_dict() == run.to_dict()
    assert back.extra == {"dataset": {"n": 1}}  # only the reserved optional keys survive
    assert back.probes[0].measurements[0].samples == [1.9e11, 2.0e11, 2.1e11]
    assert results.load(tmp_path).label == "x"  # a run folder works too


def test_unit_status_and_resource_are_closed_sets():
    with pytest.raises(ValueError, match="unit"):
        Measurement(
            metric="x",
            key={},
            value=1.0,
            unit="GB/s",
            statistic="median",
            samples=[1.0],
            higher_is_better=True,
        )
    with pytest.raises(ValueError, match="statistic"):
        Measurement(
            metric="x",
            key={},
            value=1.0,
            unit="B/s",
            statistic="mean",
            samples=[1.0],
            higher_is_better=True,
        )
    with pytest.raises(ValueError, match="finite"):
        Measurement(
            metric="x",
            key={},
            value=float("inf"),
            unit="B/s",
            statistic="median",
            samples=[1.0],
            higher_is_better=True,
        )
    with pytest.raises(ValueError, match="status"):
        ProbeResult(name="p", status="done", resource="storage")
    with pytest.raises(ValueError, match="resource"):
        ProbeResult(name="p", status="ok", resource="disk")


@pytest.mark.parametrize("samples, ok", [
    ([1.0, 2.5, 3.0], True), ([], True), ([1, 2.0, True], True), ([1e308, 1e308], True),
    ([1.0, float("nan")], False), ([float("inf"), 1.0], False),
    ([float("inf"), float("-inf")], False), ([1.0, "2.0"], False), ([1.0, None], False),
    ([[1.0]], False)])
def test_every_sample_is_a_finite_number(samples, ok):
    def make():
        return Measurement(metric="x", key={}, value=1.0, unit="B/s", statistic="median",
                           samples=samples, higher_is_better=True)
    if ok:
        assert make().samples == samples
    else:
        with pytest.raises(ValueError, match="every sample must be a finite number"):
            make()


def test_newer_schema_is_refused(tmp_path):
    data = make_run().to_dict()
    data["schema_version"] = results.SCHEMA_VERSION + 1
    p = tmp_path / "results.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="newer than this benchbench"):
        results.load(p)


@pytest.mark.parametrize("text,match", [
    ("{not json", "corrupt JSON"),
    ("[]", "no schema_version"),
    ('{"schema_version": 1}', "not a valid"),
])
def test_corrupt_files_are_refused(tmp_path, text, match):
    p = tmp_path / "results.json"
    p.write_text(text)
    with pytest.raises(ResultsError, match=match):
        results.load(p)


def test_missing_file(tmp_path):
    with pytest.raises(ResultsError, match="no such file"):
        results.load(tmp_path / "nope.json")


def test_a_folder_of_runs_is_named_as_such_with_its_latest_run(tmp_path):
    """`benchbench report runs`: not 'runs/results.json: no such file' but which runs it holds;
    a folder with no run in it stays 'no such file'."""
    with pytest.raises(ResultsError, match="empty/results.json: no such file"):
        (tmp_path / "empty").mkdir()
        results.load(tmp_path / "empty")
    runs = tmp_path / "runs"
    for name in ("20261201T020000Z-vm", "20261202T020000Z-vm", "notes"):
        (runs / name).mkdir(parents=True)
    for name in ("20261201T020000Z-vm", "20261202T020000Z-vm"):
        results.save(make_run(), runs / name / "results.json")
    with pytest.raises(ResultsError, match=rf"^{runs}: a folder of 2 runs, not a run; give one "
                                           rf"of them, e.g. {runs}/20261202T020000Z-vm$"):
        results.load(runs)
    with pytest.raises(ResultsError, match=rf"^{runs}/nope: no such file$"):
        results.load(runs / "nope")  # a missing run beside others is missing, not its folder


def test_recorded_v1_fixture_loads():
    run = results.load(FIXTURES / "results_v1_cpu.json")
    assert run.schema_version == 1
    names = [p.name for p in run.probes]
    assert names == ["matmul", "memory_bandwidth", "host_device_copy"]
    assert run.probe("host_device_copy").status == "skipped"
    for m in run.probe("matmul").measurements:
        assert m.unit == "FLOP/s" and m.samples


def test_write_atomic_leaves_no_temp_files(tmp_path):
    p = tmp_path / "a.txt"
    results.write_atomic(p, "one")
    results.write_atomic(p, "two")
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]
