"""`benchbench list` and `benchbench env`: the probes this machine would run, and what it is."""

from __future__ import annotations

import argparse
import json

from benchbench.core import config
from benchbench.core.names import resource_name
from benchbench.engine.catalog import default_registry


def list_probes(args: argparse.Namespace) -> int:
    """Each probe, what it measures and whether it would run here: a table on a terminal, one
    aligned line each into a pipe (what scripts and the tests read)."""
    from benchbench.commands.terminal import console, table
    from benchbench.machine.environment import torch_facts

    registry = default_registry()
    facts = torch_facts()
    device = "cuda" if facts.get("cuda_available") else "cpu"
    rows, fields = [], []
    for spec in registry:
        why = spec.skip_reason(device, facts.get("no_gpu_reason"),
                               int(facts.get("cuda_device_count") or 0))
        rows.append([spec.name, spec.resource(device),
                     "would run" if why is None else f"skipped, because {why}",
                     spec.description])
        if args.fields:
            fields += [[f"{spec.name}.{name}", str(default), doc] for name, default, doc in
                       config.describe_fields(spec.config_cls,
                                              spec.defaults(device, False, facts))]
    here = f"device here: {device}" + (f", because {facts.get('no_gpu_reason')}"
                                       if device == "cpu" else "")
    out = console()
    if out.is_terminal:
        out.print(here, markup=False)
        out.print(table(["probe", "measures", "here", "what it measures"],
                        [[name, resource_name(resource), status, what]
                         for name, resource, status, what in rows]))
        if fields:
            out.print(table(["field (--set PROBE.FIELD=VALUE)", "default here", "what it is"],
                            fields))
        return 0
    print(here)
    for name, resource, status, what in rows:
        print(f"{name:<18} {resource:<17} {status}")
        print(f"{'':<18} {what}")
        for field, default, doc in fields:
            if field.startswith(f"{name}."):
                print(f"{'':<20}{field} = {default}  # {doc}")
    return 0


def env(args: argparse.Namespace) -> int:
    from benchbench.machine.environment import snapshot, torch_facts
    from benchbench.reports.markdown import environment_section

    snap = snapshot(".", torch_facts())
    if args.json:
        print(json.dumps(snap, indent=1, default=str))
    else:
        from benchbench.commands.terminal import show_markdown

        show_markdown("\n".join(environment_section(snap)))
    return 0
