"""No traceback reaches a user when a folder cannot be written: a cache folder that cannot be
created (a read-only filesystem, here /proc), and a disk that fills while the reports are
written (a stand-in: report.html's writer raises ENOSPC, as a full disk does). One line, exit
2, and every file written before it kept."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def benchbench(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "benchbench", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})}, cwd=cwd)


def one_line(stderr):
    """The one error line, after the probes' progress lines (stderr is not a terminal)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


def test_a_cache_folder_that_cannot_be_written_is_one_line(tmp_path):
    out = tmp_path / "run"
    got = benchbench("run", "--quick", "--only", "matmul", "--out", str(out),
                     env={"BENCHBENCH_CACHE": "/proc/benchbench-cache"})
    assert got.returncode == 2
    assert one_line(got.stderr) == (
        "benchbench: error: the cache folder /proc/benchbench-cache cannot be written: No such "
        "file or directory; set BENCHBENCH_CACHE to a writable folder (it holds the synthetic "
        "dataset and the libraries' caches)")
    assert not out.exists()  # refused before anything was written


@pytest.mark.slow
def test_a_disk_that_fills_while_the_reports_are_written_is_one_line(tmp_path):
    pytest.importorskip("torch")
    hook = tmp_path / "hook"
    hook.mkdir()
    # The stand-in for a full disk: report.html's writer fails as a full disk fails it.
    (hook / "sitecustomize.py").write_text(
        "import errno, os\n"
        "from benchbench.reports import outputs\n"
        "def full(*a, **k):\n"
        f"    raise OSError({errno.ENOSPC}, os.strerror({errno.ENOSPC}), 'report.html')\n"
        "outputs.write_all = full\n")
    out = tmp_path / "run"
    got = benchbench("run", "--quick", "--only", "matmul", "--out", str(out),
                     env={"PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)])})
    assert got.returncode == 2
    line = one_line(got.stderr)
    assert line.startswith(f"benchbench: error: --out {out}: cannot write the reports "
                           "(report.html: No space left on device); every measurement is kept "
                           f"in {out / 'results.json'}: free some space and re-render them "
                           f"with benchbench report {out}")
    assert (out / "results.json").is_file() and (out / "report.md").is_file()
