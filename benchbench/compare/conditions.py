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

history and fleet ask the same of each figure of each run (recorded, differing, of_figure):
runs that differ in a condition of a figure are separate series of it, and nodes that differ
are separate groups, never one level or one outlier test across them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
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
# The run-level conditions, (name, the results.json config field); the time budget is always
# one (a run that recorded none ran at auto).
RUN_LEVEL = (("mode", "quick"), ("time budget", "time_budget"))


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


def _run_level(run: RunResult) -> dict[str, Any]:
    """The run-level conditions the run recorded, by their config field."""
    return {f: run.config.get(f) for _, f in RUN_LEVEL
            if f in run.config or f == "time_budget"}


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
    levels = {s.label: [_run_level(r) for r in s.runs] for s in sides}
    out = [_condition(name, None, f, {lab: _distinct([x[f] for x in runs if f in x])
                                      for lab, runs in levels.items()}, base)
           for name, f in RUN_LEVEL]
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


def _pick(field: str, key: dict[str, Any]) -> list[Any]:
    """The item the row's key picks of the list parameter `field`, if it picks one."""
    return [key[n] for n in PICKS.get(field, (field, field[:-1])) if n in key][:1]


def _picked(c: Condition, key: dict[str, Any], sides: Sequence[str]) -> bool:
    """Whether the row's key picks one item of the list `c` is, and both sides list it."""
    picked = _pick(c.field, key)
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


# --- the conditions of each figure of a run: history's series and fleet's groups -------------

Field = tuple[str | None, str]  # (the probe, None for a run-level condition; its field)
Recorded = dict[Field, str]  # the conditions one run recorded, each value as one text
# (probe, field, the value's text) of each condition a figure ran under, in one order
Signature = tuple[tuple[str | None, str, str], ...]
NOT_RECORDED = ""  # a Signature's value where the run recorded none


def recorded(run: RunResult) -> Recorded:
    """The conditions a run recorded, as `conditions` reads them for a side: the run-level ones
    and each measuring probe's, each value as one text that runs compare by."""
    out: Recorded = {(None, f): _text(v) for f, v in _run_level(run).items()}
    for probe, kept in _params(run).items():
        out.update({(probe, f): _text(v) for f, v in kept.items()})
    return out


def differing(runs: Iterable[Recorded]) -> set[Field]:
    """The conditions that two or more of these runs recorded differently; a run that did not
    record one differs from none (as a side that did not, in compare)."""
    first: dict[Field, str] = {}
    out: set[Field] = set()
    for rec in runs:
        for f, v in rec.items():
            if first.setdefault(f, v) != v:
                out.add(f)
    return out


def of_figure(rec: Recorded, fields: Collection[Field], probe: str | None,
              key: dict[str, Any]) -> Signature:
    """The conditions among `fields` (differing's) that one figure of `probe`, with these key
    fields (sides.match_key's), ran under in the run `rec`: the run-level ones and its probe's,
    less those its key settles, as unlike leaves them out (a field of the key; a list the key
    picks an item of, where the run's list holds it). probe=None: the run-level ones alone."""
    out = []
    for p, f in fields:
        if p not in (None, probe) or f in key:
            continue
        v = rec.get((p, f), NOT_RECORDED)
        if p is not None and v != NOT_RECORDED:
            picked, value = _pick(f, key), json.loads(v)
            if picked and isinstance(value, list) and picked[0] in value:
                continue
        out.append((p, f, v))
    return tuple(sorted(out, key=lambda x: (x[0] is not None, x[0] or "", x[1])))


def of_figures(rec: Recorded, fields: Collection[Field],
               figures: Iterable[tuple[str, dict[str, Any]]]) -> Signature:
    """of_figure over several figures, each (probe, key fields): the conditions a run's
    figures ran under, each once."""
    out = {x for probe, key in figures for x in of_figure(rec, fields, probe, key)}
    return tuple(sorted(out, key=lambda x: (x[0] is not None, x[0] or "", x[1])))


def _name(field: str) -> str:
    return PARAMS.get(field, "--set and config-file values")


def title(probe: str | None, field: str) -> str:
    """'mode', 'time budget', 'resnet50: image size': as Condition.title."""
    if probe is None:
        return next(n for n, f in RUN_LEVEL if f == field)
    return f"{probe_name(probe)}: {_name(field)}"


def value_words(field: str, text: str) -> str:
    """A condition's value in words ('--quick', 'full', '64 px'); 'not recorded'."""
    return "not recorded" if text == NOT_RECORDED else _words(field, json.loads(text))


def words(sig: Signature, probe: str | None = None) -> str:
    """'--quick', 'full; time budget 60 s a probe', 'resnet50: image size 64 px': what a
    signature says, the mode by its value alone, the conditions of `probe` without its name."""
    parts = []
    for p, f, v in sig:
        if p is None and f == "quick" and v != NOT_RECORDED:
            parts.append(value_words(f, v))
        else:
            parts.append(f"{_name(f) if p is not None and p == probe else title(p, f)} "
                         f"{value_words(f, v)}")
    return "; ".join(parts)
