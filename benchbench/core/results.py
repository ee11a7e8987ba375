"""The result model: measurements, probe results and the run, with versioned JSON I/O.

Format history of results.json (bump SCHEMA_VERSION only when a key changes meaning or goes
away; adding an optional key does not bump it, and each bump adds one entry to MIGRATIONS):

- 1 (2026-11): first version. Top-level keys schema_version, tool, label, started_at,
  finished_at, environment, config, argv, probes, verdict. Optional keys reserved for later:
  dataset, derived, telemetry, cost, artifacts. Added without a bump: distributed (who
  launched the ranks, and each rank's probe outcomes), nodes (the other nodes' environment
  and per-node probes, gathered by rank 0), timings (where the run's wall time went) and
  pacing (the later rounds a run with a wall-clock promise left out to keep it:
  engine/pacing.py), interrupted (the signal that stopped a run before its plan was done,
  when, and the probes it cut short or left unstarted: core/interruption.py; a run without it
  ran its plan to the end); in the environment, identity (host name, DMI strings, GPU UUIDs:
  machine/identity.py), read with a fallback for the runs without it (compare/identity.py).

This module imports neither torch nor NVML: renderers and compare read old runs with it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

# A closed set of SI base units. Renderers convert to GB/s, TFLOP/s and the like for display.
UNITS = frozenset(
    {"s", "B", "B/s", "FLOP/s", "samples/s", "tokens/s", "ops/s", "files/s", "W", "Hz", "degC",
     "count", "ratio"}
)
RESOURCES = frozenset(
    {"gpu_compute", "gpu_memory", "host_device_link", "interconnect", "cpu_compute",
     "cpu_dataloading", "storage", "host_memory"}
)
STATUSES = frozenset({"ok", "skipped", "failed"})
# How a measurement's value comes from its samples.
STATISTICS = frozenset({"median", "max", "total_over_time"})
OPTIONAL_KEYS = ("dataset", "derived", "telemetry", "cost", "artifacts", "distributed", "nodes",
                 "timings", "pacing", "interrupted")


class SaveError(Exception):
    """results.json could not be written; the message says what survived."""


class ResultsError(Exception):
    """A results file that cannot be read: missing, corrupt, or from a newer benchbench."""


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One measured figure and the raw samples it was derived from."""

    metric: str
    key: dict[str, Any]
    value: float
    unit: str
    statistic: str
    samples: list[float]
    higher_is_better: bool
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r} is not one of {sorted(UNITS)}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic {self.statistic!r} is not one of {sorted(STATISTICS)}")
        if not math.isfinite(self.value):
            raise ValueError(f"{self.metric!r}: value {self.value!r} is not finite")
        for name in ("key", "context"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{self.metric!r}: {name} is not a JSON object")
        if not _all_finite(self.samples):
            raise ValueError(f"{self.metric!r}: every sample must be a finite number")


_PLAIN_NUMBERS = {float, int}


def _all_finite(values: list[Any]) -> bool:
    """Whether every value is an int or a float, and finite. A finite exact sum says so at
    once (an infinity or a NaN would make it one, or raise): a thousand runs' files hold half
    a million samples; anything else is looked at one value at a time."""
    if set(map(type, values)) <= _PLAIN_NUMBERS:
        try:
            return math.isfinite(math.fsum(values))
        except (OverflowError, ValueError):  # inf - inf, or finite values past 1.8e308
            pass
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in values)


@dataclass(kw_only=True)
class ProbeResult:
    """What one probe produced: its status, the config it ran with and its measurements."""

    name: str
    status: str
    resource: str
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    duration_s: float | None = None
    measurements: list[Measurement] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {sorted(STATUSES)}")
        if self.resource not in RESOURCES:
            raise ValueError(f"resource {self.resource!r} is not one of {sorted(RESOURCES)}")


