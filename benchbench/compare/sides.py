"""The sides of a comparison: which runs stand for which side, and which measurements match.
Their alignment is in align.py, the decision per row in comparison.py.

Reads only RunResult JSON (results.load), so any old run can be compared without re-running.
No printing and no files here: reports/compare_md.py and compare_html.py render a Comparison,
commands.compare writes it.

Sides. Each positional RUN argument is one side; a glob (expanded here, for shells that do not)
matching several runs makes one side that pools their raw samples, because the day-to-day
variance of a shared machine (~4% on cloud GPUs) is larger than the spread within one run. The
--baseline arguments, all pooled, are the baseline side; without --baseline the first
positional side is. An unquoted glob that the shell expands becomes one side per run: quote it
to pool.

Matching. Two measurements match when their probe, metric and key match, except for the key
fields in INCIDENTAL: values the probe chose for itself, that say how it measured rather than
what. Where the runs differ in those, the row notes it.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.analysis import limits
from benchbench.analysis.verdict_types import Verdict
from benchbench.compare.environment import hardware_id
from benchbench.core import interruption, results
from benchbench.core.names import first_of
from benchbench.core.results import Measurement, RunResult

# Key fields that do not make two measurements different measurements, per probe ("*": any).
INCIDENTAL: dict[str, frozenset[str]] = {
    # Host lists name the machines a collective ran on, not what it measured.
    "*": frozenset({"hosts"}),
    # The buffer is auto-sized to at least 4x the last-level cache (L2 on a GPU) and grows with
    # --quick off: either way it measures DRAM/HBM, which is the figure compared.
    "memory_bandwidth": frozenset({"size_bytes"}),
    # The loader and worker count are chosen by the probe from the dataloader's best
    # (context loader_chosen_by): the figure is "the real pipeline at its best setting".
    "pipeline": frozenset({"loader", "workers"}),
    # fio's first engine that works here (io_uring, libaio, psync …) and the way the page cache
    # was bypassed are how the read was made; the job (size, depth, jobs) is what was read.
    "storage": frozenset({"engine", "cache_bypass"}),
}
GLOB_CHARS = frozenset("*?[")


class CompareError(Exception):
    """Bad input for compare: one line, exit code 2."""


def incidental(probe: str) -> frozenset[str]:
    return INCIDENTAL["*"] | INCIDENTAL.get(probe, frozenset())


def _freeze(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


def match_key(probe: str, m: Measurement, full: bool = False) -> tuple[Any, ...]:
    skip = frozenset() if full else incidental(probe)
    return (probe, m.metric, tuple((k, _freeze(v)) for k, v in m.key.items() if k not in skip))


# --- sides --------------------------------------------------------------------------------------

@dataclass
class Side:
    """One column of the comparison: one run, or several pooled."""

    label: str
    runs: list[RunResult]
    sources: list[str]
    baseline: bool = False
    pattern: str | None = None  # the glob or argument that named a pooled side
    run: RunResult | None = None  # the runs merged into one (the run itself when alone)
    verdict: Verdict | None = None
    verdict_error: str | None = None  # why the verdict could not be computed

    @property
    def hardware(self) -> str:
        ids = sorted({hardware_id(r) for r in self.runs})
        return ids[0] if len(ids) == 1 else "mixed: " + "; ".join(ids)


def expand(arg: str) -> list[str]:
    """The paths an argument names: itself when it exists, else its glob matches, sorted. A
    folder without a results.json of its own is a folder of runs (`runs/`, where `run` writes
    them): the run folders directly inside it (results.runs_inside), its other files left out. A
    glob skips folders without a results.json (a compare --out folder among the runs, say) and
    files not named .json (the JUnit XML or a report beside the runs): the report lists every
    run it used. A .json it matches must be a run."""
    if os.path.isdir(arg) and not os.path.isfile(os.path.join(arg, "results.json")):
        try:
            found = [str(p) for p in results.runs_inside(arg)]
        except OSError as exc:
            raise CompareError(f"{arg}: cannot list: {exc.strerror}") from None
        if not found:
            raise CompareError(f"{arg}: no results.json in it or in the folders directly "
                               "inside it; give run folders, or a quoted glob for deeper ones")
        return found
    if os.path.exists(arg) or not (GLOB_CHARS & set(arg)):
        return [arg]
    matched = sorted(glob.glob(arg))
    found = [p for p in matched if os.path.isfile(os.path.join(p, "results.json"))
             or (os.path.isfile(p) and p.lower().endswith(".json"))]
    if not found:
        holders = [p for p in matched if os.path.isdir(p) and _holds_runs(p)]
        hint = (f" ({first_of(holders, 3)} hold{'s' if len(holders) == 1 else ''} run folders: "
                "give the folder itself, or a glob of the run folders inside it)"
                if holders else "")
        raise CompareError(f"{arg}: matches no results.json or run folder{hint}")
    return found


def _holds_runs(folder: str) -> bool:
    try:
        return bool(results.runs_inside(folder))
    except OSError:
        return False


def load(path: str, include_interrupted: bool = False) -> RunResult:
    """The run at `path`, its figures beyond their physical limits set aside. A run a signal
    stopped is refused unless `include_interrupted`: compare, history and fleet would read
    its missing probes as a change of the machine."""
    try:
        # A figure beyond its physical limit is a timing error, not a figure to compare.
        run = limits.screened(results.load(path))
    except results.ResultsError as exc:
        raise CompareError(str(exc)) from None
    cut = interruption.of(run)
    if cut is not None and not include_interrupted:
        raise CompareError(f"{path}: {interruption.headline(cut)} (its results.json records "
                           f"\"{interruption.KEY}\"); run it again, or take it as it is with "
                           f"{interruption.FLAG}")
    return run


def interrupted_note(cut: Sequence[tuple[str, interruption.Interruption]]) -> str | None:
    """A note naming the interrupted runs, (source, its interruption), taken with
    --include-interrupted; None without any."""
    if not cut:
        return None
    if len(cut) == 1:
        return (f"run `{cut[0][0]}` was {interruption.headline(cut[0][1])} "
                f"({interruption.FLAG}): what it measured counts, the rest is missing")
    return (f"{len(cut)} runs were interrupted by a signal before their plan was done "
            f"({interruption.FLAG}): what each measured counts: "
            + first_of([f"`{s}` ({interruption.headline(c)})" for s, c in cut], 3))


# a run writes results.json after each probe and its finish time at its end: one without it is
# still running, or was killed (out of memory, a lost node) before the end
UNFINISHED = "no finish time (still running, or stopped before the end)"


def unfinished_note(sources: Sequence[str]) -> str | None:
    """A note naming the unfinished runs (by source) among those read, or None."""
    if not sources:
        return None
    named = first_of([f"`{s}`" for s in sources], 3)
    if len(sources) == 1:
        return f"run {named} has {UNFINISHED}: what it measured so far counts"
    return f"{len(sources)} runs have {UNFINISHED}: what each measured so far counts: {named}"


def results_file(path: str) -> str:
    """The real path of the results.json a path names: the file itself, or the one in the
    run folder."""
    return os.path.realpath(path if os.path.isfile(path) else os.path.join(path, "results.json"))


def paths_of(args: Sequence[str]) -> list[str]:
    """Every path the arguments name (globs expanded), each results.json once, in order."""
    paths: list[str] = []
    seen: set[str] = set()
    for a in args:
        for p in expand(a):
            real = results_file(p)
            if real not in seen:
                seen.add(real)
                paths.append(p)
    return paths


def load_side(args: Sequence[str], baseline: bool = False,
              include_interrupted: bool = False) -> Side:
    paths = paths_of(args)
    runs = [load(p, include_interrupted) for p in paths]
    pattern = args[0] if len(args) == 1 and len(runs) > 1 else None
    return Side(label="", runs=runs, sources=paths, baseline=baseline, pattern=pattern)


def run_label(run: RunResult) -> str:
    return run.label or (run.environment.get("host") or {}).get("hostname") or "run"


def _start_texts(start: str) -> tuple[str, str, str]:
    """A run's start, ever more precise: to the minute, to the second (both as UTC writes
    them, 'YYYY-MM-DD HH:MM[:SS]'), and as recorded."""
    plain = start.replace("T", " ")
    return plain[:16], plain[:19], start


def assign_labels(sides: list[Side]) -> None:
    """Each side's run label, else hostname; a pooled side's shared label, else its glob (or
    'baseline'); where labels collide, the start time added to each of them, all to the same
    precision (the minute if that tells them apart, else the second, else as recorded), then
    a number."""
    for s in sides:
        names = {run_label(r) for r in s.runs}
        if len(names) == 1:
            s.label = names.pop()
        else:
            s.label = s.pattern or ("baseline" if s.baseline else "pooled")
    for name in {s.label for s in sides}:
        group = [s for s in sides if s.label == name]
        if len(group) < 2:
            continue
        starts = [_start_texts(min(r.started_at for r in s.runs)) for s in group]
        level = next((k for k in range(3) if len({x[k] for x in starts}) == len(group)), 2)
        for s, x in zip(group, starts, strict=True):
            s.label = f"{name} @ {x[level]}"
    seen: dict[str, int] = {}
    for s in sides:
        seen[s.label] = seen.get(s.label, 0) + 1
        if seen[s.label] > 1:
            s.label = f"{s.label} #{seen[s.label]}"
