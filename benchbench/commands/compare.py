"""`benchbench compare`: runs side by side, the regression decision per measurement (exit 3
when one regressed), their verdicts, environments and costs. Sides that ran under other
conditions (--quick, an image size, a time budget: compare/conditions.py) are flagged first,
and their rows get a ratio but no verdict."""

from __future__ import annotations

import argparse
import sys

from benchbench.commands.common import UsageError, check_number, outputs, publish
from benchbench.core.names import counted
from benchbench.engine.runner import EXIT_OK

EXIT_REGRESSION = 3  # compare: at least one measurement regressed


def main(args: argparse.Namespace) -> int:
    """Runs side by side with regression decisions (exit 3 when one regressed), their verdicts,
    environments and costs: Markdown on stdout; compare.md/.html/.csv only under --out."""
    import time

    from benchbench.analysis import cost, run_noise
    from benchbench.analysis import regression as reg
    from benchbench.compare import align, comparison
    from benchbench.compare import cost as compare_cost
    from benchbench.compare.sides import CompareError
    from benchbench.reports import compare_html, compare_md, compare_plots, junit

    started = time.perf_counter()

    check_number("--threshold", args.threshold, args.threshold >= 0, "a percentage, 0 or more")
    check_number("--alpha", args.alpha, 0 < args.alpha < 1, "above 0 and below 1")
    check_number("--utilization", args.utilization, 0 < args.utilization <= 1,
                 "a fraction above 0 and at most 1")
    check_number("--years", args.years, args.years > 0, "positive")
    check_number("--usd-per-kwh", args.usd_per_kwh, args.usd_per_kwh >= 0, "0 or more")
    check_number("--ops-usd-per-year", args.ops_usd_per_year, args.ops_usd_per_year >= 0,
                 "0 or more")
    check_number("--power-watts", args.power_watts, (args.power_watts or 0) > 0, "positive")
    if args.tokens is not None and args.tokens <= 0:
        raise UsageError(f"--tokens {args.tokens}: must be a positive number of tokens")
    try:
        prices = compare_cost.parse_assignments(args.price, "--price")
        buys = compare_cost.parse_assignments(args.buy, "--buy")
        where = outputs(args)
        sides = align.make_sides(args.runs, args.baseline or [],
                                 getattr(args, "include_interrupted", False))
        comp = comparison.compare(sides, threshold_pct=args.threshold, alpha=args.alpha,
                           workload=args.workload)
        if prices or buys or any(cost.price_of(r) is not None
                                 for s in sides for r in s.runs):
            extra = {"job_tokens": args.tokens} if args.tokens else {}
            comp.cost = compare_cost.section(
                comp, prices, buy=buys, power_watts=args.power_watts,
                usd_per_kwh=args.usd_per_kwh, years=args.years,
                ops_usd_per_year=args.ops_usd_per_year, utilization=args.utilization, **extra)
    except (CompareError, run_noise.TableError) as exc:
        raise UsageError(str(exc)) from None
    md = compare_md.render(comp)
    publish(where, "compare", md if md.endswith("\n") else md + "\n",
            figures=lambda notes, progress: compare_plots.make(comp, notes, progress),
            html=lambda md, plots, notes: compare_html.render(comp, md, plots, notes),
            csv=lambda: compare_md.csv_text(comp),
            junit=lambda: junit.document("benchbench compare", junit.compare_cases(comp)))
    code = EXIT_REGRESSION if comp.regressed else EXIT_OK
    regs = len(comp.outcomes(reg.REGRESSED)) + len(comp.stopped)
    print(f"compared {counted(sum(len(s.runs) for s in comp.sides), 'run')} in "
          f"{time.perf_counter() - started:.1f} s: "
          + (f"{counted(regs, 'regression')} ({compare_md.named_briefly(comp)})" if code else
             "no regression") + f", exit {code}", file=sys.stderr)
    return code
