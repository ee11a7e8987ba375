"""The progress bars on stderr: drawn on a terminal, and in a log (CI, a pipe) only the lines a
person reads there, without the bar's empty last line."""

import io
import re

from rich.console import Console

from benchbench.core.results import ProbeResult
from benchbench.engine import progress


def shown(terminal: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=80)
    with progress.RichDisplay(console) as display:
        display.start_probe("matmul", 0, 1)
        display.update("cpu fp32 n=256", 1, 4)
        display.end_probe(ProbeResult(name="matmul", status="ok", resource="cpu_compute",
                                      duration_s=1.25))
    return out.getvalue()


def test_a_log_holds_each_probe_s_line_and_nothing_else():
    assert shown(terminal=False) == "[1/1] matmul: ok (1.2 s)\n"


def test_a_terminal_sees_the_bar():
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown(terminal=True))  # its colours
    assert "cpu fp32 n=256" in text and "1/4" in text and "[1/1] matmul: ok (1.2 s)" in text


def test_a_task_bar_in_a_log_writes_nothing(capsys, log_stderr):
    with progress.task_progress("reading") as tell:
        tell(1, 2)
        tell(2, 2)
    assert capsys.readouterr().err == ""
