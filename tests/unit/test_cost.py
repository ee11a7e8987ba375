"""Cost per image and per token, the reference jobs, and buy against rent, on hand-built runs
whose every figure is worked out by hand in the comments."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_args

from benchbench.analysis import cost, verdict
from benchbench.analysis.verdict_types import Verdict
from benchbench.cli import build_parser
from benchbench.commands.common import UsageError, build_run_config
from benchbench.core import config, results
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.engine.catalog import default_registry
from benchbench.engine.runner import Runner

GiB = 2**30


def m(metric, key, value, unit="samples/s", context=None):
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic="median",
        samples=[value],
        higher_is_better=True,
        context=context or {},
    )


def r50(precision, size, value):
    return m("throughput", {"device": "cuda:0", "precision": precision, "image_size": size,
                            "batch_size": 256}, value)


def tf(precision, value):
    return m("throughput", {"device": "cuda:0", "precision": precision, "preset": "gpt2-124m",
                            "seq_len": 1024, "batch_size": 16}, value, "tokens/s")


def pipe(value, size=224, precision="amp_bf16"):
    return m("total_throughput", {"device": "cuda:0", "precision": precision,
                                  "image_size": size, "batch_size": 256,
                                  "loader": "dali", "workers": 8}, value)


def make_run(resnet=None, transformer=None, pipeline=None, gpus=8, device="cuda",
             quick=False, price=None, skipped=()):
    """A run with 8 GPUs by default: ResNet50 at 224 px 1,000 (fp32) and 3,000 (amp_bf16)
    images/s per GPU, plus 5,000 at 128 px that must not count; the transformer 100,000
    (fp32) and 250,000 (amp_bf16) tokens/s per GPU."""
    if resnet is None:
        resnet = [r50("fp32", 224, 1000.0), r50("amp_bf16", 224, 3000.0),
                  r50("amp_bf16", 128, 5000.0)]
    if transformer is None:
        transformer = [tf("fp32", 100_000.0), tf("amp_bf16", 250_000.0)]
    probes = []
    if resnet:
        probes.append(
            ProbeResult(name="resnet50", status="ok", resource="gpu_compute", measurements=resnet)
        )
    if transformer:
        probes.append(
            ProbeResult(
                name="transformer", status="ok", resource="gpu_compute", measurements=transformer
            )
        )
    if pipeline:
        probes.append(
            ProbeResult(
                name="pipeline", status="ok", resource="cpu_dataloading", measurements=pipeline
            )
        )
    for name in skipped:
        probes.append(
            ProbeResult(name=name, status="skipped", resource="gpu_compute", reason="no CUDA GPU")
        )
    env = {"host": {"cores_physical": 64, "cores_usable": 128},
           "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "power_limit": 700.0}
                    for i in range(gpus)]}
    run = RunResult(tool={"name": "benchbench", "version": "t"}, label="t",
                    started_at="2026-11-30T00:00:00+00:00", environment=env,
                    config={"device_resolved": device, "quick": quick, "overrides": {}},
                    argv=[], probes=probes)
    if price is not None:
        run.extra["cost"] = {"usd_per_hour": price}
    return run


def vd(limiting="gpu_compute", caps=None, tokens_limiting="gpu_compute", tokens_caps=None):
    """A verdict like verdict.verdict's: the primary one plus per_workload."""
    images = {"workload": "resnet50", "precision": "amp_bf16", "limiting_resource": limiting,
              "capacities": caps or {"gpu_compute": 24_000.0}}
    tokens = {"workload": "transformer", "precision": "amp_bf16",
              "limiting_resource": tokens_limiting,
              "capacities": tokens_caps or {"gpu_compute": 2_000_000.0}}
    return Verdict.from_dict({**images, "per_workload": {"resnet50": images,
                                                         "transformer": tokens}})


# -- throughput --------------------------------------------------------------------------------

def test_whole_machine_throughput_at_224_px_in_the_best_precision():
    t = cost.usable_throughput(make_run(), vd())
    # amp_bf16 beats fp32 at 224 px; the 5,000 at 128 px is not the real size: 3,000 × 8
    assert t["images_per_s"] == 24_000.0
    assert "amp_bf16 at 224 px" in t["images_basis"] and "× 8 GPUs" in t["images_basis"]
    assert t["images_basis"].startswith("synthetic")
    # 250,000 tokens/s × 8
    assert t["tokens_per_s"] == 2_000_000.0
    assert "gpt2-124m" in t["tokens_basis"]
    assert t["representative"] is True and t["caveats"] == []


