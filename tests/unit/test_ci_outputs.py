"""What CI systems and monitoring read (#24): compare's --junit parses with a JUnit parser and
fails the regressed measurements' cases; export --openmetrics writes a textfile that
prometheus-client's parser reads back, with the headline figures as gauges."""

from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped
from prometheus_client.parser import text_string_to_metric_families
from synthetic_runs import cpu_run, gpu_node

from benchbench import cli
from benchbench.core import results

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"


def save(root, name, run):
    d = root / name
    d.mkdir()
    results.save(run, d / "results.json")
    return d


def run_cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_junit_fails_the_regressed_cases(tmp_path, capsys):
    a = save(tmp_path, "a", cpu_run("2026-11-29T02:00:00+00:00", label="before",
                                    rounds=(0.98, 1.0, 1.02)))
    b = save(tmp_path, "b", cpu_run("2026-11-30T02:00:00+00:00", label="after",
                                    rounds=(0.98, 1.0, 1.02), factors={"resnet50": 0.6}))
    xml = tmp_path / "compare.xml"
    code, _, err = run_cli(capsys, "compare", a, b, "--junit", xml)
    assert code == 3, err
    assert f"written: {xml}" in err
    suite = JUnitXml.fromfile(str(xml))
    cases = [c for s in suite for c in s]
    assert len(cases) == 7  # one per measurement
    failed = [c for c in cases if c.result and isinstance(c.result[0], Failure)]
    assert [c.name for c in failed] == [
        "resnet50 throughput precision=fp32 image_size=64 batch_size=8"]
    assert failed[0].classname == "benchbench.compare.resnet50"
    assert failed[0].result[0].message.startswith("after: 24.0 images/s against before's "
                                                  "40.0 images/s (−40.0%): regressed")
    skipped = [c for c in cases if c.result and isinstance(c.result[0], Skipped)]
    assert {c.classname for c in skipped} >= {"benchbench.compare.matmul"}  # peaks: not tested
    # an unchanged run (the same measurements, run again): no failed case
    again = save(tmp_path, "again", cpu_run("2026-11-29T03:00:00+00:00", label="again",
                                            rounds=(0.98, 1.0, 1.02)))
    code, _, _ = run_cli(capsys, "compare", a, again, "--junit", xml)
    assert code == 0
    assert not [c for s in JUnitXml.fromfile(str(xml)) for c in s
                if c.result and isinstance(c.result[0], Failure)]


def families(path):
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def test_export_writes_a_textfile_prometheus_parses(tmp_path, capsys):
    run = save(tmp_path, "gpu", gpu_node("dgx01", gpus=2))
    prom = tmp_path / "benchbench.prom"
    code, out, err = run_cli(capsys, "export", run, "--openmetrics", prom)
    assert code == 0 and out == "" and err == f"written: {prom}\n"
    got = families(prom)
    resnet = got["benchbench_resnet50_images_per_second"]
    (sample,) = resnet.samples
    assert sample.labels == {"precision": "amp_bf16", "image_size": "224", "batch_size": "256",
                             "device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3"}
    assert sample.value == 3000.0 and resnet.type == "gauge"
    flops = got["benchbench_matmul_peak_flop_per_second"]
    assert {(s.labels["device"], s.labels["dtype"]) for s in flops.samples} == {
        ("cuda:0", "bf16"), ("cuda:0", "fp16"), ("cuda:1", "bf16"), ("cuda:1", "fp16")}
    assert got["benchbench_host_device_copy_bytes_per_second"].samples[0].value == 5.3e10
    (info,) = got["benchbench_run_info"].samples
    assert info.labels["host"] == "dgx01" and info.labels["driver"] == "550.54.15"
    assert got["benchbench_run_start_time_seconds"].samples[0].value == 1796004000.0
    # run again: replaced, not appended to (a textfile collector reads the whole file)
    run_cli(capsys, "export", run, "--openmetrics", prom)
    assert len(families(prom)["benchbench_resnet50_images_per_second"].samples) == 1


def test_export_of_an_older_cpu_run(tmp_path, capsys):
    prom = tmp_path / "old.prom"
    code, _, _ = run_cli(capsys, "export", FIXTURE, "--openmetrics", prom)
    assert code == 0
    got = families(prom)
    fp32, bf16 = got["benchbench_matmul_peak_flop_per_second"].samples
    assert fp32.labels == {"device": "cpu", "dtype": "fp32"} and fp32.value > 1e11
    (copy,) = got["benchbench_memory_copy_bytes_per_second"].samples
    assert copy.labels == {"memory": "host"}
