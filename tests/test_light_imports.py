"""The core imports without torch, DALI or NVML: renderers and compare must read old runs."""

import subprocess
import sys

CODE = """
import sys
sys.modules["torch"] = None
sys.modules["torchvision"] = None
sys.modules["pynvml"] = None
sys.modules["nvidia.dali"] = None
import benchbench.core.results, benchbench.core.stats, benchbench.reports.markdown
import benchbench.analysis.derive, benchbench.core.config, benchbench.probes.catalog
import benchbench.probes.catalog, benchbench.cli, benchbench.engine.runner, benchbench.core.peaks
import benchbench.engine.launch, benchbench.engine.multinode, benchbench.analysis.scaling
import benchbench.engine.slurm, benchbench.machine.topology, benchbench.reports.interconnect
import benchbench.commands.common
from benchbench.core import results
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