def test_cpu_run_counts_one_device():
    run = make_run(resnet=[r50("fp32", 224, 20.0)], transformer=[tf("fp32", 2_500.0)],
                   device="cpu", gpus=0)
    t = cost.usable_throughput(run, vd("cpu_compute", {"cpu_compute": 20.0},
                                       "cpu_compute", {"cpu_compute": 2_500.0}))
    assert t["images_per_s"] == 20.0 and t["tokens_per_s"] == 2_500.0
    assert "× the CPU" in t["images_basis"]


def test_every_cost_figure_by_hand():
    c = cost.run_costs(make_run(), vd(), 20.0)
    assert c["usd_per_hour"] == 20.0
    # 24,000 images/s × 3,600 = 86.4 M images an hour; $20 / 86.4 = $0.23148 per million
    assert c["usd_per_million_images"] == pytest.approx(20 / 86.4)
    # 90 × 1,281,167 = 115,305,030 images; / 86,400,000 an hour = 1.334549 h; × $20 = $26.691
    ref = c["reference_job"]
    assert ref["what"] == "ResNet50, 90 epochs of ImageNet-1k"
    assert ref["images"] == 115_305_030
    assert ref["hours"] == pytest.approx(1.3345489583)
    assert ref["usd"] == pytest.approx(26.690979167)
    # 2,000,000 tokens/s × 3,600 = 7.2 G tokens an hour; $20 / 7.2 = $2.7778 per billion
    assert c["usd_per_billion_tokens"] == pytest.approx(20 / 7.2)
    # 10 G tokens / 2 M tokens/s = 5,000 s = 1.3889 h; × $20 = $27.778
    assert c["token_job"] == {"tokens": 10_000_000_000, "hours": pytest.approx(5000 / 3600),
                              "usd": pytest.approx(5000 / 3600 * 20)}
    # 24,000 / 20 = 1,200 images/s per $/h; 2,000,000 / 20 = 100,000 tokens/s per $/h
    assert c["images_per_s_per_usd_hour"] == 1_200.0
    assert c["tokens_per_s_per_usd_hour"] == 100_000.0
    assert c["basis"]["images"].startswith("synthetic") and c["representative"] is True


def test_the_token_job_size_is_the_users():
    c = cost.run_costs(make_run(), vd(), 20.0, job_tokens=1_000_000_000)
    # 1 G tokens / 2 M tokens/s = 500 s = 0.13889 h; × $20 = $2.7778
    assert c["token_job"]["tokens"] == 1_000_000_000
    assert c["token_job"]["hours"] == pytest.approx(500 / 3600)
    assert c["token_job"]["usd"] == pytest.approx(500 / 3600 * 20)


def test_input_bound_costs_the_verdicts_bottleneck():
    t = cost.usable_throughput(make_run(), vd("storage", {"gpu_compute": 24_000.0,
                                                          "storage": 9_000.0}))
    assert t["images_per_s"] == 9_000.0  # not the synthetic 24,000
    assert t["images_basis"].startswith("end to end") and "storage" in t["images_basis"]
    assert "24,000" in t["images_basis"]
    c = cost.run_costs(make_run(), vd("storage", {"storage": 9_000.0}), 20.0)
    # 9,000 × 3,600 = 32.4 M images an hour: $20 / 32.4 = $0.61728 per million
    assert c["usd_per_million_images"] == pytest.approx(20 / 32.4)


