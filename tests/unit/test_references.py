"""Published references: the table's schema and citations, the GPU-name match, each headline
figure as a share of its reference (or why not), the health flag, and the two renderers."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import render_md, verdict_dict

from benchbench.analysis import reference_check as rc
from benchbench.analysis import references as refs
from benchbench.core.results import UNITS, Measurement, ProbeResult, RunResult
from benchbench.doctor.checks import Check
from benchbench.reports import compare_references

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

H100 = "NVIDIA H100 80GB HBM3"


def raw_rows() -> list[dict]:
    text = resources.files("benchbench.analysis").joinpath("references.toml").read_text("utf-8")
    return tomllib.loads(text)["reference"]


# --- the table ----------------------------------------------------------------------------------

def test_every_row_has_a_figure_a_unit_a_source_and_conditions():
    rows = raw_rows()
    assert len(rows) >= 60
    for n, r in enumerate(rows, 1):
        where = f"row {n}: {r.get('gpu')} {r.get('metric')}"
        assert r["gpu"].strip(), where
        assert r["metric"] in refs.METRICS, where
        assert r["precision"] == "n/a" or r["precision"] in refs.PRECISIONS, where
        assert 0 < r["low"] <= r["high"], where
        assert r["unit"] in UNITS and r["unit"] == refs.METRICS[r["metric"]], where
        for field in ("publisher", "document", "date", "quote"):
            assert str(r["source"].get(field) or "").strip(), f"{where}: no source {field}"
        c = r["conditions"]
        assert isinstance(c.get("gpus"), int) and c["gpus"] >= 1, where
        assert str(c.get("software") or "").strip() and c.get("data"), where


def test_loader_reads_every_row_and_keeps_peaks_apart():
    loaded = refs.load()
    assert len(loaded) == len(raw_rows())
    assert loaded is not refs.load()  # a fresh list: callers cannot change the cached table
    mem = next(r for r in loaded if r.metric == "memory_copy_bandwidth")
    assert mem.precision is None and mem.conditions["counting"] == "read+write"
    # A reference sits under the datasheet ceiling: H100 SXM bf16 matmul < 989.5 TFLOP/s.
    assert all(r.high < 989.5e12 for r in refs.match(H100, "matmul_flops", "bf16"))


@pytest.mark.parametrize("row, problem", [
    ({"low": 2.0, "high": 1.0}, "low <= high"),
    ({"unit": "GB/s"}, "metric"),
    ({"precision": "fp4"}, "precision"),
    ({"source": {"publisher": "x", "document": "y", "date": "2024"}}, "source"),
    ({"conditions": {}}, "conditions"),
])
def test_loader_refuses_a_bad_row(row, problem):
    good = raw_rows()[0]
    with pytest.raises(ValueError, match=problem):
        refs._reference({**good, **row}, 1)


def test_the_table_ships_as_package_data():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["benchbench.analysis"]
    assert "references.toml" in data


@pytest.mark.parametrize("name, models", [
    (H100, ["H100 SXM"]),
    ("NVIDIA H200", ["H200 SXM"]),
    ("NVIDIA A100-SXM4-80GB", ["A100 80GB SXM", "A100 SXM"]),
    ("NVIDIA A100-PCIE-40GB", ["A100 40GB PCIe", "A100 PCIe"]),
    ("NVIDIA L4", ["L4"]),
    ("NVIDIA L40S", ["L40S"]),
    ("Tesla T4", ["T4"]),
    ("NVIDIA GeForce RTX 4090", ["GeForce RTX 4090"]),
    ("NVIDIA B200", ["B200"]),  # not in the datasheet table: found by its name
    ("NVIDIA H100 PCIe", ["H100 PCIe"]),
    (None, []),
    ("cuda:0", []),
])
def test_gpu_names_map_to_the_tables_models(name, models):
    assert refs.models(name) == models


def test_match_filters_by_gpu_metric_and_precision():
    got = refs.match("NVIDIA A100-SXM4-80GB", "matmul_flops", "bf16")
    assert {r.gpu for r in got} == {"A100 80GB SXM", "A100 SXM"}
    assert {r.precision for r in got} == {"bf16"}
    assert refs.match("NVIDIA A100-SXM4-80GB", "matmul_flops", "fp32") == []
    assert {r.precision for r in refs.match("NVIDIA GeForce RTX 4090", "matmul_flops")} == {
        "bf16", "fp16", "fp32", "tf32"}
    assert refs.match("NVIDIA H200 NVL", "allreduce_busbw") == []  # NVL is not SXM
    assert refs.match("NVIDIA A10", "matmul_flops", "bf16") == []


# --- hand-built runs ----------------------------------------------------------------------------

def m(metric, key, value, unit, statistic="median", **context):
    return Measurement(metric=metric, key=key, value=value, unit=unit, statistic=statistic,
                       samples=[value] * 3, higher_is_better=True, context=context)


def probe(name, *ms, resource="gpu_compute"):
    return ProbeResult(name=name, status="ok", resource=resource, measurements=list(ms))


def run_of(*probes, gpu=H100, gpus=1, extra=None, **env) -> RunResult:
    records = [{"index": i, "name": gpu, "other_processes": []} for i in range(gpus)] if gpu \
        else []
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at="2026-11-30",
                     environment={"host": {"hostname": "box"}, "gpus": records, **env},
                     config={"device_resolved": "cuda" if gpu else "cpu"}, argv=[],
                     probes=list(probes), extra=extra or {})


def resnet(value, precision="amp_fp16", batch=256, image=224, device="cuda:0"):
    key = {"device": device, "precision": precision, "image_size": image, "batch_size": batch}
    return probe("resnet50", m("throughput", key, value, "samples/s", "total_over_time",
                               batch=batch))


def matmul(*values, dtype="bf16"):
    return probe("matmul", *[m("peak_flops", {"device": f"cuda:{i}", "dtype": dtype}, v,
                               "FLOP/s", "max") for i, v in enumerate(values)])


def allreduce(busbw, world=8, nodes=1, **nccl):
    key = {"backend": "nccl", "dtype": "float32", "world_size": world, "nodes": nodes}
    sized = {**key, "size_bytes": 2**30}
    return probe("allreduce", m("allreduce_time", sized, 0.01, "s", nccl=nccl),
                 m("algbw", sized, busbw * world / (2 * (world - 1)), "B/s", nccl=nccl),
                 m("busbw", sized, busbw, "B/s", nccl=nccl),
                 m("peak_busbw", key, busbw, "B/s", "max"), resource="interconnect")


def one(run: RunResult, name: str) -> rc.Row:
    return next(r for r in rc.rows(run) if r.figure.name == name)


def test_matching_conditions_give_the_share_of_the_published_range():
    r = one(run_of(resnet(2512.0)), "ResNet50 amp_fp16")
    assert r.text == ("90–96% of the published 2,616–2,791 img/s (Lambda, H100 SXM, amp_fp16, "
                      "224 px, batch not stated, 1 GPU, synthetic data)")
    assert rc.stated(r.figure) == "amp_fp16, 224 px, batch 256, 1 GPU"
    assert r.matched[0].fractions(2512.0) == (2512.0 / 2791.0, 2512.0 / 2616.0)
    mem = probe("memory_bandwidth", m("copy_bandwidth", {"memory": "cuda:0", "size_bytes": 2**32},
                                      2.3e12, "B/s"), resource="gpu_memory")
    assert one(run_of(mem), "GPU memory copy").text.startswith(
        "91–93% of the published 2.47–2.51 TB/s (GitHub issue NVIDIA/nccl #1264")


def test_a_condition_that_differs_is_named_instead_of_a_share():
    assert one(run_of(resnet(2512.0, "amp_bf16")), "ResNet50 amp_bf16").text == (
        "not compared: amp_bf16 here, amp_fp16 in the closest published figure (2,616–2,791 "
        "img/s: Lambda, H100 SXM, amp_fp16, 224 px, batch not stated, 1 GPU, synthetic data)")
    # A quick run's 64 px against ResNet-50's published 224 px: no share, both sizes said.
    small = one(run_of(resnet(9000.0, image=64)), "ResNet50 amp_fp16")
    assert small.text.startswith("not compared: 64 px here, 224 px in the closest published "
                                 "figure (2,616–2,791 img/s: Lambda, H100 SXM")
    assert not small.matched and "%" not in small.text
    assert not rc.health(run_of(resnet(9000.0, image=64))).flagged
    a100 = one(run_of(resnet(2300.0), gpu="NVIDIA A100-SXM4-80GB"), "ResNet50 amp_fp16")
    # DLE's and MXNet's 1-GPU batch-256 rows match; Lambda's batch 1280 and DLE's 8-GPU do not.
    assert [h.reference.low for h in a100.matched] == [2470.0, 2180.0]
    assert any(rc.Differs("batch", 1280, 256) in h.differs for h in a100.held)
    assert any(rc.Differs("gpus", 8, 1) in h.differs for h in a100.held)
    assert a100.text.startswith("93% of the published 2,470 img/s (NVIDIA, A100 80GB SXM")
    h2d = probe("host_device_copy", m("peak_bandwidth", {"device": "cuda:0", "direction": "h2d",
                                                         "memory": "pinned"}, 30e9, "B/s", "max"),
                resource="host_device_link")
    assert one(run_of(h2d), "pinned h2d copy").text.startswith(
        "not compared: copy engine here, SM kernel in the closest published figure")


def test_allreduce_is_held_against_the_algorithm_nccl_used():
    unknown = one(run_of(allreduce(455e9), gpus=8), "all-reduce busbw, 8 ranks")
    assert [h.reference.low for h in unknown.matched] == [480e9, 370e9]  # NVLS and Ring
    nvls = one(run_of(allreduce(455e9, nvls_used=True), gpus=8), "all-reduce busbw, 8 ranks")
    assert nvls.text.startswith("95% of the published 480 GB/s (NVIDIA (NCCL maintainer")
    assert nvls.held[1].differs == (rc.Differs("algorithm", "Ring", "NVLS"),)
    four = one(run_of(allreduce(300e9, world=4), gpus=4), "all-reduce busbw, 4 ranks")
    assert four.text.startswith("not compared: 4 GPUs here, 8 GPUs in the closest published")


def test_no_published_reference_for_this_gpu_or_a_cpu():
    assert one(run_of(matmul(700e12, dtype="fp32")), "matmul fp32").text == \
        f"no published reference for this GPU ({H100}, fp32)"
    assert one(run_of(matmul(300e12), gpu="NVIDIA H100 PCIe"), "matmul bf16").text == \
        "no published reference for this GPU (NVIDIA H100 PCIe, bf16)"
    cpu = run_of(resnet(30.0, "fp32", batch=8, image=64, device="cpu"),
                 probe("matmul", m("peak_flops", {"device": "cpu", "dtype": "fp32"}, 1e11,
                                   "FLOP/s", "max"), resource="cpu_compute"), gpu=None)
    assert {r.text for r in rc.rows(cpu)} == {"no published reference for a CPU"}
    assert rc.health(cpu) == (False, "Health: not judged: no published reference for a CPU.", [])


def test_several_gpus_give_their_slowest():
    (fig,) = rc.headline(run_of(matmul(790e12, 600e12, 785e12), gpus=3))
    assert (fig.device, fig.value, fig.of_gpus) == ("cuda:1", 600e12, 3)


# --- health -------------------------------------------------------------------------------------

def unhealthy(**env) -> RunResult:
    flags = {"resnet50": ["GPU 0 power-capped during 35% of the probe"],
             "storage": ["not a cause: storage measured nothing low"]}
    run = run_of(resnet(1500.0), matmul(500e12), allreduce(460e9), gpus=8,
                 extra={"telemetry": {"flags": flags}}, **env)
    run.environment["gpus"][0].update(other_processes=[{"pid": 4242}],
                                      mig_mode={"current": True, "pending": True},
                                      virtualization_mode="vGPU guest")
    return run


def test_two_figures_under_85_percent_are_flagged_with_the_evidence():
    checks = [Check("PCIe link", "fail", "GPU 0: Gen4 x8 of Gen5 x16 under load", "", ""),
              Check("clock throttling", "pass", "none", "", ""),
              Check("other GPU processes", "fail", "GPU 0: pid 4242", "", "")]
    flagged, line, causes = rc.health(
        unhealthy(virtualisation={"kind": "vm", "hypervisor": "KVM"}), checks)
    assert flagged
    # 63.8%: against the lowest matched figure, the community database's 783.66 TFLOP/s.
    assert line == ("⚠ Health: 2 of 3 headline figures are under 85% of the lower published "
                    "figure by more than 5 points: ResNet50 amp_fp16 at 57.3%, matmul bf16 at "
                    "63.8%. Likely "
                    "causes in this run's evidence (listed after this line):")
    assert causes == [
        "telemetry during resnet50: GPU 0 power-capped during 35% of the probe",
        "doctor, PCIe link (fail): GPU 0: Gen4 x8 of Gen5 x16 under load",
        "GPU 0 was shared with 1 other process (pid 4242)",
        "GPU 0 is in MIG mode: the run measured a slice, not the whole GPU",
        "GPU 0 is a vGPU (vGPU guest): other VMs share it",
        "the host is a virtual machine (KVM): prefer passthrough or bare metal",
    ]


def test_health_without_evidence_or_with_one_low_figure():
    bare = run_of(resnet(1500.0), matmul(500e12), gpus=1, virtualisation={"kind": "bare metal"})
    flagged, line, causes = rc.health(bare)
    assert flagged and causes == [] and "No cause found in this run's evidence" in line
    flagged, line, _ = rc.health(run_of(resnet(1500.0), matmul(790e12)))
    assert not flagged and "one is under 85%" in line and "ResNet50 amp_fp16 at 57.3%" in line
    flagged, line, _ = rc.health(run_of(resnet(2700.0), matmul(790e12)))
    assert not flagged and line.endswith("and none is under 85% of the lower published "
                                         "figure by more than 5 points.")


# --- renderers ----------------------------------------------------------------------------------

def test_report_opens_with_the_health_line_after_the_verdict():
    md = render_md(unhealthy())
    section = md[md.index("## Published references"):md.index("## Environment")]
    assert md.index("## Verdict") < md.index("## Published references")
    assert "⚠ Health: 2 of 3 headline figures" in section
    assert "- GPU 0 was shared with 1 other process (pid 4242)" in section
    assert ("| ResNet50 fp16 mixed precision (cuda:0) | 1,500 img/s (fp16 mixed precision, 224 "
            "px, batch 256, 1 GPU) | 2,616–2,791 img/s | H100 SXM, fp16 mixed precision, 224 px, "
            "batch not stated, 1 GPU, synthetic data | [Lambda](https://github.com/" in section)
    assert "| 54–57%; under the health line (57.3% of the lower published figure) |" in section


def test_the_verdict_carries_the_health_line():
    """The verdict itself says whether this is a healthy machine of its model (its own
    evidence; the references section adds the doctor's), and a healthy-or-unjudged run's
    references section does not repeat it."""
    md = render_md(unhealthy())
    verdict = md[md.index("## Verdict"):md.index("## Published references")]
    assert "⚠ Health: 2 of 3 headline figures" in verdict
    assert "- GPU 0 is in MIG mode: the run measured a slice, not the whole GPU" in verdict
    assert verdict_dict(unhealthy())["health"].startswith("⚠ Health: 2 of 3")
    fine = render_md(run_of(resnet(2700.0), matmul(790e12)))
    assert fine.count("Health: ") == 1
    assert fine.index("Health: ") < fine.index("## Published references")


def test_compare_shows_each_side_against_its_reference():
    sides = [SimpleNamespace(label="old", run=run_of(resnet(2700.0))),
             SimpleNamespace(label="new", run=run_of(resnet(1500.0), matmul(500e12))),
             SimpleNamespace(label="gone", run=None)]
    out = "\n".join(compare_references.section(SimpleNamespace(sides=sides)))
    assert "| figure | old | new |" in out
    lambda_h100 = "Lambda, H100 SXM, amp_fp16, 224 px, batch not stated, 1 GPU, synthetic data"
    assert (f"| ResNet50 amp_fp16 | 2,700 img/s (amp_fp16, 224 px, batch 256, 1 GPU): 97–103% "
            f"of {lambda_h100} | 1,500 img/s (amp_fp16, 224 px, batch 256, 1 GPU): 54–57% of "
            f"{lambda_h100} |") in out
    assert "| matmul bf16 | — | 500 TFLOP/s (1 GPU): 63% of Stas Bekman" in out
    assert "- new: ⚠ Health: 2 of 2 headline figures" in out


def test_compare_marks_a_figure_measured_under_other_conditions():
    sides = [SimpleNamespace(label="full", run=run_of(resnet(2700.0))),
             SimpleNamespace(label="quick", run=run_of(resnet(9000.0, image=64)))]
    out = "\n".join(compare_references.section(SimpleNamespace(sides=sides)))
    assert ("| ResNet50 amp_fp16 | 2,700 img/s (amp_fp16, 224 px, batch 256, 1 GPU): 97–103% of "
            "Lambda") in out
    assert ("| ≠ 9,000 img/s (amp_fp16, 64 px, batch 256, 1 GPU): not compared: 64 px here, "
            "224 px in the closest published figure") in out


def test_compare_md_carries_the_section():
    from test_compare import build, make_run

    from benchbench.reports import compare_md

    text = compare_md.render(build(make_run("a"), make_run("b", factor=0.9)))
    section = text[text.index("## Published references"):]
    assert "- a: Health: not judged: no published reference for a CPU." in section
    assert ("| ResNet50 fp32 | 20 img/s (fp32, 224 px, batch 16): no published reference for "
            "a CPU |") in section
