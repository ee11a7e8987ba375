"""How a verb prints a table: on a terminal as rich draws it (aligned columns, text wrapped to
its width); into a pipe or a file as the text itself (Markdown, or the plain lines a verb
has), which scripts, logs and the tests read. The content is built once, by the verb."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text


def console() -> Console:
    return Console(highlight=False)


def show_markdown(text: str, out: Console | None = None) -> None:
    """Markdown (report sections, the doctor's table): rendered on a terminal, as it is else."""
    out = out or console()
    if out.is_terminal:
        out.print(Markdown(text))
    else:
        out.file.write(text.rstrip("\n") + "\n")


def table(header: list[str], rows: list[list[str]], title: str | None = None) -> Table:
    """A rich table of plain cells: no markup is read in them (a reason may hold brackets)."""
    drawn = Table(*header, title=title, title_justify="left", header_style="bold")
    for row in rows:
        drawn.add_row(*(Text(cell) for cell in row))
    return drawn
