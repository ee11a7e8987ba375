"""Every script in scripts/ answers --help with the whole first paragraph of its docstring,
not its first line cut mid-sentence."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

# A leading underscore marks a module the scripts beside it import, not a script to run.
SCRIPTS = sorted(p for p in (Path(__file__).resolve().parents[2] / "scripts").glob("*.py")
                 if not p.name.startswith("_"))


def first_paragraph(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert doc, f"{path.name} has no docstring"
    return " ".join(doc.split("\n\n")[0].split())


def test_each_scripts_help_states_its_purpose_in_whole_sentences() -> None:
    assert len(SCRIPTS) >= 10
    # Started together: several import torch, one at a time they take about 16 s here.
    running = {p: subprocess.Popen([sys.executable, str(p), "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True) for p in SCRIPTS}
    for path, proc in running.items():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{path.name} --help:\n{out}"
        purpose = first_paragraph(path)
        assert purpose.endswith((".", "?")), f"{path.name}: {purpose!r}"
        assert purpose in " ".join(out.split()), f"{path.name} --help:\n{out}"
