"""The storage probe: fio JSON parsing on recorded reports, real small runs, the fallback
reader, the dataset cold read, scratch-file cleanup, and what it refuses to touch.

The fixtures under fixtures/fio/ were recorded with fio 3.33 on a 2-core VM (virtio disk),
on 64 MiB files in /tmp (ext4) and /dev/shm (tmpfs), 1 s per job, with the arguments
FioJob.args builds. rand4k-psync-note-stdout.json is fio's stdout (no --output): a note
precedes the JSON. rand4k-2jobs-separate.json has two jobs without group_reporting.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import cpu_facts, resolved

from benchbench.core.config import ConfigError
from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs
from benchbench.storage_probes.storage import dataset_read, fallback, fio
from benchbench.storage_probes.storage import run as probe

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures" / "fio"
MiB = 1024**2
HAVE_FIO = shutil.which("fio") is not None
needs_fio = pytest.mark.skipif(not HAVE_FIO, reason="fio is not installed (apt-get install fio)")


def _ctx(tmp_path: Path, budget_s: float = 30.0, **inputs: Any) -> ProbeContext:
    return ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=2, max_repeats=2, warmup_s=0.0),
                        budget=Budget(budget_s), facts=cpu_facts(),
                        inputs=RunInputs(run_dir=str(tmp_path / "run"), **inputs))


def _scratch_files(folder: Path) -> list[Path]:
    return list(folder.rglob(probe.SCRATCH_PREFIX + "*"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    return tmp_path / "run"


# --- fio JSON ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_parser_agrees_with_fio_on_recorded_reports(name):
    text = (FIXTURES / name).read_text()
    doc = fio.parse_output(text)
    run = fio.read_run(doc)
    reads = [j["read"] for j in doc["jobs"]]
    assert run.io_bytes == sum(r["io_bytes"] for r in reads)
    assert run.ios == sum(r["total_ios"] for r in reads)
    # Our bytes / seconds must match fio's own bandwidth figure (fio rounds runtime to ms).
    assert run.io_bytes / run.seconds == pytest.approx(sum(r["bw_bytes"] for r in reads),
                                                       rel=0.01)
    assert 0 < run.lat_p50_s <= run.lat_p99_s < 1.0
    assert run.lat_p99_s == max(r["lat_ns"]["percentile"]["99.000000"] for r in reads) / 1e9


def test_parser_skips_notes_printed_before_the_json():
    text = (FIXTURES / "rand4k-psync-note-stdout.json").read_text()
    assert text.startswith("note:")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert fio.parse_output(text)["jobs"][0]["job options"]["ioengine"] == "psync"
    doc = fio.parse_output("fio: a warning with {braces}\n{ not json\n" + text)
    assert doc["fio version"] == "fio-3.33"


def test_group_reporting_gives_one_entry_for_all_jobs():
    doc = fio.parse_output((FIXTURES / "rand128k-libaio-4jobs-shm.json").read_text())
    assert doc["jobs"][0]["job options"]["numjobs"] == "4"
    assert len(doc["jobs"]) == 1
    assert fio.read_run(doc).ios == doc["jobs"][0]["read"]["total_ios"]


def test_separate_jobs_are_summed_and_keep_the_worst_latency():
    doc = fio.parse_output((FIXTURES / "rand4k-2jobs-separate.json").read_text())
    a, b = (j["read"] for j in doc["jobs"])
    run = fio.read_run(doc)
    assert run.io_bytes == a["io_bytes"] + b["io_bytes"]
    assert run.seconds == max(a["runtime"], b["runtime"]) / 1000
    assert run.lat_p50_s == max(a["lat_ns"]["percentile"]["50.000000"],
                                b["lat_ns"]["percentile"]["50.000000"]) / 1e9


def test_completion_latency_is_used_without_total_latency_percentiles():
    doc = fio.parse_output((FIXTURES / "seq1m-io_uring-tmp.json").read_text())
    read = doc["jobs"][0]["read"]
    read["lat_ns"].pop("percentile")
    read["clat_ns"]["percentile"] = {"50.000000": 2_000_000, "99.000000": 9_000_000}
    run = fio.read_run(doc)
    assert (run.lat_p50_s, run.lat_p99_s) == (0.002, 0.009)


def test_parser_rejects_failed_or_empty_reports():
    with pytest.raises(fio.FioError, match="no fio JSON"):
        fio.parse_output("fio: engine io_uring not loadable\n")
    doc = fio.parse_output((FIXTURES / "seq1m-io_uring-tmp.json").read_text())
    doc["jobs"][0]["error"] = 22
    with pytest.raises(fio.FioError, match="error 22"):
        fio.read_run(doc)
    doc["jobs"][0]["error"] = 0
    doc["jobs"][0]["read"]["io_bytes"] = 0
    with pytest.raises(fio.FioError, match="read nothing"):
        fio.read_run(doc)


def test_fio_arguments():
    job = fio.FioJob("rand4k", "/data/a:b/f.bin", 64 * MiB, "psync", iodepth=32, numjobs=4,
                     runtime_s=2.5)
    args = job.args("fio", "/run/out.json")
    assert "--readonly" in args and "--group_reporting" in args
    assert "--thread" in args  # one process: stopping fio stops every job
    assert "--iodepth=1" in args  # psync caps the queue depth at 1
    assert "--runtime=2500ms" in args and "--time_based" in args
    assert "--filename=/data/a\\:b/f.bin" in args
    assert {"--rw=randread", "--bs=4096", "--direct=1", "--output=/run/out.json"} <= set(args)
    seq = fio.FioJob("seq1m", "/f", MiB, "io_uring", iodepth=32, numjobs=1, runtime_s=1)
    assert "--group_reporting" not in seq.args("fio", "o") and "--iodepth=32" in seq.args(
        "fio", "o")


FAKE_FIO = """#!/bin/sh
for a in "$@"; do
  case "$a" in
    --ioengine=io_uring) echo "fio: io_uring_queue_init failed: Operation not permitted" >&2
                         exit 1 ;;
    --ioengine=*) [ -n "$FAIL_ALL" ] && exit 1 ;;
    --output=*) out="${a#--output=}" ;;
  esac