def test_input_bound_takes_the_pipeline_when_it_is_lower():
    caps = {"gpu_compute": 24_000.0, "cpu_dataloading": 9_000.0}
    # the pipeline trained 1,000 images/s per GPU from real data: 1,000 × 8 = 8,000 < 9,000
    t = cost.usable_throughput(make_run(pipeline=[pipe(1_000.0)]), vd("cpu_dataloading", caps))
    assert t["images_per_s"] == 8_000.0
    assert "pipeline probe" in t["images_basis"] and "cpu_dataloading" in t["images_basis"]
    # 2,000 × 8 = 16,000 > 9,000: the verdict's capacity is the lower one
    t = cost.usable_throughput(make_run(pipeline=[pipe(2_000.0)]), vd("cpu_dataloading", caps))
    assert t["images_per_s"] == 9_000.0 and "pipeline" not in t["images_basis"]
    # a compute-bound verdict keeps the synthetic figure whatever the pipeline did
    t = cost.usable_throughput(make_run(pipeline=[pipe(1_000.0)]), vd())
    assert t["images_per_s"] == 24_000.0


def test_input_bound_with_the_real_verdict():
    run = make_run()
    run.probes.append(
        ProbeResult(
            name="dataloader",
            status="ok",
            resource="cpu_dataloading",
            measurements=[
                m(
                    "best_throughput",
                    {"batch_size": 64},
                    9_000.0,
                    context={"loader": "dali", "workers": 8},
                )
            ],
        )
    )
    v = verdict.verdict(run)
    # the loader feeds 9,000 images/s, compute would take 24,000
    assert v.main.limiting_resource == "cpu_dataloading"
    t = cost.usable_throughput(run, v)
    assert t["images_per_s"] == 9_000.0 and "cpu_dataloading" in t["images_basis"]
    assert t["tokens_per_s"] == 2_000_000.0  # the transformer stays compute-bound
    assert t["representative"] is True


def test_transformer_bottleneck_is_costed_end_to_end():
    t = cost.usable_throughput(make_run(), vd(tokens_limiting="storage",
                                              tokens_caps={"storage": 500_000.0}))
    assert t["tokens_per_s"] == 500_000.0 and "storage" in t["tokens_basis"]


def test_no_named_bottleneck_costs_the_synthetic_figure_with_a_caveat():
    t = cost.usable_throughput(make_run(), vd(limiting=None))
    assert t["images_per_s"] == 24_000.0
    assert any("names no bottleneck" in c and "upper bound" in c for c in t["caveats"])
    t = cost.usable_throughput(make_run(), None)
    assert t["images_per_s"] == 24_000.0 and t["tokens_per_s"] == 2_000_000.0
    assert sum("the run has no verdict" in c for c in t["caveats"]) == 2


def test_quick_run_is_costed_but_not_representative():
    c = cost.run_costs(make_run(quick=True), vd(), 20.0)
    assert c["usd_per_million_images"] == pytest.approx(20 / 86.4)  # still computed
    assert c["representative"] is False
    assert any(x.startswith("not representative: a --quick run") for x in c["caveats"])


def test_other_image_size_is_costed_but_not_representative():
    run = make_run(resnet=[r50("fp32", 64, 40.0)], gpus=1)
    t = cost.usable_throughput(run, vd())
    assert t["images_per_s"] == 40.0 and t["representative"] is False
    assert any("64 px, not the real 224 px" in c for c in t["caveats"])
    # an end-to-end pipeline figure at 64 px taints an otherwise real run too
    run = make_run(pipeline=[pipe(1_000.0, size=64)])
    t = cost.usable_throughput(run, vd("cpu_dataloading", {"cpu_dataloading": 9_000.0}))
    assert t["images_per_s"] == 8_000.0 and t["representative"] is False
    assert any("pipeline ran at 64 px" in c for c in t["caveats"])


def test_missing_probes_give_none_with_the_reason():
    run = make_run(resnet=[], transformer=[], skipped=("transformer",))
    c = cost.run_costs(run, vd(limiting=None, tokens_limiting=None), 20.0)
    for key in ("usd_per_million_images", "usd_per_billion_tokens", "reference_job",
                "token_job", "images_per_s_per_usd_hour", "tokens_per_s_per_usd_hour"):
        assert c[key] is None, key
    assert "no images/s to cost: the resnet50 probe did not run" in c["caveats"]
    assert "no tokens/s to cost: the transformer probe skipped: no CUDA GPU" in c["caveats"]
    assert c["basis"] == {"images": "not measured", "tokens": "not measured"}


def test_price_of():
    assert cost.price_of(make_run(price=2.5)) == 2.5
    assert cost.price_of(make_run()) is None


