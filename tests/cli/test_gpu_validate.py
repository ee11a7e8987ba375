"""scripts/gpu-validate.sh, dry: the same steps on the CPU with tiny sizes, so that the script a
lent GPU box runs once cannot rot between loans."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


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
    headline = (tmp_path / "headline.md").read_text()
    assert "| ResNet50 fp32 |" in headline and "img/s" in headline
    assert "| matmul bf16 peak | not measured |" in headline
    assert "| resnet50 | ok |" in headline and "whole run:" in headline