done
cp "$REPORT" "$out"
"""


def test_engine_choice_falls_back_when_io_uring_is_refused(tmp_path, monkeypatch):
    script = tmp_path / "fio"
    script.write_text(FAKE_FIO)
    script.chmod(0o755)
    monkeypatch.setenv("REPORT", str(FIXTURES / "rand4k-io_uring-tmp.json"))
    engine, direct, why_not = fio.choose_engine(str(script), "/scratch.bin", 16 * MiB)
    assert (engine, direct) == ("libaio", True)
    assert len(why_not) == 1 and "io_uring (direct=1)" in why_not[0]
    assert "Operation not permitted" in why_not[0]
    monkeypatch.setenv("FAIL_ALL", "1")
    with pytest.raises(fio.FioError, match="no fio engine could read"):
        fio.choose_engine(str(script), "/scratch.bin", 16 * MiB)


# --- real runs ---------------------------------------------------------------------------------

@needs_fio
def test_small_fio_run_end_to_end(tmp_path, run_dir):
    cfg = resolved("storage", size=16 * MiB, runtime=2.0, jobs=("seq1m", "rand4k"), iodepth=4,
                        numjobs=2)
    out = probe.run(_ctx(tmp_path, storage_path=str(tmp_path)), cfg)
    by = {(m.metric, m.key["job"]): m for m in out.measurements}
    assert set(by) == {(metric, job) for job in ("seq1m", "rand4k") for metric in
                       ("read_bandwidth", "read_iops", "read_latency_p50", "read_latency_p99")}
    bw = by["read_bandwidth", "rand4k"]
    assert bw.key["engine"] in fio.ENGINES and bw.key["numjobs"] == 2
    assert bw.key["iodepth"] == (4 if bw.key["engine"] in fio.QUEUED_ENGINES else 1)
    assert by["read_bandwidth", "seq1m"].key["numjobs"] == 1
    assert len(bw.samples) == 2 and bw.statistic == "total_over_time"
    # 4 KiB per I/O: bandwidth and IOPS come from the same runs.
    assert bw.value == pytest.approx(by["read_iops", "rand4k"].value * 4096, rel=1e-6)
    assert by["read_latency_p99", "rand4k"].higher_is_better is False
    assert out.params["fio_version"] and out.params["size"] == 16 * MiB
    assert out.artifacts == [f"storage/fio-{j}-{i}.json" for j in ("seq1m", "rand4k")
                             for i in (1, 2)]
    for rel in out.artifacts:
        assert fio.read_run(fio.parse_output((run_dir / rel).read_text())).io_bytes > 0
    assert bw.context["raw_files"] == out.artifacts[2:]
    assert not _scratch_files(tmp_path)


def _dataset(folder: Path, files: int = 12, size: int = 64 * 1024) -> dict[str, str]:
    digests = {}
    for i in range(files):
        path = folder / f"class{i % 3}" / f"img{i:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size + i))
        digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def test_fallback_reader_through_the_probe_with_a_dataset(tmp_path, run_dir, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)  # as if fio were not installed
    data = tmp_path / "data"
    digests = _dataset(data)
    cfg = resolved("storage", size=16 * MiB, runtime=1.0, jobs=("rand4k",))
    out = probe.run(_ctx(tmp_path, data_dir=str(data)), cfg)
    bw = next(m for m in out.measurements if m.metric == "read_bandwidth")
    assert bw.key == {"job": "rand4k", "bs": 4096, "engine": fallback.ENGINE, "iodepth": 1,
                      "numjobs": 1}
    assert bw.context["engine"] == fallback.ENGINE and fallback.NOTE in out.notes
    assert bw.context["cache_mode"] in (fallback.DIRECT, fallback.BUFFERED)
    assert out.params["path"] == str(tmp_path / "run")  # never into the user's dataset
    assert out.artifacts == []
    rate = next(m for m in out.measurements if m.metric == "dataset_read_rate")
    assert rate.unit == "files/s" and rate.context["files_read"] == 12
    assert out.params["dataset_cache_bypass"] == dataset_read.CACHE_BYPASS
    assert not _scratch_files(data)
    assert {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in data.rglob("*") if p.is_file()} == digests


@pytest.mark.parametrize("direct", [True, False])
def test_fallback_reader_reads_aligned_blocks(tmp_path, direct):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(4 * MiB))
    for job, bs in (("seq1m", MiB), ("rand128k", 128 * 1024)):
        run, mode = fallback.read_job(str(path), 4 * MiB, job, 0.2, direct=direct)
        assert run.io_bytes == run.ios * bs and run.ios > 0
        assert 0.2 <= run.seconds < 1.0
        assert 0 < run.lat_p50_s <= run.lat_p99_s
        if not direct:
            assert mode == fallback.BUFFERED


def test_dataset_sampling_and_cold_read(tmp_path):
    data = tmp_path / "data"
    _dataset(data, files=20, size=10_000)
    files = dataset_read.list_files(str(data))
    assert len(files) == 20 and files == sorted(files)
    picked = dataset_read.sample_evenly(files, limit_bytes=5 * 10_020)
    assert len(picked) == 5 and sum(s for _, s in picked) <= 5 * 10_020
    assert {Path(p).parent.name for p, _ in picked} == {"class0", "class1", "class2"}
    assert dataset_read.sample_evenly(files, 10**9) == files
    read, _ = dataset_read.cold_read(picked, chunks=3, deadline=time.perf_counter() + 60)
    assert read.files == 5 and read.io_bytes == sum(s for _, s in picked)
    assert [c[0] for c in read.chunks] == [2, 2, 1]
    rate, bw = dataset_read.measurements(read, {"path": str(data)})
    assert rate.value == pytest.approx(5 / read.seconds) and len(rate.samples) == 3
    assert bw.unit == "B/s" and bw.statistic == "total_over_time"


def test_dataset_read_stops_at_the_deadline(tmp_path, clock):
    data = tmp_path / "data"
    _dataset(data, files=6, size=1000)
    files = dataset_read.list_files(str(data))

    def ticking() -> float:
        clock.advance(1.0)
        return clock()

    read, _ = dataset_read.cold_read(files, chunks=6, deadline=clock() + 2.5, clock=ticking)
    assert read.stopped_by == "deadline" and 0 < read.files < 6


def test_mincore_sees_what_the_drop_left_in_the_page_cache(tmp_path):
    data = tmp_path / "data"
    _dataset(data, files=8, size=64 * 1024)
    files = dataset_read.list_files(str(data))
    for path, _ in files:
        Path(path).read_bytes()
    assert dataset_read.cached_share(files) > 0.9  # just written and read: cached
    # Just written, the pages are dirty, and DONTNEED alone drops only clean ones: the drop
    # writes them back first (the first run on a fresh machine reads a dataset it just made).
    dataset_read.drop_cached(files)
    assert dataset_read.cached_share(files) < dataset_read.CACHED_SHARE


def test_a_filesystem_that_refuses_fdatasync_still_gets_the_drop(tmp_path, monkeypatch):
    """A dataset on a FUSE mount (gcsfuse, s3fs) may answer fdatasync with ENOSYS: the drop
    goes ahead instead of failing the read."""
    import errno

    data = tmp_path / "data"
    _dataset(data, files=4, size=64 * 1024)
    files = dataset_read.list_files(str(data))
    os.sync()
    dropped = []

    def refuse(fd):
        raise OSError(errno.ENOSYS, "Function not implemented")

    real = os.posix_fadvise
    monkeypatch.setattr(os, "fdatasync", refuse)
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, *a: (dropped.append(fd), real(fd, *a)))
    dataset_read.drop_cached(files)
    assert len(dropped) == len(files)


@pytest.mark.parametrize("why", ["no-op drop", "gVisor"])
def test_a_drop_that_does_nothing_labels_the_read_as_the_page_cache(tmp_path, monkeypatch, why):
    """Under gVisor posix_fadvise(DONTNEED) is accepted and ignored: the "cold" read then
    measures the page cache, and must say so rather than pass for storage."""
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext, ProbeOutput, RunInputs

    data = tmp_path / "data"
    _dataset(data, files=8, size=64 * 1024)
    for path, _ in dataset_read.list_files(str(data)):
        Path(path).read_bytes()
    os.sync()  # written back: a working drop would drop them
    if why == "gVisor":
        monkeypatch.setattr(dataset_read, "detect", lambda: {"sandbox": "gVisor"})
    else:
        monkeypatch.setattr(dataset_read, "drop_cached", lambda files: None)
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), budget=Budget(30.0), facts={},
                       inputs=RunInputs(data_dir=str(data)))
    out = ProbeOutput([])
    rate, _ = dataset_read.measure(ctx, 10**9, "", out)
    assert rate.key["access"] == "page_cache"
    (note,) = [n for n in out.notes if "measures the page cache" in n]
    assert ("gVisor" in note) if why == "gVisor" else ("still cached after" in note)


# --- cleanup -----------------------------------------------------------------------------------

@pytest.mark.parametrize("reader", ["fio", "fallback"])
def test_scratch_file_is_removed_when_a_run_fails(tmp_path, run_dir, monkeypatch, reader):
    if reader == "fio" and not HAVE_FIO:
        pytest.skip("fio is not installed")
    seen = []

    def failing(*args, **kwargs):
        job = args[1] if reader == "fio" else args[2]
        if reader == "fio" and job.runtime_s is None:
            return real(*args, **kwargs)  # let the engine trial through
        seen.extend(_scratch_files(tmp_path))
        raise fio.FioError("injected failure")

    if reader == "fio":
        real = fio.run_job
        monkeypatch.setattr(fio, "run_job", failing)
    else:
        monkeypatch.setattr(fio, "find_fio", lambda: None)
        monkeypatch.setattr(fallback, "read_job", failing)
    with pytest.raises(fio.FioError, match="injected"):
        probe.run(_ctx(tmp_path, storage_path=str(tmp_path)), resolved("storage", size=16 * MiB))
    assert len(seen) == 1  # the scratch file existed when the run failed
    assert not _scratch_files(tmp_path)


SIGTERM_SCRIPT = textwrap.dedent("""
    import sys
    from benchbench.probes.api import ProbeContext, RunInputs
    from benchbench.storage_probes.storage.config import StorageConfig
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.storage_probes.storage import run as probe
    ctx = ProbeContext(device="cpu",
                        policy=RepeatPolicy(1, 1, warmup_s=0.0),
                       budget=Budget(120.0), facts={},
                       progress=lambda desc, done, total: print(desc, flush=True),
                       inputs=RunInputs(storage_path=sys.argv[1]))
    probe.run(ctx, StorageConfig(size=16 * 1024**2, runtime=60.0, max_runtime=10.0,
                                 jobs=("rand4k",), numjobs=2))
