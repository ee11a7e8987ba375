"""compare.md's "Cost" section: each priced side's cost per job, per million images and per
billion tokens, the ranking, and buy-against-rent (compare/cost.py computes them)."""

from __future__ import annotations

from typing import Any

from benchbench.compare.comparison import Comparison
from benchbench.core import units as fmt


def _money(x: Any) -> str:
    return f"${x:,.2f}" if isinstance(x, (int, float)) else "—"


def _params(per_usd_hour: float | None) -> str:
    """The largest model one device fine-tunes, per $/h: parameters in billions or millions."""
    if not per_usd_hour:
        return "—"
    return f"{per_usd_hour / 1e9:,.2f}B parameters" if per_usd_hour >= 1e9 else \
        f"{per_usd_hour / 1e6:,.0f}M parameters"


def section(comp: Comparison) -> list[str]:
    c = comp.cost
    if not c:
        return []
    out = ["## Cost", ""]
    priced = [e for e in c["sides"] if e["costs"]]
    if not priced:
        out += ["No prices: give `--price LABEL=USD_PER_HOUR`, or run with `--price-per-hour`.",
                ""]
    else:
        rows = []
        for e in priced:
            k = e["costs"]
            ref, tok = k.get("reference_job") or {}, k.get("token_job") or {}
            rows.append([e["label"] + ("" if k.get("representative") else " ⚠"),
                         f"{_money(e['usd_per_hour'])}/h ({e['price_from']})",
                         _money(k.get("usd_per_million_images")),
                         _money(k.get("usd_per_billion_tokens")),
                         f"{ref['hours']:,.1f} h, {_money(ref['usd'])}" if ref else "—",
                         f"{tok['hours']:,.1f} h, {_money(tok['usd'])}" if tok else "—",
                         fmt.figure(k["images_per_kwh"]) if k.get("images_per_kwh") else "—"])
        what = next((e["costs"]["reference_job"]["what"] for e in priced
                     if e["costs"].get("reference_job")), "the reference job")
        out += fmt.table(["side", "price", "$ / 1M images", "$ / 1B tokens",
                          f"reference job ({what})",
                          f"token job ({c['job_tokens']:,} tokens)", "images / kWh"], rows)
        if c["ranking"]:
            out += ["Cheapest per job first: " + " < ".join(c["ranking"]) + ".", ""]
        if any(not e["costs"].get("representative") for e in priced):
            out += ["⚠ not representative of real training (a --quick run, or images not at "
                    "224 px): its costs are shown for completeness, not for a decision.", ""]
        for e in priced:
            k = e["costs"]
            per = [f"{x:,.0f} {u}/s" if x >= 100 else f"{x:.3g} {u}/s"
                   for x, u in ((k.get("images_per_s_per_usd_hour"), "images"),
                                (k.get("tokens_per_s_per_usd_hour"), "tokens"))
                   if isinstance(x, (int, float))]
            per_usd = f"{' and '.join(per)} per $/h; " if per else ""
            out.append(f"- **{e['label']}**: {per_usd}images on {k['basis']['images']}; tokens "
                       f"on {k['basis']['tokens']}; images / kWh: "
                       f"{k.get('images_per_kwh_basis') or 'not recorded'}.")
            if k.get("usd_per_million_inferences") or k.get("params_per_usd_hour"):
                out.append(f"  - serving: {_money(k.get('usd_per_million_inferences'))} per "
                           f"million inferences ({k.get('inferences_basis')}); fine-tuning: "
                           f"{_params(k.get('params_per_usd_hour'))} per $/h "
                           f"({k.get('largest_model_basis')})")
            out += [f"  - {cv}" for cv in k.get("caveats") or []]
        out.append("")
    unpriced = [e["label"] for e in c["sides"] if not e["costs"]]
    if unpriced and priced:
        out += [f"No price for {', '.join(unpriced)}.", ""]
    for b in c.get("buy") or []:
        out += _buy_lines(b)
    return out


def _buy_lines(b: dict[str, Any]) -> list[str]:
    out = [f"### Buy {b['label']} for {_money(b['purchase_usd'])} or rent it", ""]
    if "missing" in b:
        return out + [b["missing"] + ".", ""]
    r = b["result"]
    ins = r["inputs"]
    be = r.get("break_even_utilization")
    rows = [["cloud price", f"{_money(r['cloud_usd_per_hour'])}/h ({b['cloud_from']})"],
            ["owned, per useful hour", f"{_money(r['owned_usd_per_useful_hour'])}/h at "
                                       f"{ins['utilization']:.0%} utilisation"],
            ["break-even utilisation", f"{be:.0%}" if be is not None else "never"],
            ["saving at that utilisation", fmt.percent(r["saving_at_utilization"])],
            [f"saving over {ins['years']:g} years", _money(r["saving_over_years_usd"])],
            ["power", f"{b['power_watts']:,.0f} W ({b['power_how']})"],
            ["energy", f"${ins['usd_per_kwh']:g}/kWh"],
            ["operations", f"{_money(ins['ops_usd_per_year'])}/year"]]
    if "owned_reference_job_usd" in b:
        rows.append([f"{b['reference_job']}, owned", _money(b["owned_reference_job_usd"])])
    return out + fmt.table(["", ""], rows) + [
        f"The buyer's guide claims: {r['guide_claim']}.", "", r["guide_check"], ""]
