"""`doctor`, `env` and `list` draw aligned tables on a terminal (rich) and keep their text,
Markdown for doctor and env, when piped or redirected, which scripts and files read."""

import argparse
import io
from pathlib import Path

import pytest
from helpers import cpu_facts

from benchbench.commands import doctor, env_list, terminal
from benchbench.core import results
from benchbench.machine import environment

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
WIDTH = 100


@pytest.fixture
def screen(monkeypatch):
    """A terminal WIDTH columns wide, in place of stdout: what the verb drew on it."""
    from rich.console import Console

    buf = io.StringIO()
    monkeypatch.setattr(terminal, "console", lambda: Console(
        file=buf, force_terminal=True, width=WIDTH, color_system=None, highlight=False))
    return buf


@pytest.fixture
def machine(monkeypatch):
    """This machine as the fixture run recorded it, without asking torch or NVML."""
    snap = results.load(FIXTURE).environment
    monkeypatch.setattr(environment, "torch_facts", lambda: cpu_facts(
        no_gpu_reason="torch finds no CUDA device"))
    monkeypatch.setattr(environment, "snapshot", lambda path, facts: snap)
    return snap


def drawn(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines and all(len(line) <= WIDTH for line in lines), text
    assert not any(line.startswith("|") or "|---|" in line for line in lines), text
    return lines


def doctor_args(**kw):
    return argparse.Namespace(results=str(FIXTURE), json=False, scenario="cv", **kw)


def test_doctor_draws_a_table_on_a_terminal(screen):
    assert doctor.main(doctor_args()) in (0, 1)
    lines = drawn(screen.getvalue())
    header = next(line for line in lines if "check" in line and "status" in line)
    assert "threshold" in header and "fix" in header
    assert any("─" in line for line in lines) and "nothing was changed" in screen.getvalue()


def test_doctor_piped_stays_markdown(capsys):
    assert doctor.main(doctor_args()) in (0, 1)
    out = capsys.readouterr().out
    assert out.startswith(f"# Configuration doctor: the run in {FIXTURE}\n\n")
    assert "| check | status | measured | threshold | source | fix |\n|---|" in out
    assert out.rstrip().endswith("Read-only: nothing was changed.")


def test_env_draws_a_table_on_a_terminal(screen, machine):
    assert env_list.env(argparse.Namespace(json=False)) == 0
    assert any(line.strip().startswith("Host ") and machine["host"]["hostname"] in line
               for line in drawn(screen.getvalue()))


def test_env_piped_stays_markdown(machine, capsys):
    assert env_list.env(argparse.Namespace(json=False)) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Environment\n") and "\n|---|---|\n| Host | " in out


def test_list_draws_a_table_on_a_terminal(screen, machine):
    assert env_list.list_probes(argparse.Namespace(fields=True)) == 0
    lines = drawn(screen.getvalue())
    assert lines[0].startswith("device here: cpu, because torch finds no CUDA device")
    header = next(line for line in lines if "probe" in line and "measures" in line)
    assert "here" in header and "what it measures" in header
    # the resource in words; the probe's id stays, it is what --only and --set take
    assert any("host_device_copy" in line and "host-to-GPU link" in line for line in lines)
    assert any("matmul.sizes" in line for line in lines)


def test_list_piped_keeps_one_aligned_line_a_probe(machine, capsys):
    assert env_list.list_probes(argparse.Namespace(fields=True)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "device here: cpu, because torch finds no CUDA device"
    assert out[1].split() == ["matmul", "cpu_compute", "would", "run"]
    assert any(line.startswith("host_device_copy   host_device_link  skipped, because ")
               for line in out)
    assert any(line.startswith(" " * 20 + "matmul.sizes = ") for line in out)
