"""Helpers shared by several test modules."""

import argparse


def run_args(**kw) -> argparse.Namespace:
    """The namespace `benchbench run` parses, with every flag at its default unless given."""
    base = dict(config=None, set=None, only=None, skip=None, device=None, repeats=None, rounds=None,
                time_budget=None, out=None, quick=False, label=None, data_dir=None,
                storage_path=None, workload=None)
    base.update(kw)
    return argparse.Namespace(**base)


def cpu_facts(**extra):
    """What torch_facts() says on a machine without a GPU (this one's cores)."""
    from benchbench.machine.environment import usable_cores

    return {"cuda_available": False, "cuda_device_count": 0, "gpus": [],
            "usable_cores": usable_cores(), **extra}


def resolved(probe, device="cpu", quick=True, facts=None, **values):
    """The probe's config as the runner hands it over: its defaults for the device and --quick,
    resolved with the machine's facts, under the given values."""
    from benchbench.engine.catalog import default_registry

    spec = default_registry().get(probe)
    return spec.resolve(device, quick, cpu_facts() if facts is None else facts, values)


def render_md(run, workload=None):
    """report.md for a run, from its verdict computed once, as `run` and `report` write it."""
    from benchbench.analysis import verdict
    from benchbench.commands.report import report_markdown

    return report_markdown(run, verdict.verdict(run, workload))[2]


def verdict_dict(run, workload=None):
    """The verdict as results.json caches it."""
    from benchbench.analysis import verdict

    return verdict.verdict(run, workload).to_dict()


def script(name):
    """A script of scripts/ imported as it runs: the modules beside it importable, and itself
    in sys.modules under its name (its dataclasses and pickles find it there)."""
    import importlib.util
    import sys
    from pathlib import Path

    here = Path(__file__).parents[2] / "scripts"
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
