"""scripts/gpu-validate.sh, dry: the same steps on the CPU with tiny sizes, so that the script a
lent GPU box runs once cannot rot between loans; its plan, which must fit the lent 7 minutes;
and its headline table, which must say when a step was killed."""

import importlib.util
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "tests" / "support" / "fixtures" / "results_v1_cpu.json"


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_gpu_validate_dry_run(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-validate.sh"), "--dry-run"],
                          capture_output=True, text=True, timeout=400,
                          env={**os.environ, "OUT": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    log = (tmp_path / "gpu-validate.log").read_text()
    before = next(ln for ln in log.splitlines() if ln.startswith("torch before install:"))
    after = next(ln for ln in log.splitlines() if ln.startswith("torch after install:"))
    assert before.split(":")[1].strip() == after.split(":")[1].strip()
    for name in ("versions", "df -h /dev/shm", "GPU tests", "benchbench run --device cpu",
                 "benchbench doctor", "bare loops"):
        assert f"--- {name}: exit 0" in log, name
    # What comes back from a lent box: at most 8 plain files, none in a folder.
    got = sorted(p.name for p in tmp_path.iterdir())
    assert got == ["gpu-validate.log", "headline.md", "plan.txt", "run.tar.gz", "steps.tsv"]
    assert all((tmp_path / n).is_file() for n in got)
    with tarfile.open(tmp_path / "run.tar.gz") as tar:
        names = tar.getnames()
    assert "run/results.json" in names and "run/report.md" in names
    headline = (tmp_path / "headline.md").read_text()
    assert "| ResNet50 fp32 |" in headline and "img/s" in headline
    assert "| matmul bf16 peak | not measured |" in headline
    assert "| resnet50 | ok |" in headline
    assert re.search(r"\| benchbench run --device cpu \| ok \| \d+ \| \d+ \|", headline)
    assert "steps in all:" in headline


def test_the_plan_fits_the_lent_seven_minutes_and_states_each_estimate():
    pytest.importorskip("torch")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-validate.sh"), "--plan"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    total = re.fullmatch(r"total (\d+) s", lines[-1])
    assert total and int(total.group(1)) <= 420
    rows = [re.match(r"(.+?)\s+limit\s+(\d+) s\s+estimate\s+([\d.]+) s\s+\((.+)\)$", ln)
            for ln in lines[:-1]]
    assert all(rows) and sum(int(r.group(2)) for r in rows) == int(total.group(1))
    by = {r.group(1): r for r in rows}
    run = by["benchbench run"]
    assert run.group(4).startswith("simulated: ")
    # The run's limit is derived from the simulator's estimate of that very run.
    plan = _script("gpu_plan")
    est, _ = plan.simulated_run()
    assert float(run.group(3)) == pytest.approx(est, abs=0.05)
    assert int(run.group(2)) == plan.Step("x", "x", est, "").limit_s


def test_the_headline_says_timed_out_for_a_killed_step(tmp_path):
    headline = _script("gpu_headline")
    steps = tmp_path / "steps.tsv"
    steps.write_text("step\texit\tseconds\tlimit\n"
                     "versions\t0\t4\t15\n"
                     "benchbench run --device cuda\t124\t192\t192\n"
                     "bare loops\t1\t30\t55\n")
    from benchbench.core import results

    lines = headline.table(results.load(FIXTURE), headline.read_steps(str(steps)))
    text = "\n".join(lines)
    assert "| benchbench run --device cuda | timed out at its 192 s limit | 192 | 192 |" in text
    assert "| bare loops | exit 1 | 30 | 55 |" in text and "| versions | ok | 4 | 15 |" in text
    assert "benchbench run: timed out after 192 s (its limit 192 s)" in text
    assert "yes" not in text.split("benchbench run: ")[1].splitlines()[0]
    assert "steps in all: 226 s" in text
