"""`benchbench list` and `benchbench env`: the probes this machine would run, and what it is."""

from __future__ import annotations

import argparse
import json

from benchbench.core import config
from benchbench.engine.catalog import default_registry


def list_probes(args: argparse.Namespace) -> int:
    from benchbench.machine.environment import torch_facts

    registry = default_registry()
    facts = torch_facts()
    device = "cuda" if facts.get("cuda_available") else "cpu"
    print(f"device here: {device}"
          + (f" ({facts.get('no_gpu_reason')})" if device == "cpu" else ""))
    for spec in registry:
        why = spec.skip_reason(device, facts.get("no_gpu_reason"),
                               int(facts.get("cuda_device_count") or 0))
        status = "would run" if why is None else f"skipped, because {why}"
        print(f"{spec.name:<18} {spec.resource(device):<17} {status}")
        print(f"{'':<18} {spec.description}")
        if args.fields:
            for name, default, doc in config.describe_fields(
                    spec.config_cls, spec.defaults(device, False, facts)):
                print(f"{'':<20}{spec.name}.{name} = {default}  # {doc}")
    return 0


def env(args: argparse.Namespace) -> int:
    from benchbench.machine.environment import snapshot, torch_facts
    from benchbench.reports.markdown import environment_section

    snap = snapshot(".", torch_facts())
    if args.json:
        print(json.dumps(snap, indent=1, default=str))
    else:
        print("\n".join(environment_section(snap)))
    return 0
