"""A person reads names, not ids: report.md's prose, report.html's text and the terminal call a
probe, a resource, a precision or a loader by its human name (core/names.py); an id stays only
in `code` spans, in a table cell that holds a key's value, in results.json and in the CSV.
Counts read in the number they are ('1 capacity', '2 capacities'), never '(s)'."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from committed_runs import committed
from helpers import render_md
from sim_runs import simulated_run

from benchbench.analysis import verdict as verdict_mod
from benchbench.commands import summary
from benchbench.commands.report import report_markdown
from benchbench.core import names, results
from benchbench.engine import simulate
from benchbench.reports import doctor, html

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"

# A snake_case word: an id of ours (cpu_dataloading, memory_fit, amp_bf16, step_time) or a
# key's name (batch_size). Not a path (/sys/.../intel_rapl), a config field
# (memory_fit.steps), a flag's value (workers=2) nor part of a hyphenated word.
SNAKE = re.compile(r"(?<![\w./=-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/=(-])(?!\.\w)")
# Other projects' names, which are spelled with an underscore and read as such: an
# architecture, a Linux driver and an I/O engine, vLLM's serving script, a model dimension.
NOT_OURS = {"x86_64", "intel_rapl", "io_uring", "benchmark_serving", "d_model"}


def bare_ids(text: str) -> set[str]:
    return set(SNAKE.findall(text)) - NOT_OURS


def markdown_prose(md: str) -> list[str]:
    """report.md as a person reads it: every line, code spans and link targets left out; of a
    table, the cells of several words (a one-word cell is a key's value: its precision, its
    loader, as results.json holds it)."""
    out = []
    for line in md.splitlines():
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        if line.startswith("|"):
            out += [c for c in re.split(r"(?<!\\)\|", line) if len(c.split()) > 1]
        else:
            out.append(line)
    return out


class _Text(HTMLParser):
    """report.html's visible text, as above: no <code>, <style>, attributes; of a table, the
    cells of several words."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.skip = 0
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("code", "style", "script"):
            self.skip += 1
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("code", "style", "script"):
            self.skip -= 1
        elif tag in ("td", "th") and self.cell is not None:
            text = "".join(self.cell)
            if len(text.split()) > 1:
                self.chunks.append(text)
            self.cell = None

    def handle_data(self, data):
        if self.skip:
            return
        (self.cell if self.cell is not None else self.chunks).append(data)


def html_text(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    return parser.chunks


def runs(tmp_path):
    """A real H200 run, simulated GPU runs and the committed CPU runs: between them every
    probe, measured, skipped and failed, with the reasons older runs recorded."""
    yield "h200", committed("2026-12-04-h200", tmp_path)
    for name in ("H100", "H100X8"):
        yield f"simulated {name}", simulated_run(getattr(simulate, name))
    for name in ("results_quick_cpu.json", "results_quick_cpu_plots.json",
                 "results_v1_cpu.json"):
        yield name, results.load(FIXTURES / name)


def test_report_prose_html_and_terminal_name_what_they_say(tmp_path):
    found: dict[str, set[str]] = {}
    for name, run in runs(tmp_path):
        v = verdict_mod.verdict(run)
        screened, checks, md = report_markdown(run, v)
        page = html.render(screened, v, doctor.section(checks), {}, md)
        terminal = summary.summary(v, [])
        for where, lines in (("report.md", markdown_prose(md)), ("report.html", html_text(page)),
                             ("terminal", terminal.splitlines())):
            for line in lines:
                if ids := bare_ids(line):
                    found.setdefault(f"{name} {where}", set()).update(ids)
    assert not found, found


def test_the_check_finds_a_bare_id_and_leaves_code_and_key_values():
    """The scan above can fail: a sentence that calls a resource by its id is caught."""
    assert bare_ids(" ".join(markdown_prose("Limited by cpu_dataloading here."))) == {
        "cpu_dataloading"}
    assert bare_ids(" ".join(markdown_prose(
        "| `memory_fit` | amp_bf16 | set memory_fit.steps=3 |\n"
        "Not measured: the `memory_fit` probe (/sys/intel_rapl, workers=2)."))) == set()
    assert bare_ids(" ".join(html_text(
        "<p>the <code>host_device_copy</code> probe</p><table><tr><td>amp_bf16</td>"
        "<td>slow in amp_fp16 here</td></tr></table>"))) == {"amp_fp16"}


@pytest.mark.parametrize("text, said", [
    ("amp_fp16 skipped, because 0 s of the time budget were left",
     "fp16 mixed precision skipped, because 0 s of the time budget were left"),
    ("CPU steal up to 0.1% (during memory_bandwidth)", "CPU steal up to 0.1% (during memory copy)"),
    ("not checked, because the memory_fit probe did not run",
     "not checked, because the `memory_fit` probe did not run"),
    ("the next limit, cpu_dataloading.", "the next limit, CPU data loading."),
    # ids a person types stay: a config field, a flag's value, a code span, a path
    ("set memory_fit.steps=3, or --only memory_fit", None),
    ("run `--skip host_device_copy` in /x/cpu_compute", None),
])
def test_in_words(text, said):
    assert names.in_words(text) == (text if said is None else said)


def test_counts_read_in_their_number():
    assert [names.counted(n, "capacity") for n in (0, 1, 2)] == [
        "0 capacities", "1 capacity", "2 capacities"]
    assert names.counted(1, "run") == "1 run" and names.counted(1_024, "file") == "1,024 files"
    assert names.counted(3, "other process", "other processes") == "3 other processes"
    assert names.counted(2, "day") == "2 days"


def test_no_count_in_a_report_is_followed_by_s_in_parentheses(tmp_path):
    for _, run in runs(tmp_path):
        md = render_md(run)
        assert not re.findall(r"\d[\d,]* \w+\((?:s|es|ies)\)", md)
        assert "simulated server (LoadGen" not in md  # said inside parentheses of its own