@dataclass
class RunResult:
    """A whole run: what ran, where, and with which configuration."""

    tool: dict[str, str]
    started_at: str
    environment: dict[str, Any]
    config: dict[str, Any]
    argv: list[str]
    label: str | None = None
    finished_at: str | None = None
    probes: list[ProbeResult] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the reserved optional keys
    schema_version: int = SCHEMA_VERSION

    def probe(self, name: str) -> ProbeResult | None:
        return next((p for p in self.probes if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "tool": self.tool,
            "label": self.label,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "environment": self.environment,
            "config": self.config,
            "argv": self.argv,
            "probes": [asdict(p) for p in self.probes],
            "verdict": self.verdict,
        }
        out.update({k: v for k, v in self.extra.items() if k in OPTIONAL_KEYS})
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        data = migrate(data)
        for key, kind, what in (("tool", dict, "a JSON object"), ("environment", dict,
                                "a JSON object"), ("config", dict, "a JSON object"),
                                ("argv", list, "a JSON array"), ("probes", list, "a JSON array"),
                                ("label", (str, type(None)), "a string"),
                                ("started_at", str, "a string"),
                                ("finished_at", (str, type(None)), "a string")):
            if key in data and not isinstance(data[key], kind):
                raise ResultsError(f"not a valid benchbench results file: {key} is not {what}")
        try:
            probes = [
                ProbeResult(
                    **{**p, "measurements": [Measurement(**m) for m in p.get("measurements", [])]}
                )
                for p in data["probes"]
            ]
            return cls(
                schema_version=data["schema_version"],
                tool=data["tool"],
                label=data.get("label"),
                started_at=data["started_at"],
                finished_at=data.get("finished_at"),
                environment=data["environment"],
                config=data["config"],
                argv=data["argv"],
                probes=probes,
                verdict=data.get("verdict"),
                extra={k: data[k] for k in OPTIONAL_KEYS if k in data},
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            detail = " ".join(str(exc).splitlines())  # one line, whatever the file held
            raise ResultsError(f"not a valid benchbench results file: {detail}") from exc


# One function per schema bump, from version N to N+1. Empty while version 1 is the only one.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a parsed results dict up to SCHEMA_VERSION, or refuse it with a clear message."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ResultsError("not a benchbench results file (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ResultsError(f"invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"results schema_version {version} is newer than this benchbench understands "
            f"({SCHEMA_VERSION}); upgrade benchbench to read it"
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version = data["schema_version"]
    return data


def load(path: str | os.PathLike[str]) -> RunResult:
    """Read a results.json (or a run folder holding one)."""
    p = folder = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        try:
            runs = runs_inside(folder) if folder.is_dir() else []
        except OSError:
            runs = []
        if runs:  # runs/, where `run` writes: one of its folders is meant
            raise ResultsError(f"{folder}: a folder of {len(runs)} runs, not a run; give one "
                               f"of them, e.g. {runs[-1]}") from None
        raise ResultsError(f"{p}: no such file") from None
    except OSError as exc:
        raise ResultsError(f"{p}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{p}: corrupt JSON at line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # an integer too long to parse, deep nesting
        raise ResultsError(f"{p}: corrupt JSON: {type(exc).__name__}") from None
    try:
        return RunResult.from_dict(data)
    except ResultsError as exc:
        raise ResultsError(f"{p}: {exc}") from None


def runs_inside(folder: str | os.PathLike[str]) -> list[Path]:
    """The run folders directly inside a folder (runs/, where `run` writes them), by name: `run`
    names them by their UTC start time, so the last is the latest. OSError where the folder
    cannot be listed."""
    return sorted(d for d in Path(folder).iterdir() if (d / "results.json").is_file())


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write text (UTF-8) or bytes so that readers see the old file or the new one, never
    half of one."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        # mkstemp creates 0600; a report is as readable as any file the user's umask allows.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(run: RunResult, path: str | os.PathLike[str]) -> None:
    write_atomic(path, json.dumps(run.to_dict(), indent=1, sort_keys=False, default=str) + "\n")
