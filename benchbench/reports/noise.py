"""Noisy measurements: which medians vary too much between their samples to trust, grouped
one line per probe for report.md, each one kept for the HTML fold and measurements.csv.

A run on a busy 2-core VM flags dozens of rows, most of them the same probe at neighbouring
sizes; one line per probe ("all-reduce: 8 of 8 sizes noisy, CV 8.4–103%") says as much as the
wall of rows did, and the rows stay one click (or one CSV column) away.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from benchbench.core import units as fmt
from benchbench.core.names import capitalised, probe_name
from benchbench.core.results import Measurement, RunResult
from benchbench.core.stats import MIN_SPREAD_SAMPLES, UNSTABLE_CV, summarize

# Statistics whose samples are comparable repeats: their spread is noise. A "max" over sizes
# or settings is a choice among medians, whose spread says nothing about noise.
REPEATS = ("median", "total_over_time")
# What a probe's settings are called when one key field is all that varies between them.
NOUNS = {"size_bytes": "sizes", "size": "sizes", "job": "jobs", "loader": "loaders",
         "workers": "worker counts", "precision": "precisions", "dtype": "dtypes",
         "ranks": "rank counts"}


TITLE = "Noisy measurements"


@dataclass(frozen=True)
class Noisy:
    """One measurement whose CV is above core.stats.UNSTABLE_CV."""

    probe: str
    metric: str
    key: dict[str, Any]
    cv: float
    n: int

    @property
    def setting(self) -> str:
        return ", ".join(f"{k}={fmt.key_value(k, v)}" for k, v in self.key.items())


@dataclass(frozen=True)
class ProbeNoise:
    """A probe's noisy measurements, counted by setting (a key; its metrics count once)."""

    probe: str
    noisy: int
    settings: int
    noun: str
    cv_low: float
    cv_high: float
    rows: list[Noisy]


# Metrics whose samples are a latency distribution (each request's or each step's), not
# repeats of one figure: their spread is the measurement (its percentiles), not noise.
DISTRIBUTIONS = ("server_latency", "ttft", "tpot", "itl", "decode_throughput")


def checked(m: Measurement) -> bool:
    """Whether a measurement's spread is judged: repeats, enough of them to have one, and not
    a latency distribution."""
    return (m.statistic in REPEATS and len(m.samples) >= MIN_SPREAD_SAMPLES
            and m.metric not in DISTRIBUTIONS)


def noisy(m: Measurement) -> bool:
    """Whether a measurement is flagged noisy: judged, and its CV above UNSTABLE_CV."""
    return checked(m) and summarize(m.samples).unstable


def warning(m: Measurement) -> str | None:
    """The warning of one measurement (measurements.csv's `warning` cell), or None."""
    if not checked(m):
        return None
    s = summarize(m.samples)
    if not s.unstable:
        return None
    return (f"noisy: CV {fmt.percent(s.cv)} over {s.n} samples, above "
            f"{fmt.percent(UNSTABLE_CV)}")


def rows(run: RunResult) -> list[Noisy]:
    """Every noisy measurement, in run order; metrics with the same samples at the same key
    (all-reduce's busbw and algbw at 2 ranks) are one row, 'algbw = busbw'."""
    seen: dict[tuple[str, str, tuple[float, ...]], int] = {}
    out: list[Noisy] = []
    for pr in run.probes:
        for m in pr.measurements:
            if not checked(m) or not (s := summarize(m.samples)).unstable:
                continue
            twin = (pr.name, repr(sorted(m.key.items())), tuple(m.samples))
            if twin in seen:
                i = seen[twin]
                out[i] = replace(out[i], metric=f"{out[i].metric} = {m.metric}")
                continue
            seen[twin] = len(out)
            out.append(Noisy(pr.name, m.metric, dict(m.key), s.cv, s.n))
    return out


def _noun(keys: list[dict[str, Any]]) -> str:
    fields = list(dict.fromkeys(k for key in keys for k in key))
    varying = [f for f in fields if len({repr(key.get(f)) for key in keys}) > 1]
    return NOUNS.get(varying[0], "settings") if len(varying) == 1 else "settings"


def by_probe(run: RunResult) -> list[ProbeNoise]:
    """One entry per probe with a noisy measurement, the worst (highest CV) first."""
    noisy = rows(run)
    out = []
    for pr in run.probes:
        mine = [r for r in noisy if r.probe == pr.name]
        if not mine:
            continue
        keys = list({repr(sorted(m.key.items())): m.key for m in pr.measurements
                     if checked(m)}.values())
        bad = {repr(sorted(r.key.items())) for r in mine}
        cvs = [r.cv for r in mine]
        out.append(ProbeNoise(pr.name, len(bad), len(keys), _noun(keys), min(cvs), max(cvs),
                              mine))
    return sorted(out, key=lambda p: -p.cv_high)


def probe_label(probe: str) -> str:
    """'All-reduce (`allreduce`)': the human name, then the id as code."""
    return f"{capitalised(probe_name(probe))} (`{probe}`)"


def _cv_range(p: ProbeNoise) -> str:
    if fmt.percent(p.cv_low) == fmt.percent(p.cv_high):
        return f"CV {fmt.percent(p.cv_high)}"
    return f"CV {fmt.percent(p.cv_low).removesuffix('%')}–{fmt.percent(p.cv_high)}"


def line(p: ProbeNoise) -> str:
    """'All-reduce (`allreduce`): 8 of 8 sizes noisy, CV 8.4–103.4%'."""
    count = ("noisy" if p.settings <= 1 else
             f"{p.noisy} of {p.settings} {p.noun} noisy")
    return f"{probe_label(p.probe)}: {count}, {_cv_range(p)}"


def section(run: RunResult) -> list[str]:
    """report.md's '## Noisy measurements': one lead, then one line per probe, worst first."""
    groups = by_probe(run)
    head = [f"## {TITLE}", ""]
    if not groups:
        return head + [f"None: every repeated measurement's CV is at most "
                       f"{fmt.percent(UNSTABLE_CV)}.", ""]
    total = sum(len(p.rows) for p in groups)
    lead = (f"{total} measurement{'s' if total != 1 else ''} in {len(groups)} "
            f"probe{'s' if len(groups) != 1 else ''} varied by more than "
            f"{fmt.percent(UNSTABLE_CV)} (CV) between samples: the machine was busy or the "
            "clocks moved. Re-run before trusting them. Each is marked ⚠ in its probe's "
            "table and in measurements.csv's `warning` column.")
    return head + [lead, ""] + [f"- {line(p)}" for p in groups] + [""]
