"""scripts/unchanged_pairs.py's evaluation, on hand-built pairs: leave-one-out false calls, the
planted pairs caught, the table it writes (which analysis/run_noise.py reads back), and the
exit status that fails a gate that cries wolf. Its collection runs `run` ~70 times (an hour
here): the evaluation is what a test can afford to check."""

import argparse
import importlib
import json
import sys
from pathlib import Path

import pytest

from benchbench.analysis import run_noise
from benchbench.core import results
from tests.unit.test_compare import make_run

SCRIPTS = str(Path(__file__).parents[2] / "scripts")


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, SCRIPTS)
    try:
        yield importlib.import_module("unchanged_pairs")
    finally:
        sys.path.remove(SCRIPTS)
        sys.modules.pop("unchanged_pairs", None)


def _save(d: Path, run) -> None:
    d.mkdir(parents=True)
    results.save(run, d / "results.json")


def _pairs(root: Path, unchanged, planted, slow=0.8):
    """Unchanged pairs whose second run differs by each factor in `unchanged`, and `planted`
    pairs whose second run is `slow` times the first."""
    root.mkdir(parents=True)
    (root / "plan.json").write_text(json.dumps({"mode": "quick", "slowdown": 0.15}))
    for i, f in enumerate(unchanged):
        _save(root / f"pair-{i:02d}" / "a", make_run("a", started=f"2026-12-01T00:{i:02d}:00Z"))
        _save(root / f"pair-{i:02d}" / "b", make_run("b", factor=f,
                                                      started=f"2026-12-01T00:{i:02d}:30Z"))
    for i in range(planted):
        _save(root / f"planted-{i:02d}" / "base",
              make_run("a", started=f"2026-12-01T01:{i:02d}:00Z"))
        _save(root / f"planted-{i:02d}" / "slow", make_run("b", factor=slow,
                                                           started=f"2026-12-01T01:{i:02d}:30Z"))


def test_a_quiet_machine_calls_no_unchanged_pair_and_every_planted_one(script, tmp_path,
                                                                        capsys, monkeypatch):
    _pairs(tmp_path / "quick", [1.01, 0.99, 1.02, 0.985, 1.0, 1.015], 3)
    table = tmp_path / "run_noise.json"
    monkeypatch.setattr(script, "TABLE", table)
    code = script.evaluate(argparse.Namespace(dir=str(tmp_path), write=True))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "unchanged pairs called a regression, leave-one-out: 0 of 6" in out
    assert "planted slowdown called a regression: 3 of 3" in out
    written = run_noise.parse(json.loads(table.read_text()))
    res = written["cpu"]["quick"]["resnet50/throughput/batch_size=16,image_size=224,precision=fp32"]
    assert res.pairs == 6 and res.largest == pytest.approx(0.02, rel=0.01)


def test_a_gate_that_cries_wolf_fails_the_script(script, tmp_path, capsys, monkeypatch):
    # five quiet pairs calibrate a floor of a few percent; the sixth moved 20% with nothing
    # changed: left out of its own calibration, it is called, and the script says so
    _pairs(tmp_path / "quick", [1.01, 0.99, 1.005, 0.995, 1.0, 0.8], 1, slow=0.5)
    monkeypatch.setattr(script, "TABLE", tmp_path / "unused.json")
    code = script.evaluate(argparse.Namespace(dir=str(tmp_path), write=False))
    out = capsys.readouterr().out
    assert code == 1
    assert "leave-one-out: 1 of 6" in out and "pair-05:" in out
    assert not (tmp_path / "unused.json").exists()


def test_the_planted_pairs_sit_among_the_unchanged_ones(script):
    names = script.plan(30, 10)
    assert len(names) == 40 and names.count("pair-29") == 1 and names.count("planted-09") == 1
    at = [i for i, n in enumerate(names) if n.startswith("planted")]
    assert at[0] > 0 and at[-1] < 39 and max(b - a for a, b in zip(at, at[1:], strict=False)) <= 5