""")


def test_scratch_file_is_removed_on_sigterm(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parents[2])
    try:
        assert "rand4k run 1/1" in proc.stdout.readline() + proc.stdout.readline()
        time.sleep(0.5)
        assert len(_scratch_files(tmp_path)) == 1  # the 60 s read is under way
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert "Terminated: the storage probe was stopped by SIGTERM" in err
    assert not _scratch_files(tmp_path)
    assert not _processes_naming(str(tmp_path))  # no fio job left reading the deleted file


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


# --- refusals and checks -----------------------------------------------------------------------

def _block_device() -> str | None:
    for entry in sorted(os.scandir("/dev"), key=lambda e: e.name):
        try:
            if stat.S_ISBLK(os.stat(entry.path).st_mode):
                return entry.path
        except OSError:
            continue
    return None


def test_refuses_a_block_device_not_named_in_raw_device(tmp_path):
    device = _block_device()
    if device is None:
        pytest.skip("no block device under /dev")
    with pytest.raises(ProbeSkipped, match="block device.*raw_device"):
        probe.run(_ctx(tmp_path, storage_path=device), resolved("storage"))
    other = resolved("storage", raw_device=str(tmp_path))
    with pytest.raises(ProbeSkipped, match="block device.*raw_device"):
        probe.run(_ctx(tmp_path, storage_path=device), other)


def test_refuses_what_is_not_a_directory(tmp_path):
    with pytest.raises(ProbeSkipped, match="not a directory"):
        probe.run(_ctx(tmp_path, storage_path="/dev/null"), resolved("storage"))
    with pytest.raises(ProbeSkipped, match="not a block device"):
        probe.run(_ctx(tmp_path), resolved("storage", raw_device="/dev/null"))
    (tmp_path / "file").write_bytes(b"user data")
    with pytest.raises(ProbeSkipped, match="not a directory"):
        probe.run(_ctx(tmp_path, storage_path=str(tmp_path / "file")), resolved("storage"))
    assert (tmp_path / "file").read_bytes() == b"user data"


def test_validate_storage_path(tmp_path, monkeypatch):
    probe.validate_storage_path(str(tmp_path), MiB)
    with pytest.raises(ConfigError, match="no such directory"):
        probe.validate_storage_path(str(tmp_path / "missing"), MiB)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        probe.validate_storage_path(str(tmp_path / "file"), MiB)
    with pytest.raises(ConfigError, match="free, the scratch file needs"):
        probe.validate_storage_path(str(tmp_path), 2**62)

    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(ConfigError, match="Read-only file system"):
        probe.validate_storage_path(str(tmp_path), MiB)


def test_scratch_size_defaults_and_shrinks_to_the_free_space(tmp_path, monkeypatch):
    assert resolved("storage", quick=False).size == 4 * 1024**3
    assert resolved("storage", quick=True).size == 256 * MiB
    usage = shutil.disk_usage(tmp_path)
    notes: list[str] = []
    assert probe._fit(str(tmp_path), 64 * MiB + 5, notes) == 64 * MiB and not notes
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=200 * MiB))
    assert probe._fit(str(tmp_path), 4 * 1024**3, notes) == 136 * MiB
    assert "reduced from 4.0 GiB to 136 MiB" in notes[0]
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=70 * MiB))
    with pytest.raises(ProbeSkipped, match="too little"):
        probe._fit(str(tmp_path), 256 * MiB, [])


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_tmpfs_is_flagged_and_the_budget_cuts_later_jobs(tmp_path, monkeypatch):
    monkeypatch.setattr(fio, "find_fio", lambda: None)
    shm = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        out = probe.run(_ctx(tmp_path, budget_s=0.0, storage_path=str(shm)),
                        resolved("storage", size=16 * MiB, runtime=1.0, jobs=("seq1m", "rand4k")))
        if out.params["filesystem"] != "tmpfs":
            pytest.skip("/dev/shm is not tmpfs here")
        assert any("tmpfs" in n and "RAM" in n for n in out.notes)
        assert {m.key["job"] for m in out.measurements} == {"seq1m"}
        assert "rand4k skipped, because the time budget ran out" in out.notes
        assert not _scratch_files(shm)
    finally:
        shutil.rmtree(shm)


def test_generated_dataset_scratch_goes_to_the_cache_folder(tmp_path, run_dir, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    cache = tmp_path / "cache" / "datasets"
    data = cache / "abc123"
    _dataset(data)
    cfg = resolved("storage", size=16 * MiB, runtime=1.0, jobs=("rand4k",), dataset_read_limit=MiB)
    out = probe.run(_ctx(tmp_path, data_dir=str(data),
                         dataset={"source": "generated", "path": str(data)}), cfg)
    assert out.params["path"] == str(cache)  # benchbench's own folder, beside the dataset
    assert not _scratch_files(cache)
