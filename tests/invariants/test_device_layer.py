"""CUDA state has one home: only the device layer touches torch.cuda and torch.backends.

Initialisation, device choice, synchronisation, memory statistics, the allocator's cache, the
TF32 and cuDNN modes: code that only a GPU runs hides its defects best, so all of it lives in
probes/_devices.py (stateless) and probes/meter.py (the Meter, which the simulator replaces
and which keeps CUDA's rules there). A workload that set TF32 or read a peak itself would slip
past the simulator, as inference's cuDNN TF32 and memory_fit's uninitialised peak reset did.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "benchbench"
DEVICE_LAYER = {"probes/_devices.py", "probes/meter.py"}
# Read-only facts, gathered once by the facts worker before any probe runs; machine/ sits
# below probes/ and cannot import the device layer. It sets nothing.
READ_ONLY_FACTS = {"machine/environment.py"}
STATEFUL = ("cuda", "backends")


def _chain(node: ast.AST) -> list[str]:
    """['torch', 'cuda', 'synchronize'] for torch.cuda.synchronize."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def device_state_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of torch.cuda or torch.backends in `source`: attribute
    chains, and imports of either (`import torch.cuda`, `from torch import cuda`,
    `from torch.backends import cudnn`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and not isinstance(node.value, ast.Attribute):
            chain = _chain(node)
            if chain[:1] == ["torch"] and chain[1] in STATEFUL:
                found.append((node.lineno, ".".join(chain)))
        elif isinstance(node, ast.Attribute):
            continue
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[:2] in (["torch", s] for s in STATEFUL)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] in (["torch", s] for s in STATEFUL) or (
                    parts == ["torch"] and any(a.name in STATEFUL for a in node.names)):
                found.append((node.lineno, f"from {node.module} import …"))
    return found


def test_only_the_device_layer_touches_cuda_state():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in DEVICE_LAYER | READ_ONLY_FACTS:
            continue
        offenders += [f"{rel}:{line}: {what}"
                      for line, what in device_state_uses(path.read_text())]
    assert not offenders, ("set and read CUDA state through ctx.meter or probes/_devices.py:\n"
                           + "\n".join(offenders))


def test_the_check_sees_each_spelling():
    src = ("import torch\nimport torch.cuda\nfrom torch import backends\n"
           "from torch.backends import cudnn\n"
           "torch.cuda.synchronize()\ntorch.backends.cudnn.benchmark = True\n"
           "x = torch.zeros(1)\nname = 'torch.cuda.max_memory_allocated'\n")
    assert [line for line, _ in device_state_uses(src)] == [2, 3, 4, 5, 6]


def test_the_read_only_facts_only_read():
    """machine/environment.py may ask CUDA what it has, never set a mode."""
    tree = ast.parse((PACKAGE / "machine" / "environment.py").read_text())
    sets = [node.lineno for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                _chain(t)[:2] in (["torch", "cuda"], ["torch", "backends"])
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    assert not sets
