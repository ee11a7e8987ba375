"""A rich progress bar on stderr: the current probe, its current step, and a line per probe."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchbench.core import interruption
from benchbench.core.results import ProbeResult

_STYLE = {"ok": "green", "skipped": "yellow", "failed": "red", interruption.CUT: "yellow"}


class RichDisplay:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]{task.fields[probe]}[/]"), TextColumn("{task.description}"),
            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, transient=True,
        )
        self.task: Any = None
        self.name = ""

    def __enter__(self) -> RichDisplay:
        # the bar only on a terminal: in a log it would end with an empty line
        if self.console.is_terminal:
            self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.console.is_terminal:
            self.progress.stop()

    def start_probe(self, name: str, index: int, count: int) -> None:
        self.name = f"[{index + 1}/{count}] {name}"
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task("starting", total=None, probe=self.name)

    def update(self, desc: str, done: int, total: int) -> None:
        self.progress.update(self.task, description=desc, completed=done, total=total)

    def end_probe(self, result: ProbeResult, status: str | None = None) -> None:
        status = status or result.status
        style = _STYLE[status]
        why = f" — {result.reason}" if result.reason and status != "ok" else ""
        self.console.print(f"{self.name}: [{style}]{status}[/] "
                           f"({result.duration_s or 0:.1f} s){why}", highlight=False)


@contextmanager
def task_progress(title: str) -> Iterator[Callable[[int, int], None]]:
    """A one-task progress bar on stderr; yields progress(done, total). Where stderr is no
    terminal (CI, a pipe, a log file) nothing is started: rich would draw nothing there."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(TextColumn(f"[bold]{title}[/]"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
