"""What the verbs share: the usage error, the run's configuration from --config and the flags,
and the check that --out is a new, writable folder. Each verb's module validates its input
completely before it writes anything."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchbench.analysis.config import AnalysisConfig
from benchbench.core import config
from benchbench.core.config import ConfigError, RunConfig
from benchbench.engine.catalog import Registry
from benchbench.probes._config import DatasetConfig


class UsageError(Exception):
    """Bad usage or input: one line on stderr, exit code 2, nothing written."""


def check_number(name: str, value: float | None, ok: bool, what: str) -> None:
    """A flag's number: finite and `ok`, else one line saying what it must be."""
    if value is not None and not (math.isfinite(value) and ok):
        raise UsageError(f"{name} {value:g}: must be {what}")


def probe_names(text: str | None, registry: Registry, flag: str) -> tuple[str, ...]:
    if not text:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise UsageError(f"{flag}: unknown probe {', '.join(unknown)}; valid: "
                         f"{', '.join(registry.names())}")
    return names


def build_run_config(args: argparse.Namespace, registry: Registry) -> RunConfig:
    """--config and the flags, merged with the documented precedence, and checked."""
    try:
        toml_data = config.read_toml(args.config) if args.config else {}
        file_run = config.run_section(toml_data)
        overrides = config.collect_overrides(
            {**registry.config_classes(), "dataset": DatasetConfig, "analysis": AnalysisConfig},
            toml_data, args.set or [])
        if getattr(args, "workload", None):
            overrides.setdefault("analysis", {})["workload"] = args.workload
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    for flag, value in (("--out", args.out), ("--data-dir", args.data_dir),
                        ("--storage-path", args.storage_path)):
        if value is not None and not value.strip():  # most likely an unset shell variable
            raise UsageError(f"{flag} must not be empty")
    if args.only is not None and not probe_names(args.only, registry, "--only"):
        raise UsageError(f"--only: no probe named; valid: {', '.join(registry.names())}")
    only = probe_names(args.only, registry, "--only") or probe_names(
        ",".join(file_run.get("only", ())), registry, "run.only")
    skip = probe_names(args.skip, registry, "--skip") or probe_names(
        ",".join(file_run.get("skip", ())), registry, "run.skip")
    device = args.device or file_run.get("device", "auto")
    if device not in config.DEVICES:
        raise UsageError(f"device {device!r}: choose from {', '.join(config.DEVICES)}")
    repeats = args.repeats if args.repeats is not None else file_run.get("repeats")
    if repeats is not None and repeats < 1:
        raise UsageError("--repeats must be at least 1")
    rounds = getattr(args, "rounds", None)
    rounds = rounds if rounds is not None else file_run.get("rounds")
    if rounds is not None and not 1 <= rounds <= 10:
        raise UsageError("--rounds must be from 1 to 10")
    budget = args.time_budget if args.time_budget is not None else file_run.get("time_budget")
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise UsageError("--time-budget must be a positive number of seconds")
    price = getattr(args, "price_per_hour", None)
    price = price if price is not None else file_run.get("price_per_hour")
    if price is not None and not (math.isfinite(price) and price > 0):
        raise UsageError("--price-per-hour must be a positive number of US dollars per hour")
    if only and not [n for n in only if n not in skip]:
        raise UsageError("--only and --skip leave no probe to run")
    return RunConfig(
        out=args.out, quick=bool(args.quick or file_run.get("quick", False)), only=only,
        skip=skip, device=device, label=args.label or file_run.get("label"), repeats=repeats,
        rounds=rounds,
        time_budget=budget, config_file=args.config, overrides=overrides,
        data_dir=args.data_dir, storage_path=args.storage_path, price_per_hour=price,
    )


def check_out_dir(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        if any(out.iterdir()):
            raise UsageError(f"--out {out}: folder is not empty; a previous run is never "
                             "overwritten, choose a new folder")
    parent = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {parent} is not writable")
    # Root passes os.access everywhere, but /proc, /sys and some mounts still refuse: try it,
    # on --out's own path only (made and removed again, so a refusal leaves nothing).
    made = [] if out.exists() else [out, *[p for p in out.absolute().parents
                                           if not p.exists()]]
    try:
        if made:
            out.mkdir(parents=True)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".benchbench-check-", dir=out))
    except OSError:
        raise UsageError(f"--out {out}: {parent} is not writable") from None
    finally:
        for p in made:  # innermost first
            try:
                p.rmdir()
            except OSError:
                break


def check_out_file(path: Path, flag: str) -> None:
    """A file the verb will write (--junit, --openmetrics): not a folder, in a folder that
    exists and takes a new file. Tried with a scratch file made and removed again, because
    root passes os.access everywhere while /proc and read-only mounts still refuse."""
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {parent} does not exist")
    try:
        fd, scratch = tempfile.mkstemp(prefix=".benchbench-check-", dir=parent)
        os.close(fd)
        os.unlink(scratch)
    except OSError:
        raise UsageError(f"{flag} {path}: {parent} is not writable") from None


def write_files(out: Path, files: dict[str, str | bytes]) -> None:
    """The report files into the checked --out folder, each atomically; says each on stderr."""
    import sys

    from benchbench.core.results import write_atomic

    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            write_atomic(out / name, data)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
    for name in files:
        print(f"written: {out / name}", file=sys.stderr)


def write_file(path: Path, data: str | bytes, flag: str) -> None:
    """One checked file (--junit, --openmetrics), atomically; says it on stderr."""
    import sys

    from benchbench.core.results import write_atomic

    try:
        write_atomic(path, data)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write: {exc.strerror}") from None
    print(f"written: {path}", file=sys.stderr)


@dataclass(frozen=True)
class Outputs:
    """Where a report verb (compare, history, fleet) writes besides stdout: the --out folder
    and the --junit file, both checked before anything is read or written."""

    out: Path | None
    junit: Path | None


def outputs(args: argparse.Namespace) -> Outputs:
    out = Path(args.out) if args.out else None
    if out is not None:
        check_out_dir(out)
    junit = Path(args.junit) if args.junit else None
    if junit is not None:
        check_out_file(junit, "--junit")
    return Outputs(out, junit)


def publish(where: Outputs, stem: str, md: str, *,
            figures: Callable[[list[str], Callable[[int, int], None]], dict[str, bytes]],
            html: Callable[[str, dict[str, bytes], list[str]], str], csv: Callable[[], str],
            junit: Callable[[], bytes]) -> None:
    """The Markdown on stdout; <stem>.md, .html (with its figures, and the notes of those that
    could not be drawn) and .csv under --out; the --junit file. Each is made only when asked
    for. figures(notes, progress) draws them under a progress bar (a history of a thousand
    runs takes seconds)."""
    from benchbench.engine.progress import task_progress

    print(md, end="")
    if where.out is not None:
        notes: list[str] = []
        with task_progress("drawing the figures") as progress:
            plots = figures(notes, progress)
        write_files(where.out, {f"{stem}.md": md, f"{stem}.html": html(md, plots, notes),
                                f"{stem}.csv": csv()})
    if where.junit is not None:
        write_file(where.junit, junit(), "--junit")
