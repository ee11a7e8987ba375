"""Render history.html and fleet.html: the outcome banner, then the Markdown report's sections
with each series' or measurement's figure inline (reports/page.py builds the page)."""

from __future__ import annotations

from benchbench.analysis.change_points import at_change
from benchbench.compare.fleet import Fleet
from benchbench.compare.history_series import History
from benchbench.core.names import counted
from benchbench.reports import fleet_plots, history_plots, page
from benchbench.reports.fleet_md import OUTLIER_RULE, on_nodes
from benchbench.reports.html import esc


def history(h: History, markdown_text: str, plots: dict[str, bytes],
            notes: list[str] | None = None) -> str:
    regs = h.regressions
    banner = page.outcome(
        bool(regs), f"benchbench history · <strong>{esc(h.machine)}</strong> · "
                    f"{len(h.runs)} runs",
        f"{len(regs)} series regressed" if regs else "No regression",
        [f"exit {3 if regs else 0}: {'a' if regs else 'no'} latest level worse than "
         f"{'the --baseline run' if h.baseline else 'the best segment'} by more than "
         f"{esc(f'{h.threshold_pct:g}')}%, significant at p ≤ {esc(f'{h.alpha:g}')} "
         f"({esc(f'{at_change(h.alpha):g}')} shared by a series' recorded changes, each "
         "tested at its place)."]
        + ([f"{len(h.unheld)} series beyond {esc(f'{h.threshold_pct:g}')}% whose test did not "
            "hold (more runs will tell): see the summary."] if h.unheld else []))
    figures = [page.Figure(history_plots.name(s), plots[history_plots.name(s)],
                           f"{s.name} over the runs: each run, the segments' levels, the change "
                           "points and the environment's changes", "Series")
               for s in history_plots.drawn(h) if history_plots.name(s) in plots]
    return page.render(f"benchbench history: {h.machine}", banner, markdown_text, figures,
                       notes)


def fleet(f: Fleet, markdown_text: str, plots: dict[str, bytes],
          notes: list[str] | None = None) -> str:
    low = f.low
    banner = page.outcome(
        bool(low), f"benchbench fleet · {len(f.nodes)} nodes · "
                   f"{counted(len(f.groups), 'group')}",
        f"{counted(len(low), 'outlier')} below their group{on_nodes(low)}" if low else
        "No outlier below its group",
        [f"exit {3 if low else 0}: a node (or GPU) on the slower side of its group's median, "
         f"{esc(OUTLIER_RULE)}."]
        + ([f"With the nodes' earlier runs ({esc(f.earlier_from)}), also a node whose change "
            "since its own earlier run lies below the other nodes' changes, by the same rule."]
           if f.change_tests else []))
    figures = [page.Figure(fleet_plots.name(m), plots[fleet_plots.name(m)],
                           f"{m.name}: the nodes of {m.group} sorted, the group's median and "
                           "band, the outliers marked", "Measurements")
               for m in f.measures if fleet_plots.name(m) in plots]
    figures += [page.Figure(fleet_plots.change_name(m), plots[fleet_plots.change_name(m)],
                            f"{m.name}: each node's change since its earlier run, sorted, the "
                            "group's median change and band, the outliers marked",
                            "Since the earlier runs")
                for m in f.measures if fleet_plots.change_name(m) in plots]
    return page.render(f"benchbench fleet: {len(f.nodes)} nodes", banner, markdown_text,
                       figures, notes)
