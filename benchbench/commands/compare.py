"""`benchbench compare`: runs side by side, the regression decision per measurement (exit 3
when one regressed), their verdicts, environments and costs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchbench.commands.common import UsageError, check_out_dir
from benchbench.core import results
from benchbench.engine.runner import EXIT_OK

EXIT_REGRESSION = 3  # compare: at least one measurement regressed


def main(args: argparse.Namespace) -> int:
    """Runs side by side with regression decisions (exit 3 when one regressed), their verdicts,
    environments and costs: Markdown on stdout; compare.md/.html/.csv only under --out."""
    import math
    import time

    from benchbench.analysis import cost
    from benchbench.compare import align, comparison
    from benchbench.compare import cost as compare_cost
    from benchbench.compare.sides import CompareError
    from benchbench.reports import compare_html, compare_md, compare_plots

    started = time.perf_counter()

    def check(name: str, value: float | None, ok: bool, what: str) -> None:
        if value is not None and not (math.isfinite(value) and ok):
            raise UsageError(f"{name} {value:g}: must be {what}")

    check("--threshold", args.threshold, args.threshold >= 0, "a percentage, 0 or more")
    check("--alpha", args.alpha, 0 < args.alpha < 1, "above 0 and below 1")
    check("--utilization", args.utilization, 0 < args.utilization <= 1,
          "a fraction above 0 and at most 1")
    check("--years", args.years, args.years > 0, "positive")
    check("--usd-per-kwh", args.usd_per_kwh, args.usd_per_kwh >= 0, "0 or more")
    check("--ops-usd-per-year", args.ops_usd_per_year, args.ops_usd_per_year >= 0, "0 or more")
    check("--power-watts", args.power_watts, (args.power_watts or 0) > 0, "positive")
    if args.tokens is not None and args.tokens <= 0:
        raise UsageError(f"--tokens {args.tokens}: must be a positive number of tokens")
    try:
        prices = compare_cost.parse_assignments(args.price, "--price")
        buys = compare_cost.parse_assignments(args.buy, "--buy")
        out = Path(args.out) if args.out else None
        if out is not None:
            check_out_dir(out)
        sides = align.make_sides(args.runs, args.baseline or [])
        comp = comparison.compare(sides, threshold_pct=args.threshold, alpha=args.alpha,
                           workload=args.workload)
        if prices or buys or any(cost.price_of(r) is not None
                                 for s in sides for r in s.runs):
            extra = {"job_tokens": args.tokens} if args.tokens else {}
            comp.cost = compare_cost.section(
                comp, prices, buy=buys, power_watts=args.power_watts,
                usd_per_kwh=args.usd_per_kwh, years=args.years,
                ops_usd_per_year=args.ops_usd_per_year, utilization=args.utilization, **extra)
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    md = compare_md.render(comp)
    md = md if md.endswith("\n") else md + "\n"
    print(md, end="")
    if out is not None:
        notes: list[str] = []
        figures = compare_plots.make(comp, notes)
        try:
            out.mkdir(parents=True, exist_ok=True)
            results.write_atomic(out / "compare.md", md)
            results.write_atomic(out / "compare.html",
                                 compare_html.render(comp, md, figures, notes))
            compare_md.write_csv(comp, out / "compare.csv")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write: {exc.strerror}") from None
        for name in ("compare.md", "compare.html", "compare.csv"):
            print(f"written: {out / name}", file=sys.stderr)
    print(f"compared {sum(len(s.runs) for s in comp.sides)} run(s) in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return EXIT_REGRESSION if comp.regressed else EXIT_OK