@pytest.mark.parametrize("kw,match", [
    (dict(usd_per_hour=0.0), "usd_per_hour must be a positive number"),
    (dict(usd_per_hour=-3.0), "usd_per_hour"),
    (dict(usd_per_hour=float("nan")), "usd_per_hour"),
    (dict(usd_per_hour=1.0, job_tokens=0), "job_tokens"),
])
def test_run_costs_refuses_bad_prices(kw, match):
    with pytest.raises(ValueError, match=match):
        cost.run_costs(make_run(), vd(), **kw)


# -- buy against rent --------------------------------------------------------------------------
# $262,800 over 3 years of 8,760 h = $10/h; $8,760 a year of operations = $1/h; 2,000 W at
# $0.15/kWh = $0.30 per useful hour. At 75% utilisation: 11 / 0.75 + 0.30 = $14.9667.
OWN = dict(purchase_usd=262_800.0, power_watts=2_000.0, usd_per_kwh=0.15, years=3.0,
           ops_usd_per_year=8_760.0, utilization=0.75)


def test_buy_vs_rent_by_hand():
    b = cost.buy_vs_rent(cloud_usd_per_hour=25.0, **OWN)
    assert b["owned_usd_per_useful_hour"] == pytest.approx(11 / 0.75 + 0.3)  # 14.9667
    assert b["cloud_usd_per_hour"] == 25.0
    # 11 / U + 0.30 = 25  =>  U = 11 / 24.7 = 0.44534
    assert b["break_even_utilization"] == pytest.approx(11 / 24.7)
    # 1 − 14.9667 / 25 = 0.40133
    assert b["saving_at_utilization"] == pytest.approx(1 - (11 / 0.75 + 0.3) / 25)
    # 26,280 h × 0.75 = 19,710 useful hours: cloud 25 × 19,710 = 492,750; owned 262,800 +
    # 3 × 8,760 + 0.30 × 19,710 = 294,993; saving 197,757
    assert b["saving_over_years_usd"] == pytest.approx(197_757.0)
    assert b["inputs"]["energy_usd_per_useful_hour"] == pytest.approx(0.3)
    assert b["guide_claim"] == ("owning is 35–50% cheaper over 3 years above 60–70% "
                                "utilisation")
    assert b["guide_check"].startswith(
        "At 75% utilisation over 3 years your own numbers give owning 40% cheaper than "
        "renting: within the guide's 35–50%. Owning breaks even at 45% utilisation")


def test_idle_hours_are_not_charged_for_energy():
    assert cost.buy_vs_rent(cloud_usd_per_hour=25.0, **OWN)["inputs"]["idle_power"] \
        .startswith("not charged")
    # energy per useful hour is the same $0.30 whatever the utilisation: only the fixed part
    # is spread over the useful hours
    for u in (0.25, 0.5, 1.0):
        b = cost.buy_vs_rent(cloud_usd_per_hour=25.0, **{**OWN, "utilization": u})
        assert b["owned_usd_per_useful_hour"] - 11 / u == pytest.approx(0.3)
    b = cost.buy_vs_rent(cloud_usd_per_hour=25.0, **{**OWN, "power_watts": 0.0})
    assert b["owned_usd_per_useful_hour"] == pytest.approx(11 / 0.75)
    assert "idle hours are not charged for energy" in b["guide_check"]


def test_guide_check_outside_the_claim():
    # 1 − 14.9667 / 40 = 0.6258: more than the guide claims
    b = cost.buy_vs_rent(cloud_usd_per_hour=40.0, **OWN)
    assert "owning 63% cheaper than renting: outside the guide's 35–50% (more than it " \
           "claims)" in b["guide_check"]
    # 1 − 14.9667 / 12 = −0.2472: owning costs more; break-even 11 / 11.7 = 0.9402
    b = cost.buy_vs_rent(cloud_usd_per_hour=12.0, **OWN)
    assert b["saving_at_utilization"] == pytest.approx(1 - (11 / 0.75 + 0.3) / 12)
    assert "owning 25% dearer than renting: outside the guide's 35–50% (less than it " \
           "claims)" in b["guide_check"]
    assert b["break_even_utilization"] == pytest.approx(11 / 11.7)
    assert b["saving_over_years_usd"] < 0


