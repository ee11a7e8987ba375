"""The layers' import rules, read from the source (ast), lazy imports inside functions
included: a rule that only holds at import time would let a heavy import back in through a
function body."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "benchbench"

# What each layer may import from benchbench, lowest first: a layer, or one module of it. The
# package's root (its __version__) is open to all. The probes that start ranks use the engine's
# process plumbing (launch: the ports; isolation: a child that dies with its parent), never
# the runner. workloads/ and storage_probes/ use what probes/ shares (the probe API, the
# loaders, the device helpers); probes/ never imports them, and the catalog that lists all
# three sits above them, in the engine.
PLUMBING = {"engine.launch", "engine.isolation"}
ALLOWED = {
    "core": {"core"},
    "machine": {"core", "machine"},
    "analysis": {"core", "machine", "analysis"},
    "doctor": {"core", "machine", "analysis", "doctor"},
    "compare": {"core", "analysis", "compare"},
    "reports": {"core", "analysis", "compare", "doctor", "reports"},
    "probes": {"core", "machine", "analysis", "probes", *PLUMBING},
    "storage_probes": {"core", "machine", "analysis", "probes", "storage_probes", *PLUMBING},
    "workloads": {"core", "machine", "analysis", "probes", "workloads", *PLUMBING},
    "engine": {"core", "machine", "analysis", "probes", "storage_probes", "workloads",
               "engine"},
    "commands": {"core", "machine", "analysis", "doctor", "compare", "reports", "probes",
                 "storage_probes", "workloads", "engine", "commands"},
    "cli": {"core", "analysis", "doctor", "engine", "commands"},
}
# What measures or talks to a device: the lower layers never import it, even lazily.
MEASURING = ("torch", "torchvision", "nvidia", "pynvml")
NO_MEASURING = ("core", "analysis", "compare", "reports")


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Every module `path` imports (absolute names)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "cli"


def allowed(importer: str, imported: str) -> bool:
    if imported == "benchbench.__version__":
        return True
    mine, rest = layer(importer), imported.removeprefix("benchbench.")
    return mine == layer(imported) or any(rest == a or rest.startswith(a + ".")
                                          for a in ALLOWED[mine])


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for name, path in modules().items():
        if name in ("benchbench", "benchbench.__main__"):
            continue
        for imp in imports(path):
            if imp.startswith("benchbench.") and not allowed(name, imp):
                wrong.append(f"{name} imports {imp}")
    assert not wrong, "\n".join(wrong)


def test_nothing_low_imports_what_measures_even_lazily():
    wrong = [f"{name} imports {imp}" for name, path in modules().items()
             if layer(name) in NO_MEASURING
             for imp in imports(path) if imp.split(".")[0] in MEASURING]
    assert not wrong, "\n".join(wrong)


def test_reports_receive_the_verdict_and_compute_none():
    for path in (PACKAGE / "reports").glob("*.py"):
        names = imports(path)
        assert "benchbench.analysis.verdict.verdict" not in names, path.name
        assert "benchbench.doctor.checks.run_checks" not in names, path.name


def test_no_import_cycles_between_modules():
    """Imports form no cycle, lazy ones inside functions included: a lazy import hides a
    cycle, it does not remove it (the runner's worker imports a probe's run module by name,
    through importlib, which is no import statement)."""
    mods = modules()
    graph = {name: {i for i in imports(path) if i in mods and i != name}
             for name, path in mods.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in mods:
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(cycles)


CODE = """
import sys
for heavy in ("torch", "torchvision", "pynvml", "nvidia.dali"):
    sys.modules[heavy] = None
import benchbench.cli, benchbench.engine.runner, benchbench.engine.catalog
import benchbench.commands.run, benchbench.commands.compare, benchbench.commands.report
from benchbench.analysis import verdict
from benchbench.core import results
from benchbench.reports import markdown
run = results.load(sys.argv[1])
assert "matmul" in markdown.render(run, verdict.verdict(run), [])
heavy = {"matplotlib", "pandas", "numpy", "PIL"} & set(sys.modules)
assert not heavy, heavy
print("ok")
"""


def test_the_parent_process_reads_and_renders_a_run_without_torch():
    """What the parent process and compare import runs without torch, DALI or NVML, and
    starts light (no matplotlib, pandas, numpy or PIL until a verb needs them)."""
    fixture = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
    out = subprocess.run([sys.executable, "-c", CODE, str(fixture)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
