"""The core imports without torch, DALI or NVML: renderers and compare must read old runs."""

import subprocess
import sys

CODE = """
import sys
sys.modules["torch"] = None
sys.modules["torchvision"] = None
sys.modules["pynvml"] = None
sys.modules["nvidia.dali"] = None
import benchbench.results, benchbench.stats, benchbench.reports.markdown, benchbench.analysis
import benchbench.config, benchbench.registry, benchbench.workloads, benchbench.cli
import benchbench.runner, benchbench.peaks, benchbench.launch, benchbench.multinode
import benchbench.scaling, benchbench.slurm, benchbench.topology, benchbench.reports.interconnect
import benchbench.commands
from benchbench import results
from benchbench.reports import markdown
run = results.load(sys.argv[1])
assert "matmul" in markdown.render(run)
print("ok")
"""


def test_core_imports_without_torch():
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "results_v1_cpu.json"
    out = subprocess.run([sys.executable, "-c", CODE, str(fixture)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