def test_guide_check_notes_when_the_claim_does_not_apply():
    b = cost.buy_vs_rent(cloud_usd_per_hour=25.0, **{**OWN, "utilization": 0.5, "years": 5.0})
    assert "At 50% utilisation over 5 years" in b["guide_check"]
    assert "the guide's claim is for 60–70% utilisation and above" in b["guide_check"]
    assert "it counts 3 years, you gave 5" in b["guide_check"]


def test_owning_never_pays():
    # cloud $0.25/h is below the $0.30 of energy alone: no utilisation breaks even
    b = cost.buy_vs_rent(cloud_usd_per_hour=0.25, **OWN)
    assert b["break_even_utilization"] is None
    assert "Owning never breaks even at this cloud price" in b["guide_check"]
    # cloud $5/h: 11 / (5 − 0.30) = 2.34 > 1, more than full use
    assert cost.buy_vs_rent(cloud_usd_per_hour=5.0, **OWN)["break_even_utilization"] is None
    # exactly full use: 11 / (11.30 − 0.30) = 1
    assert cost.buy_vs_rent(cloud_usd_per_hour=11.3, **OWN)["break_even_utilization"] \
        == pytest.approx(1.0)


@pytest.mark.parametrize("kw,match", [
    (dict(purchase_usd=0.0), "purchase_usd must be a positive number"),
    (dict(cloud_usd_per_hour=-1.0), "cloud_usd_per_hour"),
    (dict(power_watts=-1.0), "power_watts must be zero or a positive number"),
    (dict(usd_per_kwh=-0.1), "usd_per_kwh"),
    (dict(years=0.0), "years"),
    (dict(ops_usd_per_year=-5.0), "ops_usd_per_year"),
    (dict(utilization=0.0), "utilization must be a fraction above 0 and at most 1"),
    (dict(utilization=1.2), "utilization"),
])
def test_buy_vs_rent_refuses_bad_inputs(kw, match):
    args = {**OWN, "cloud_usd_per_hour": 25.0, **kw}
    with pytest.raises(ValueError, match=match):
        cost.buy_vs_rent(**args)


def test_default_power():
    # 8 × 700 W + (150 W + 5 W × 64 cores) = 5,600 + 470 = 6,070 W
    watts, how = cost.default_power_watts(make_run())
    assert watts == 6_070.0
    assert "8 GPU power limits summing to 5,600 W" in how and "470 W" in how
    run = make_run(gpus=2)
    run.environment["gpus"][0]["power_limit"] = None
    run.environment["gpus"][0]["power_limit_default"] = 300.0
    run.environment["gpus"][1]["power_limit"] = None
    # 300 W (the default limit) + 700 W (not recorded) + 470 W
    watts, how = cost.default_power_watts(run)
    assert watts == 1_470.0 and "1 not recorded, counted at 700 W" in how
    # a CPU run: the host alone, 150 + 5 × 2 = 160 W
    run = make_run(device="cpu", gpus=0)
    run.environment["host"] = {"cores_physical": 2}
    assert cost.default_power_watts(run) == (160.0, "no GPUs: a host allowance of 160 W "
                                                    "(150 W for memory, fans, NICs and drives "
                                                    "+ 5 W per CPU core × 2 cores)")


