"""Cost in a comparison: each side's price, its costs per throughput through cost.py, the ranking
by cost per job, and buy-versus-rent for a machine the user would buy.

Prices come from --price LABEL=USD_PER_HOUR, else from the runs themselves (run
--price-per-hour, read by cost.price_of). Pure: no printing, no files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from benchbench.analysis import cost
from benchbench.compare.comparison import Comparison
from benchbench.compare.sides import CompareError, Side, run_label
from benchbench.core.gpus import gpu_count


def parse_assignments(items: Sequence[str] | None, flag: str) -> list[tuple[str, float]]:
    """LABEL=NUMBER pairs, each number positive and finite. The label is everything before the
    last '=' (labels may hold one; numbers never do)."""
    out = []
    for item in items or []:
        label, eq, text = item.rpartition("=")
        if not eq:
            raise CompareError(f"{flag} {item!r}: expected LABEL=NUMBER, e.g. {flag} "
                               "my-box=2.50")
        label = label.strip()
        if not label:
            raise CompareError(f"{flag} {item!r}: the label before '=' is empty")
        try:
            value = float(text)
        except ValueError:
            raise CompareError(f"{flag} {item!r}: {text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise CompareError(f"{flag} {item!r}: the number must be positive")
        out.append((label, value))
    return out


def find_side(sides: Sequence[Side], label: str, flag: str) -> Side:
    """The side with this label or named by this argument (a path or glob as given); else the
    one side holding a run of that label or hostname (which compare lengthened to tell two
    sides apart)."""
    exact = [s for s in sides if s.label == label] or [
        s for s in sides if label in s.sources or label == s.pattern]
    if exact:
        return exact[0]
    holding = [s for s in sides if any(run_label(r) == label for r in s.runs)]
    if len(holding) == 1:
        return holding[0]
    valid = ", ".join(repr(s.label) for s in sides)
    why = "names runs on several sides" if holding else "matches no run"
    raise CompareError(f"{flag} {label!r}: {why}; the labels here are {valid}")


def resolve_prices(sides: Sequence[Side], given: Sequence[tuple[str, float]]
                   ) -> dict[str, tuple[float, str]]:
    """Side label -> (USD per hour, where it came from). --price wins over a stored price."""
    out: dict[str, tuple[float, str]] = {}
    for s in sides:
        stored = [p for p in (cost.price_of(r) for r in s.runs) if p is not None]
        if stored:
            how = "stored in the run" if len(s.runs) == 1 else "stored in the runs"
            if len(set(stored)) > 1:
                how = (f"the median of the runs' stored prices "
                       f"({', '.join(f'${p:g}' for p in stored)})")
            out[s.label] = (statistics.median(stored), how)
    for label, price in given:
        out[find_side(sides, label, "--price").label] = (price, "--price")
    return out


def _equivalent(a: Side, b: Side) -> bool:
    """Same GPU (or CPU) model and the same number of GPUs: one could stand for the other."""
    def count(s: Side) -> set[int]:
        return {gpu_count(r.environment) for r in s.runs}
    return a.hardware == b.hardware and count(a) == count(b)


def _rank_key(entry: dict[str, Any]) -> tuple[int, float]:
    c = entry.get("costs") or {}
    ref, tok = c.get("reference_job"), c.get("token_job")
    if ref:
        return 0, ref["usd"]
    if tok:
        return 1, tok["usd"]
    return 2, 0.0


def section(comp: Comparison, given_prices: Sequence[tuple[str, float]] = (),
            job_tokens: int = cost.DEFAULT_JOB_TOKENS,
            buy: Sequence[tuple[str, float]] = (), power_watts: float | None = None,
            usd_per_kwh: float = 0.15, years: float = 3.0, ops_usd_per_year: float = 0.0,
            utilization: float = 0.7) -> dict[str, Any]:
    """The cost part of a comparison: per side, the ranking by cost per job, buy vs rent."""
    prices = resolve_prices(comp.sides, given_prices)
    per_side = []
    for s in comp.sides:
        entry: dict[str, Any] = {"label": s.label, "usd_per_hour": None, "price_from": None,
                                 "costs": None}
        if s.label in prices:
            usd, how = prices[s.label]
            entry.update(usd_per_hour=usd, price_from=how,
                         costs=cost.run_costs(s.run or s.runs[0], s.verdict, usd, job_tokens))
        per_side.append(entry)
    # Cheapest reference job (ResNet50 on ImageNet) first, then the token job, then unpriced.
    ranked = sorted((e for e in per_side if e["costs"] and _rank_key(e)[0] < 2), key=_rank_key)
    out: dict[str, Any] = {"sides": per_side, "ranking": [e["label"] for e in ranked],
                           "job_tokens": job_tokens, "buy": []}
    for label, purchase in buy:
        out["buy"].append(_buy(comp, prices, find_side(comp.sides, label, "--buy"), purchase,
                               power_watts, usd_per_kwh, years, ops_usd_per_year, utilization))
    return out


def _buy(comp: Comparison, prices: dict[str, tuple[float, str]], side: Side, purchase: float,
         power_watts: float | None, usd_per_kwh: float, years: float, ops: float,
         utilization: float) -> dict[str, Any]:
    entry: dict[str, Any] = {"label": side.label, "purchase_usd": purchase}
    if power_watts is not None:
        watts, how = power_watts, "--power-watts"
    else:
        watts, how = cost.power_under_load(side.run or side.runs[0])
    entry.update(power_watts=watts, power_how=how)
    if side.label in prices:
        cloud, against = prices[side.label][0], f"{side.label}'s own price"
    else:
        priced = [s for s in comp.sides if s.label in prices and _equivalent(s, side)]
        if not priced:
            entry["missing"] = (f"no cloud price to hold it against: {side.label} has none and "
                                "no priced run has the same hardware; give --price "
                                f"{side.label}=USD_PER_HOUR")
            return entry
        best = min(priced, key=lambda s: prices[s.label][0])
        cloud = prices[best.label][0]
        against = (f"the cheapest priced run with the same hardware, {best.label} "
                   f"({best.hardware})")
    try:
        result = cost.buy_vs_rent(purchase, cloud, power_watts=watts, usd_per_kwh=usd_per_kwh,
                                  years=years, ops_usd_per_year=ops, utilization=utilization)
    except ValueError as exc:
        raise CompareError(f"--buy {side.label}: {exc}") from None
    entry.update(result=result, cloud_from=against)
    costs = cost.run_costs(side.run or side.runs[0], side.verdict,
                           result["owned_usd_per_useful_hour"])
    ref = costs.get("reference_job")
    if ref:
        entry["owned_reference_job_usd"] = ref["usd"]
        entry["reference_job"] = ref["what"]
    return entry
