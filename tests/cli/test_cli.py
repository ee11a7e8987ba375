"""The CLI end to end on the CPU, in subprocesses, as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchbench.core import results

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def bb(*args, **kw):
    return subprocess.run([sys.executable, "-m", "benchbench", *args], capture_output=True,
                          text=True, timeout=kw.pop("timeout", 180), **kw)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "quick"
    proc = bb("run", "--quick", "--device", "cpu", "--only", "matmul,memory_bandwidth",
              "--out", str(out), "--label", "ci-box")
    return proc, out


@pytest.mark.slow
def test_quick_run_writes_valid_results(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, proc.stderr
    run = results.load(out / "results.json")
    assert run.schema_version == results.SCHEMA_VERSION
    assert run.label == "ci-box" and run.finished_at
    assert run.config["quick"] is True and run.config["only"] == ["matmul", "memory_bandwidth"]
    assert [p.name for p in run.probes] == ["matmul", "memory_bandwidth"]
    assert all(p.status == "ok" for p in run.probes), [p.reason for p in run.probes]
    mm = run.probe("matmul")
    # fp8 is asked for on a CPU too, so that the run says why it has none.
    assert mm.resource == "cpu_compute" and mm.params["dtypes"] == ["fp32", "bf16", "fp8"]
    assert {m.key["dtype"] for m in mm.measurements} == {"fp32", "bf16"}
    assert "fp8 on cpu skipped, because fp8 needs the tensor cores of a GPU" in mm.reason
    mb = run.probe("memory_bandwidth")
    (copy,) = mb.measurements
    assert copy.key["memory"] == "host" and copy.unit == "B/s"
    assert copy.key["size_bytes"] >= 4 * run.environment["host"]["llc_bytes"]
    # on a GPU machine NVML still lists the GPUs this --device cpu run left alone
    assert run.environment["gpus"] or run.environment["gpus_reason"]
    report = (out / "report.md").read_text()
    assert "### Matrix multiply (`matmul`), CPU compute" in report
    assert "GFLOP/s" in report and "GB/s" in report


@pytest.mark.slow
def test_report_regenerates_from_results(quick_run, tmp_path):
    _, out = quick_run
    proc = bb("report", str(out / "results.json"), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.md").read_text() == (out / "report.md").read_text()


def test_report_of_recorded_fixture(tmp_path):
    proc = bb("report", str(FIXTURES / "results_v1_cpu.json"), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "report.md").read_text()
    # The probe by its name, its id in code, and why it was skipped.
    assert ("Host-to-GPU copies (`host_device_copy`): skipped, because it needs a CUDA GPU"
            in text)


def _one_line_error(proc):
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_unknown_probe_lists_valid_names(tmp_path):
    out = tmp_path / "r"
    line = _one_line_error(bb("run", "--only", "matmul,warp", "--out", str(out)))
    assert "unknown probe warp" in line and "memory_bandwidth" in line
    assert not out.exists()


def test_non_empty_out_is_refused(tmp_path):
    (tmp_path / "keep.txt").write_text("a previous run")
    line = _one_line_error(bb("run", "--quick", "--out", str(tmp_path)))
    assert "not empty" in line
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_unwritable_out_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_line_error(bb("run", "--quick", "--out", str(blocker / "sub")))
    assert "not writable" in line


@pytest.mark.parametrize("args,needle", [
    (["--set", "matmul.sizes"], "malformed --set"),
    (["--set", "matmul.colour=red"], "unknown config field matmul.colour"),
    (["--set", "matmul.sizes=big"], "expected an integer"),
    (["--device", "tpu"], "invalid choice"),
])
def test_bad_run_arguments(tmp_path, args, needle):
    out = tmp_path / "r"
    assert needle in _one_line_error(bb("run", "--out", str(out), *args))
    assert not out.exists()


def test_report_bad_inputs(tmp_path):
    assert "no such file" in _one_line_error(bb("report", str(tmp_path / "missing.json")))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema_version": 1, "probes": [')
    assert "corrupt JSON" in _one_line_error(bb("report", str(corrupt)))
    newer = tmp_path / "newer.json"
    data = json.loads((FIXTURES / "results_v1_cpu.json").read_text())
    data["schema_version"] = 99
    newer.write_text(json.dumps(data))
    assert "newer than this benchbench" in _one_line_error(bb("report", str(newer)))


def test_version_list_and_env():
    assert bb("--version").stdout.strip().startswith("benchbench ")
    listing = bb("list", "--fields")
    assert listing.returncode == 0
    assert "host_device_copy" in listing.stdout and "skipped, because" in listing.stdout
    assert "matmul.sizes = " in listing.stdout  # the default for this device
    assert "transformer.batch_size = 8 " in listing.stdout  # resolved for this device
    env = bb("env", "--json")
    assert env.returncode == 0
    snap = json.loads(env.stdout)
    assert snap["host"]["cores_usable"] >= 1 and "versions" in snap


def test_device_cuda_without_gpu_is_refused(tmp_path):
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = tmp_path / "r"
    line = _one_line_error(bb("run", "--device", "cuda", "--out", str(out)))
    assert line.startswith("benchbench: error: --device cuda: no usable CUDA GPU here")
    assert not out.exists()


def test_impossible_training_shape_is_refused_before_work(tmp_path):
    out = tmp_path / "r"
    line = _one_line_error(bb("run", "--out", str(out), "--set", "transformer.seq_len=4096"))
    assert "larger than the small model supports (1024)" in line
    assert not out.exists()


@pytest.mark.parametrize("make,needle", [
    (lambda p: p / "missing", "--data-dir"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "--data-dir"),
    (lambda p: ((p / "flat").mkdir(), (p / "flat" / "a.jpg").write_bytes(b"x"))
     and p / "flat", "--data-dir"),
])
def test_bad_data_dir_is_refused_before_work(tmp_path, make, needle):
    data, out = make(tmp_path), tmp_path / "r"
    line = _one_line_error(bb("run", "--data-dir", str(data), "--out", str(out)))
    assert line.startswith(f"benchbench: error: {needle} {data}: ")
    assert not out.exists()


def test_bad_storage_path_is_refused_before_work(tmp_path):
    out = tmp_path / "r"
    line = _one_line_error(bb("run", "--only", "storage", "--storage-path",
                              str(tmp_path / "nope"), "--out", str(out)))
    assert "--storage-path" in line and not out.exists()
    line = _one_line_error(bb("run", "--only", "storage", "--storage-path", str(tmp_path),
                              "--set", "storage.size=100T", "--out", str(out)))
    assert "free" in line and not out.exists()