def test_cost_imports_without_torch():
    fixture = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
    code = ("import sys; sys.modules['torch'] = None; sys.modules['pynvml'] = None\n"
            "from benchbench.analysis import cost\nfrom benchbench.core import results\n"
            f"run = results.load({str(fixture)!r})\n"
            "c = cost.run_costs(run, run.verdict, 1.0)\n"
            "assert c['reference_job'] is None and c['representative'] is False\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# -- run --price-per-hour ----------------------------------------------------------------------

def test_price_per_hour_is_stored_in_results(tmp_path):
    registry = default_registry()
    cfg = build_run_config(run_args(price_per_hour=2.5, only="matmul"), registry)
    assert cfg.price_per_hour == 2.5
    runner = Runner(registry, cfg, tmp_path, [], {"cuda_available": False}, {}, isolator=None)
    runner.save()
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["cost"] == {"usd_per_hour": 2.5}
    assert cost.price_of(results.load(tmp_path)) == 2.5
    # no price: no cost key at all
    runner = Runner(registry, build_run_config(run_args(), registry), tmp_path, [],
                    {"cuda_available": False}, {}, isolator=None)
    assert "cost" not in runner.run.to_dict()


def test_price_per_hour_from_the_config_file(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("[run]\nprice_per_hour = 3\n")
    cfg = build_run_config(run_args(config=str(toml)), default_registry())
    assert cfg.price_per_hour == 3.0
    # the flag beats the file
    cfg = build_run_config(run_args(config=str(toml), price_per_hour=4.0), default_registry())
    assert cfg.price_per_hour == 4.0
    with pytest.raises(config.ConfigError, match="run.price_per_hour: expected float"):
        config.run_section({"run": {"price_per_hour": "cheap"}})


def test_price_per_hour_flag_reaches_the_run_config():
    args = build_parser().parse_args(["run", "--only", "matmul", "--price-per-hour", "2.5"])
    assert build_run_config(args, default_registry()).price_per_hour == 2.5


@pytest.mark.parametrize("price", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_price_is_refused(price):
    with pytest.raises(UsageError, match="--price-per-hour must be a positive number"):
        build_run_config(run_args(price_per_hour=price), default_registry())


def test_non_positive_price_exits_2(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.run([sys.executable, "-m", "benchbench", "run", "--only", "matmul",
                           "--price-per-hour", "-1", "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "benchbench: error: --price-per-hour must be a positive number of US dollars per hour"]
    assert not out.exists()


# -- serving and fine-tuning --------------------------------------------------------------------

def test_dollars_per_million_inferences_and_the_largest_model_per_dollar():
    run = make_run()
    served = m("server_throughput", {"precision": "bf16", "image_size": 224, "max_batch": 64,
                                     "latency_bound_s": 0.015}, 8000.0)
    largest = m("largest_model", {"mode": "checkpointing", "seq_len": 2048,
                                  "precision": "amp_bf16"}, 6.74e9, "count", {"rung": "7b"})
    run.probes += [ProbeResult(name="inference", status="ok", resource="gpu_compute",
                               measurements=[served]),
                   ProbeResult(name="memory_fit", status="ok", resource="gpu_memory",
                               measurements=[largest])]
    c = cost.run_costs(run, vd(), usd_per_hour=24.0)
    # $24/h ÷ (8,000 images/s × 3,600 s) × 1e6 = $0.833 per million inferences.
    assert c["usd_per_million_inferences"] == pytest.approx(24 / (8000 * 3600) * 1e6)
    assert c["inferences_basis"].startswith("inference server_throughput: ResNet50 within 15")
    assert c["params_per_usd_hour"] == pytest.approx(6.74e9 / 24)
    assert "7b (checkpointing, seq 2048) on one device" in c["largest_model_basis"]
    bare = cost.run_costs(make_run(), vd(), usd_per_hour=24.0)
    assert bare["usd_per_million_inferences"] is None and bare["params_per_usd_hour"] is None
    assert bare["inferences_basis"].startswith("skipped, because")
    assert "lower bound" not in c["inferences_basis"]


def test_a_server_rate_whose_search_ran_out_of_time_costs_at_most_its_figure():
    run = make_run()
    # The search stopped for its budget before any rate tried missed 15 ms: 8,000/s is a floor.
    served = m("server_throughput", {"precision": "bf16", "image_size": 224, "max_batch": 64,
                                     "latency_bound_s": 0.015}, 8000.0,
               context={"stopped_by": "budget", "tried": [{"rate": 5000.0, "p99_s": 0.004},
                                                          {"rate": 8000.0, "p99_s": 0.009}]})
    run.probes.append(ProbeResult(name="inference", status="ok", resource="gpu_compute",
                                  measurements=[served]))
    c = cost.run_costs(run, vd(), usd_per_hour=24.0)
    assert c["usd_per_million_inferences"] == pytest.approx(24 / (8000 * 3600) * 1e6)
    assert c["inferences_basis"] == (
        "inference server_throughput: ResNet50 within 15 ms p99 (224 px, bf16, PyTorch eager, "
        "dynamic batches up to 64); a lower bound: the "
        "search's time budget ran out before any rate it tried missed the bound, so the "
        "machine may serve more; the cost per million inferences is at most this")
