"""A run stopped by SIGINT or SIGTERM: what results.json records of it under "interrupted",
read back, and the one sentence that says it.

The runner writes the record when a signal stopped the run before its plan was done: the
signal, when it came, the probes the run selected, those whose first round ended, the probe it
cut short and the probes (and later rounds) that never started. A run without the record ran
its plan to the end. Pure data: no I/O, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.names import listed, probe_name
from benchbench.core.results import ProbeResult, RunResult

KEY = "interrupted"  # the optional top-level key of results.json (core/results.py)
FLAG = "--include-interrupted"  # what compare, history and fleet take to accept such a run
CUT = "cut short"  # the status a person reads for the probe a signal stopped


@dataclass(frozen=True)
class Interruption:
    signal: str  # "SIGINT" or "SIGTERM"
    at: str | None  # when the signal came (UTC, ISO 8601)
    planned: tuple[str, ...]  # the probes the run selected, in run order
    finished: tuple[str, ...]  # those whose first round ended (ok, skipped or failed)
    cut_short: str | None = None  # the probe that was running when the signal came
    cut_round: int = 1  # its round
    not_run: tuple[str, ...] = ()  # the probes that never started
    rounds_not_run: int = 0  # later rounds of finished probes that never started

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "at": self.at, "probes_planned": list(self.planned),
                "probes_finished": list(self.finished),
                "cut_short": ({"probe": self.cut_short, "round": self.cut_round}
                              if self.cut_short else None),
                "probes_not_run": list(self.not_run), "rounds_not_run": self.rounds_not_run}

    @property
    def cut_first_round(self) -> str | None:
        """The probe the signal stopped in its first round: its record is the interruption's,
        not a failure of the probe."""
        return self.cut_short if self.cut_round == 1 else None


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, list) else ()


def of(run: RunResult) -> Interruption | None:
    """The run's interruption, or None for a run that ran its plan to the end. A record that
    a hand edit left partial still reads: what it lacks is left empty."""
    rec = run.extra.get(KEY)
    if not isinstance(rec, dict):
        return None
    cut: dict[str, Any] = rec["cut_short"] if isinstance(rec.get("cut_short"), dict) else {}
    rounds = rec.get("rounds_not_run")
    cut_round = cut.get("round")
    return Interruption(
        signal=str(rec.get("signal") or "a signal"),
        at=rec.get("at") if isinstance(rec.get("at"), str) else None,
        planned=_names(rec.get("probes_planned")), finished=_names(rec.get("probes_finished")),
        cut_short=str(cut["probe"]) if cut.get("probe") else None,
        cut_round=cut_round if isinstance(cut_round, int) and cut_round > 0 else 1,
        not_run=_names(rec.get("probes_not_run")),
        rounds_not_run=rounds if isinstance(rounds, int) and rounds > 0 else 0)


def headline(i: Interruption) -> str:
    """'interrupted by SIGTERM after 1 of 3 probes', in the middle of a sentence."""
    of = len(i.planned)
    return f"interrupted by {i.signal} after {len(i.finished)} of {of} probe{'s' * (of != 1)}"


def describe(i: Interruption) -> str:
    """'Interrupted by SIGTERM after 1 of 3 probes: memory copy cut short; sustained compute
    not run'. Probes by their names, as every sentence gives them (the report's Probes table
    has their ids, which --only takes)."""
    parts = []
    if i.cut_short:
        parts.append(probe_name(i.cut_short) + (f" (round {i.cut_round})" if i.cut_round > 1
                                                else "") + " cut short")
    if i.not_run:
        parts.append(f"{listed([probe_name(p) for p in i.not_run])} not run")
    if i.rounds_not_run:
        parts.append(f"{i.rounds_not_run} later round{'s' if i.rounds_not_run > 1 else ''} "
                     "not run")
    text = headline(i) + (": " + "; ".join(parts) if parts else "")
    return text[0].upper() + text[1:]


def banner(i: Interruption) -> str:
    """What the terminal, report.md and report.html open with."""
    return f"{describe(i)}. The verdict below rests on what finished."


def status(run: RunResult, pr: ProbeResult) -> str:
    """The probe's status as a person reads it: "cut short" for the probe a signal stopped in
    its first round (results.json keeps it "failed", and the run's record names it), else its
    own. A signal is an interruption, not a failure of the probe."""
    cut = of(run)
    return CUT if cut is not None and pr.status == "failed" and cut.cut_first_round == pr.name \
        else pr.status


def outcome(run: RunResult, pr: ProbeResult) -> str:
    """'the storage probe skipped: <reason>', or 'the dataloader probe was cut short:
    interrupted by SIGINT before it finished'."""
    st = status(run, pr)
    return f"the {pr.name} probe {'was ' * (st == CUT)}{st}: {pr.reason}"
