"""`benchbench doctor`: read-only checks of this machine, or of a saved run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

from benchbench.commands.common import UsageError
from benchbench.core import results
from benchbench.engine.runner import EXIT_FAILED, EXIT_OK


def main(args: argparse.Namespace) -> int:
    """Read-only checks of this machine now, or of a saved run (its environment and
    measurements). Exit 1 when a check fails; warnings alone exit 0."""
    from benchbench.doctor import checks as rules
    from benchbench.reports import doctor as doctor_report

    run_result = None
    if args.results:
        try:
            run_result = results.load(args.results)
        except results.ResultsError as exc:
            raise UsageError(str(exc)) from None
        snap = run_result.environment
        if not isinstance(snap, dict):
            raise UsageError(f"{args.results}: its environment is not a JSON object")
    else:
        from benchbench.machine.environment import snapshot, torch_facts

        snap = snapshot(".", torch_facts())
        for g in snap["gpus"]:  # should torch_facts() have made a CUDA context, NVML lists us
            if "other_processes" in g:
                g["other_processes"] = [p for p in g["other_processes"]
                                        if p.get("pid") != os.getpid()]
    checks = rules.run_checks(snap, run_result, args.scenario)
    if args.json:
        print(json.dumps({"results": args.results, "scenario": args.scenario,
                          "summary": rules.counts(checks),
                          "checks": [dataclasses.asdict(c) for c in checks]}, indent=1))
    else:
        from benchbench.commands.terminal import show_markdown

        where = f"the run in {args.results}" if args.results else "this machine"
        show_markdown("\n".join([f"# Configuration doctor: {where}", "",
                                  *doctor_report.table(checks),
                                  f"{doctor_report.summary(checks)}. Read-only: nothing was "
                                  "changed."]))
    return EXIT_FAILED if rules.failed(checks) else EXIT_OK
