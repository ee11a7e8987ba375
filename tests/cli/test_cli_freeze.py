"""The CLI, frozen: every verb's flags, their defaults and choices. A change to the CLI fails
this test until tests/support/fixtures/cli.json is rewritten on purpose:

    python tests/cli/test_cli_freeze.py --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FROZEN = Path(__file__).parents[1] / "support" / "fixtures" / "cli.json"


def _action(a: argparse.Action) -> dict[str, Any]:
    out: dict[str, Any] = {"flags": list(a.option_strings) or [a.dest], "dest": a.dest,
                           "kind": type(a).__name__, "nargs": a.nargs,
                           "required": a.required}
    if a.default is not None and a.default is not argparse.SUPPRESS:
        out["default"] = a.default
    if a.choices is not None:
        out["choices"] = list(a.choices)
    if a.type is not None:
        out["type"] = getattr(a.type, "__name__", repr(a.type))
    return out


def describe() -> dict[str, Any]:
    from benchbench.cli import build_parser

    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, Any] = {"": [_action(a) for a in parser._actions
                                if not isinstance(a, argparse._SubParsersAction)]}
    for name, sub in verbs.choices.items():
        out[name] = [_action(a) for a in sub._actions]
    return out


def test_the_cli_is_as_frozen():
    frozen = json.loads(FROZEN.read_text())
    now = json.loads(json.dumps(describe()))
    assert now == frozen, ("the CLI changed: if on purpose, run "
                           "python tests/cli/test_cli_freeze.py --write and commit cli.json")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FROZEN.write_text(json.dumps(describe(), indent=1) + "\n")
    print(f"wrote {FROZEN}")
