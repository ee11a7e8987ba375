"""Helpers shared by several test modules."""

import argparse


def run_args(**kw) -> argparse.Namespace:
    """The namespace `benchbench run` parses, with every flag at its default unless given."""
    base = dict(config=None, set=None, only=None, skip=None, device=None, repeats=None, rounds=None,
                time_budget=None, out=None, quick=False, label=None, data_dir=None,
                storage_path=None, workload=None)
    base.update(kw)
    return argparse.Namespace(**base)
