import importlib.util
import sys
from pathlib import Path

import pytest

# tests/support holds the fakes, helpers and fixtures that the test modules import by name
# (`from helpers import …`), and that probe workers import in child processes.
sys.path.insert(0, str(Path(__file__).parent / "support"))

# The property and safety tests need hypothesis (the [test] extra). A GPU box lent with torch
# and pytest but not hypothesis still runs the rest, and the header says what was left out.
_NEEDS_HYPOTHESIS = ["invariants/test_properties.py", "invariants/test_safety.py"]
collect_ignore = [] if importlib.util.find_spec("hypothesis") else _NEEDS_HYPOTHESIS


def pytest_report_header(config):
    if collect_ignore:
        return f"hypothesis is not installed: {', '.join(collect_ignore)} not collected"
    return None


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is available here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def synthetic_noise(request, monkeypatch):
    """Tests build runs whose noise they choose: the floors unchanged pairs of this VM set
    (analysis/run_noise.json) do not describe them, so compare judges them by their rounds
    alone, in this process and in the CLI's subprocesses. A test of the shipped table is
    marked `shipped_noise`."""
    if "shipped_noise" not in request.keywords:
        monkeypatch.setenv("BENCHBENCH_NOISE_TABLE",
                           str(Path(__file__).parent / "support" / "fixtures" /
                               "no_run_noise.json"))


class FakeClock:
    """An injected clock: time moves only when the test says so."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def log_stderr(monkeypatch):
    """stderr as a log, not a terminal, whatever the environment tells rich (FORCE_COLOR and
    the like make it draw as on one)."""
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
