"""compare holds like with like: sides that ran under other conditions (--quick, another image
size, precision, time budget) are flagged above the first table, their rows marked ≠ and given
no regression verdict, and the marks are explained before any table uses them."""

import csv
import dataclasses

from test_compare import build, make_run, run_cli, save

from benchbench.analysis import regression
from benchbench.reports import compare_md


def with_(run, quick=None, budget=None, **params):
    """The run with its mode, time budget and probes' parameters set ({probe: {field: v}})."""
    config = dict(run.config, quick=run.config.get("quick") if quick is None else quick,
                  time_budget=budget)
    probes = [dataclasses.replace(p, params={**p.params, **params.get(p.name, {})})
              for p in run.probes]
    return dataclasses.replace(run, config=config, probes=probes)


RESNET = {"resnet50": {"image_size": 224, "precisions": ["fp32"], "batch_size": 16}}
MATMUL = {"matmul": {"sizes": [256, 512], "dtypes": ["fp32"]}}


def first_table(text):
    return text.index("\n| ")


def test_a_quick_side_is_flagged_above_the_first_table_and_gets_no_verdict(tmp_path, capsys):
    full = save(tmp_path, "full", with_(make_run("full"), quick=False, **RESNET, **MATMUL))
    # 20% slower everywhere: against a like side this exits 3 with four regressions.
    quick = save(tmp_path, "quick", with_(make_run("quick", factor=0.8), quick=True, **RESNET,
                                          **MATMUL))
    code, out, _ = run_cli(capsys, "compare", full, quick)
    assert code == 0 and "**No regression** (exit 0)" in out and "## Regressions" not in out
    assert out.index("## Conditions") < first_table(out)
    assert ("**Not like for like**: full and quick differ in mode: the rows these touch are "
            "marked ≠ and get no regression verdict.") in out
    assert "| **≠ mode** | **full** | **--quick** |" in out
    assert "| time budget | auto | auto |" in out
    # The marks are explained before the first table that uses them, ≠ among them.
    legend = out.index("Marks in the tables below: ▼ regressed")
    assert legend < out.index("## Headline figures") and legend < out.index("## Measurements")
    assert "– not tested" in out[:legend + 600] and "≠ not like for like" in out[:legend + 600]
    assert "| resnet50 fp32 224px | 20.0 images/s | 16.0 images/s · 0.80× ≠ |" in out
    # The verdicts' capacities come from those figures: marked too.
    assert "| capacity: CPU compute | 20.0 images/s | 16.0 images/s ≠ |" in out
    assert "; 5 not like for like (≠: measured under other conditions" in out
    assert "Not tested: 5 × not like for like (≠, see Conditions)." in out


def test_rows_of_a_probe_whose_conditions_differ_are_not_like_for_like():
    base = with_(make_run("a"), **RESNET, **MATMUL)
    other = with_(make_run("b", factor=0.8),
                  resnet50={"image_size": 224, "precisions": ["fp32", "amp_bf16"],
                            "batch_size": 16},
                  matmul={"sizes": [256, 512, 1024], "dtypes": ["fp32"]},
                  memory_bandwidth={"--unknown": 1})
    comp = build(base, other)
    by = {(r.probe, r.metric, r.key.get("size")): r.cells["b"] for r in comp.rows}
    # The fp32 row is in both sides' precisions, and each size in both sides' sizes: decided.
    for k in (("resnet50", "throughput", None), ("matmul", "flops", 256),
              ("matmul", "flops", 512)):
        assert by[k].unlike is None and by[k].decision.outcome == regression.REGRESSED, k
    # A peak over other sizes is another figure: a ratio, no verdict, and says why.
    peak = by[("matmul", "peak_flops", None)]
    assert peak.decision.outcome == regression.NOT_TESTED and peak.decision.ratio == 0.8
    assert peak.unlike == peak.decision.reason == (
        "not like for like: sizes 256, 512 / 256, 512, 1024")
    # A parameter that is no condition (a fact a probe found) does not make a row unlike.
    assert by[("memory_bandwidth", "copy_bandwidth", None)].unlike is None
    text = compare_md.render(comp)
    assert "| **≠ matrix multiply: sizes** | **256, 512** | **256, 512, 1024** |" in text
    assert "| **≠ ResNet50 training: precisions** | **fp32** | **fp32, amp_bf16** |" in text
    assert "| peak_flops | device=cpu, dtype=fp32 | 100 GFLOP/s | 80.0 GFLOP/s · 0.80× ≠ |" \
        in text


def test_another_image_size_or_time_budget_or_set_value_is_flagged():
    a = with_(make_run("a"), **RESNET)
    b = with_(make_run("b"), budget=30.0,
              resnet50={"image_size": 64, "precisions": ["fp32"], "batch_size": 16})
    b.config["overrides"] = {"resnet50": {"image_size": 64}}
    comp = build(a, b)
    found = {c.title: c for c in comp.unlike}
    assert found["time budget"].values == {"a": "auto", "b": "30 s a probe"}
    assert found["ResNet50 training: image size"].values == {"a": "224 px", "b": "64 px"}
    assert found["ResNet50 training: --set and config-file values"].values == {
        "a": "none", "b": "image_size=64 px"}
    # A time budget is every probe's condition: no row of b gets a verdict.
    assert all(c.unlike and c.decision.outcome == regression.NOT_TESTED
               for r in comp.rows for lab, c in r.cells.items() if lab == "b")


def test_like_sides_say_so_and_keep_their_verdicts(tmp_path, capsys):
    a = save(tmp_path, "a", with_(make_run("before"), quick=True, **RESNET))
    b = save(tmp_path, "b", with_(make_run("after", factor=0.8), quick=True, **RESNET))
    out_dir = tmp_path / "out"
    code, out, _ = run_cli(capsys, "compare", a, b, "--out", out_dir)
    assert code == 3 and "**4 regressions** (exit 3)" in out
    assert "The sides ran under the same recorded conditions: like for like." in out
    assert "≠ " not in out.split("## Conditions")[1].split("Marks in")[0]
    assert "Not like for like" not in (out_dir / "compare.html").read_text()


def test_compare_html_and_csv_carry_the_conditions(tmp_path, capsys):
    a = save(tmp_path, "a", with_(make_run("full"), quick=False))
    b = save(tmp_path, "b", with_(make_run("quick", factor=0.8), quick=True))
    out_dir = tmp_path / "out"
    run_cli(capsys, "compare", a, b, "--out", out_dir)
    page = (out_dir / "compare.html").read_text()
    banner = page[:page.index("</section>")]
    assert "<strong>Not like for like</strong>: full and quick differ in mode" in banner
    assert page.index("Conditions") < page.index("<table")
    with open(out_dir / "compare.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["side"] == "quick"]
    assert rows and all(r["conditions_differ"] == "not like for like: mode full / --quick"
                        and r["outcome"] == "not tested" for r in rows)


def test_unlike_skips_the_key_fields_the_row_matched_on():
    from benchbench.compare import conditions

    a = with_(make_run("a"), resnet50={"image_size": 224, "precision": "fp32"})
    b = with_(make_run("b"), resnet50={"image_size": 224, "precision": "amp_bf16"})
    comp = build(a, b)
    (c,) = comp.unlike
    assert conditions.unlike(comp.conditions, "resnet50", {"precision": "fp32"}, "b", "a") == []
    assert conditions.unlike(comp.conditions, "resnet50", {}, "b", "a") == [c]
