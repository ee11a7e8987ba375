"""`run` imports what the analysis and the reports need while the forkserver imports torch
(commands/run.py REPORT_MODULES): the list must be what they really import, in a fresh
interpreter, so that it goes stale neither way unnoticed."""

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "sample" / "results.json"

CODE = """
import shutil, sys, tempfile
from pathlib import Path
from benchbench.commands import run
from benchbench.commands.report import write_reports
from benchbench.analysis import derive, verdict
from benchbench.core import results

wanted = run.REPORT_MODULES
print("before", sorted(m for m in wanted if m in sys.modules))
mode = sys.argv[2]
if mode == "early":
    run._import_early().join()
else:
    r = results.load(Path(sys.argv[1]))
    r.extra["derived"] = derive.derive(r)
    v = verdict.verdict(r)
    out = Path(tempfile.mkdtemp())
    try:
        write_reports(r, out, v)
    finally:
        shutil.rmtree(out)
print("after", sorted(m for m in wanted if m in sys.modules))
"""


def _imported(mode: str) -> tuple[list[str], list[str]]:
    out = subprocess.run([sys.executable, "-c", CODE, str(SAMPLE), mode], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    return eval(lines["before"]), eval(lines["after"])  # noqa: S307 - our own printed lists


def test_the_modules_imported_early_are_ones_the_reports_import():
    from benchbench.commands.run import REPORT_MODULES

    before, after = _imported("reports")
    assert before == []  # the command itself leaves them to the reports...
    assert after == sorted(REPORT_MODULES)  # ...which import every one of them


def test_the_early_import_thread_imports_them_all():
    from benchbench.commands.run import REPORT_MODULES

    assert _imported("early") == ([], sorted(REPORT_MODULES))
