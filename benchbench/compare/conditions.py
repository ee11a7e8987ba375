"""Like with like: the conditions each side of a comparison ran under, where they differ, and
which rows they make not like-for-like.

A run's conditions are what it recorded about how it was asked to measure: the mode (--quick
shortens every probe's warm-up, samples and time budget, and shrinks some workloads), the
time budget, each probe's --set and config-file values, and from each probe's resolved
parameters the ones that change what a figure means (image size, precisions, batch size,
preset, sequence length, compile, the sizes a peak is taken over …). Facts a probe found
(the dataset's files, the fio engine that worked) are not conditions, and nor are the key
fields the row matched on (they are equal by construction).

A row is like-for-like when its side agrees with the baseline on every run-level condition
and on its probe's conditions; a list the row's own key picks from (the precisions, when the
row is one precision) differs for it only when its value is missing from a side's list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.compare.sides import Side, incidental
from benchbench.core.names import probe_name
from benchbench.core.results import RunResult

# Each probe parameter that changes what a figure means, and its words.
PARAMS = {
    "image_size": "image size", "precisions": "precisions", "precision": "precision",
    "batch_size": "batch size", "batch_sizes": "batch sizes", "preset": "preset",
    "seq_len": "sequence length", "compile": "torch.compile", "channels_last": "channels last",
    "sizes": "sizes", "dtype": "dtype", "dtypes": "dtypes", "ladder": "model sizes",
    "workers": "worker counts", "max_batch": "largest batch", "latency_bound_s": "p99 bound",
    "counts": "GPU counts", "duration_s": "duration", "jobs": "fio jobs",
}
# The key field a list parameter enumerates, where it is not the parameter's singular.
PICKS = {"sizes": ("size", "size_bytes"), "counts": ("ranks", "world_size"), "ladder": ("rung",)}


@dataclass(frozen=True)
class Condition:
    """One condition across the sides: each side's value in words, and whether a side differs
    from the baseline. `probe` is None for a run-level condition."""

    name: str  # "mode", "time budget", "image size"
    probe: str | None
    field: str  # the results.json field: "quick", "time_budget", "image_size", "--set"
    values: dict[str, str]  # side label -> the value in words ("—": not recorded)
    raw: dict[str, list[Any]]  # side label -> the distinct values of its runs
    differs: bool

    @property
    def title(self) -> str:
        return self.name if self.probe is None else f"{probe_name(self.probe)}: {self.name}"


def _words(field: str, v: Any) -> str:
    if v is None:
        return "auto" if field == "time_budget" else "—"
    if field == "quick":
        return "--quick" if v else "full"
    if field == "time_budget":
        return f"{v:g} s a probe"
    if field == "image_size":
        return f"{v} px"
    if field == "latency_bound_s" and isinstance(v, (int, float)):
        return f"{v * 1e3:g} ms"
    if field == "duration_s" and isinstance(v, (int, float)):
        return f"{v:g} s"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) or "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_words(k, x)}" for k, x in sorted(v.items())) or "none"
    return str(v)


def _text(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _distinct(values: Sequence[Any]) -> list[Any]:
    """The distinct values of a side's runs, in one order whatever the runs' order."""
    seen = {_text(v): v for v in values}
    return [seen[k] for k in sorted(seen)]


def _params(run: RunResult) -> dict[str, dict[str, Any]]:
    """Each probe that measured something: its conditions among its parameters, and its --set
    and config-file values."""
    overrides = run.config.get("overrides") or {}
    out: dict[str, dict[str, Any]] = {}
    for p in run.probes:
        if not p.measurements:
            continue
        kept = {k: v for k, v in (p.params or {}).items()
                if k in PARAMS and k not in incidental(p.name)}
        kept["--set"] = overrides.get(p.name) or {}
        out[p.name] = kept
    return out


def _condition(name: str, probe: str | None, field: str, per_side: dict[str, list[Any]],
               base: str) -> Condition:
    values = {lab: " / ".join(_words(field, v) for v in vs) if vs else "—"
              for lab, vs in per_side.items()}
    differs = any(_text(vs) != _text(per_side[base]) for vs in per_side.values()
                  if vs and per_side[base])
    return Condition(name, probe, field, values, per_side, differs)


def conditions(sides: Sequence[Side]) -> list[Condition]:
    """The run-level conditions, then each probe's, in the baseline's order; a probe's only
    where some side recorded it."""
    base = next(s for s in sides if s.baseline).label
    out = [_condition(name, None, f, {s.label: _distinct(
               [r.config.get(f) for r in s.runs if f in r.config or f == "time_budget"])
               for s in sides}, base)
           for name, f in (("mode", "quick"), ("time budget", "time_budget"))]
    per_run = {s.label: [_params(r) for r in s.runs] for s in sides}
    probes = dict.fromkeys(p for runs in per_run.values() for ps in runs for p in ps)
    for probe in probes:
        fields = dict.fromkeys(f for runs in per_run.values() for ps in runs
                               for f in ps.get(probe, {}))
        for f in sorted(fields, key=lambda f: (f == "--set", list(PARAMS).index(f)
                                               if f in PARAMS else 0)):
            per_side = {lab: _distinct([ps[probe][f] for ps in runs
                                        if probe in ps and f in ps[probe]])
                        for lab, runs in per_run.items()}
            out.append(_condition(PARAMS.get(f, "--set and config-file values"), probe, f,
                                  per_side, base))
    return out


def _picked(c: Condition, key: dict[str, Any], sides: Sequence[str]) -> bool:
    """Whether the row's key picks one item of the list `c` is, and both sides list it."""
    names = PICKS.get(c.field, (c.field, c.field[:-1]))
    picked = [key[n] for n in names if n in key]
    if not picked:
        return False
    return all(any(isinstance(v, list) and picked[0] in v for v in c.raw[lab])
               for lab in sides)


def unlike(conds: Sequence[Condition], probe: str, key: dict[str, Any], label: str,
           base: str) -> list[Condition]:
    """The conditions on which side `label` differs from the baseline for one row of `probe`:
    run-level ones, and the probe's own except those the row's key settles."""
    out = []
    for c in conds:
        if c.probe not in (None, probe) or c.field in key:
            continue
        a, b = c.raw.get(base) or [], c.raw.get(label) or []
        if not a or not b or _text(a) == _text(b):
            continue
        if c.probe is not None and _picked(c, key, (base, label)):
            continue
        out.append(c)
    return out


UNLIKE_REASON = "not like for like"


def reason(found: Sequence[Condition], label: str, base: str) -> str:
    """'not like for like: mode full / --quick; image size 224 px / 64 px' (the baseline's
    value first)."""
    return f"{UNLIKE_REASON}: " + "; ".join(
        f"{c.name} {c.values[base]} / {c.values[label]}" for c in found)
