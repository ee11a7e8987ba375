"""history.csv: one row per run and series, every figure the history report rests on."""

from __future__ import annotations

from typing import Any

from benchbench.compare.history_series import History
from benchbench.reports.csv import table_text


def csv_rows(h: History) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per run and series: the run's figure and rounds, its segment and level, the
    series' noise (empty: unknown) and the least slowdown it sees (Series.sees_pct: blind, and
    at a recorded change), and, on the first run of a segment, the change point's change and
    p."""
    keys: dict[str, None] = {}
    out = []
    for s in h.series:
        fields = dict(s.key[2])
        keys.update(dict.fromkeys(fields))
        starts = {x.at: x for x in s.shifts}
        odd = {o.at for o in s.outliers}
        reg = s.regression
        began = reg.steps[-1] if reg is not None and reg.steps else None
        for i, (number, rounds, v) in enumerate(zip(s.runs, s.points, s.values, strict=True)):
            seg = next(g for g in s.segments if g.start <= i < g.stop)
            shift = starts.get(i)
            run = h.run(number)
            out.append({"run": number, "started_at": run.started_at, "source": run.source,
                        "label": run.label, "series": s.name, "probe": s.probe,
                        "metric": s.metric, **{f"key.{k}": v for k, v in fields.items()},
                        "unit": s.unit, "value": v,
                        "rounds": len(rounds), "segment": s.segments.index(seg) + 1,
                        "segment_level": seg.level, "noise_pct": s.noise_pct,
                        "sees_pct": s.sees_pct[0] if s.sees_pct else None,
                        "sees_recorded_pct": s.sees_pct[1] if s.sees_pct else None,
                        "change_point": shift is not None,
                        "change_pct": shift.change_pct if shift else None,
                        "p_value": shift.p_value if shift else None,
                        "p_held_at": shift.held_at if shift else None,
                        "outlier_run": i in odd,
                        "regression": shift is not None and shift is began})
    lead = ["run", "started_at", "source", "label", "series", "probe", "metric"]
    tail = ["unit", "value", "rounds", "segment", "segment_level", "noise_pct", "sees_pct",
            "sees_recorded_pct", "change_point", "change_pct", "p_value", "p_held_at",
            "outlier_run", "regression"]
    return lead + [f"key.{k}" for k in keys] + tail, out


def csv_text(h: History) -> str:
    return table_text(*csv_rows(h))
