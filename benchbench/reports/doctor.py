"""Render the configuration doctor's checks: a Markdown section for reports, and the CLI table."""

from __future__ import annotations

from benchbench.core import units as fmt
from benchbench.doctor.checks import Check, counts

HEADER = ["check", "status", "measured", "threshold", "source", "fix"]


def _status(c: Check) -> str:
    return f"**{c.label}**" if c.status in ("fail", "warn") else c.label


def rows(checks: list[Check], emphasis: bool = True) -> list[list[str]]:
    """One row per check under HEADER; `emphasis` puts warn and fail in Markdown bold."""
    return [[c.name, _status(c) if emphasis else c.label, c.measured, c.threshold, c.source,
             c.fix or ""] for c in checks]


def notes(checks: list[Check]) -> list[str]:
    """'name: detail' for each check that has a note (a skipped check's reason is in its row)."""
    return [f"{c.name}: {c.detail}" for c in checks if c.detail and c.status != "skipped"]


NO_GPU = "no GPU is visible ("


def _no_gpu_reason(c: Check) -> str | None:
    """The reason of a check skipped because there is no GPU: 'no GPU is visible (...)' up to
    its closing parenthesis, whatever the check added after it."""
    if c.status != "skipped" or not (c.detail or "").startswith(NO_GPU):
        return None
    depth = 0
    for i, ch in enumerate(c.detail or ""):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            return (c.detail or "")[len(NO_GPU):i]
    return (c.detail or "")[len(NO_GPU):]


def table(checks: list[Check]) -> list[str]:
    """The checks as a Markdown table, then each note as a bullet. Checks skipped because no
    GPU is visible are one line, not a row each repeating the same reason (`--json` keeps
    every row)."""
    no_gpu = [c for c in checks if _no_gpu_reason(c) is not None]
    shown = [c for c in checks if c not in no_gpu] if len(no_gpu) > 1 else checks
    lines = fmt.table(HEADER, rows(shown))
    if len(no_gpu) > 1:
        reason = _no_gpu_reason(no_gpu[0])
        lines += [f"No GPU visible: {len(no_gpu)} GPU checks skipped "
                  f"({', '.join(c.name for c in no_gpu)}), because {reason}.", ""]
    bullets = [f"- {n}" for n in notes(checks)]
    return lines + (bullets + [""] if bullets else [])


def summary(checks: list[Check]) -> str:
    n = counts(checks)
    return ", ".join(f"{n[s]} {s}" for s in ("fail", "warn", "pass", "skipped"))


def section(checks: list[Check]) -> list[str]:
    """'## Configuration doctor': the run's environment and measurements held against the
    buyer's guide, NVIDIA's driver table and the run's own needs. Nothing was changed."""
    return (["## Configuration doctor", "",
             f"Read-only checks of the machine this run measured ({summary(checks)}). A fix is "
             "advice for an administrator; benchbench never changes a setting.", ""]
            + table(checks))
