"""Derived energy on hand-built runs (every figure worked out in the comments): J, watts under
load, J per image and per token, images per kWh; buy vs rent on measured power with the power
limit as fallback; the report's Energy section and environment rows; compare's new fields."""

import pytest

from benchbench.analysis import cost, energy
from benchbench.compare.environment import environment_diff
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.reports import energy as energy_report
from benchbench.reports.markdown import environment_section

NO_RAPL = "not measurable here: /sys/class/powercap has no RAPL zone"


def thr(device, precision, value, unit="samples/s"):
    return Measurement(metric="throughput", key={"device": device, "precision": precision},
                       value=value, unit=unit, statistic="total_over_time", samples=[value],
                       higher_is_better=True)


def probe(name, resource, measurements=()):
    return ProbeResult(name=name, status="ok", resource=resource,
                       measurements=list(measurements))


def rec(gpu_j=None, cpu_j=None, seconds=10.0, steal=0.0, gpu_source="NVML energy counter"):
    gpu_j = gpu_j or {}
    return {"t": [], "gpus": {}, "steal_fraction": steal,
            "steal_reason": None if steal is not None else "no steal column",
            "energy": {"gpu_J": gpu_j, "gpu_seconds": {i: seconds for i in gpu_j},
                       "gpu_source": gpu_source if gpu_j else "skipped, because no NVML",
                       "cpu_J": cpu_j, "cpu_source": "RAPL" if cpu_j is not None else NO_RAPL,
                       "seconds": seconds}}


def gpu_run(gpus=8, telemetry=True):
    """resnet50 on cuda:0: 1,000 (fp32) and 3,000 (amp_bf16) images/s; over its 10 s GPU 0 used
    6,000 J (600 W), GPU 1 500 J, the CPU packages 1,500 J (150 W). transformer: 250,000
    tokens/s, GPU 0 5,000 J (500 W), the CPU not measurable. matmul: 2,000 J on GPU 0."""
    probes = [
        probe("matmul", "gpu_compute"),
        probe("resnet50", "gpu_compute", [thr("cuda:0", "fp32", 1000.0),
                                          thr("cuda:0", "amp_bf16", 3000.0)]),
        probe("transformer", "gpu_compute", [thr("cuda:0", "amp_bf16", 250_000.0, "tokens/s")]),
    ]
    tel = {"probes": {"matmul": rec({"0": 2000.0}, steal=None),
                      "resnet50": rec({"0": 6000.0, "1": 500.0}, 1500.0, steal=0.041),
                      "transformer": rec({"0": 5000.0})}, "flags": {}}
    env = {"host": {"cores_physical": 64}, "gpus": [{"index": i, "power_limit": 700.0}
                                                    for i in range(gpus)]}
    return RunResult(tool={}, started_at="t", environment=env,
                     config={"device_resolved": "cuda"}, argv=[], probes=probes,
                     extra={"telemetry": tel} if telemetry else {})


def cpu_run():
    probes = [probe("resnet50", "cpu_compute", [thr("cpu", "fp32", 12.0)])]
    return RunResult(tool={}, started_at="t", environment={"host": {"cores_physical": 2}},
                     config={"device_resolved": "cpu"}, argv=[], probes=probes,
                     extra={"telemetry": {"probes": {"resnet50": rec()}, "flags": {}}})


def by_probe(run):
    return {r["probe"]: r for r in energy.energy_rows(run)}


def test_training_rows_give_joules_watts_and_energy_per_sample():
    rows = by_probe(gpu_run())
    r = rows["resnet50"]
    assert (r["gpu_J"], r["cpu_J"], r["joules"]) == (6500.0, 1500.0, 8000.0)
    assert r["watts"] == pytest.approx(650 + 150)  # every GPU and the CPU, over 10 s
    # under load: GPU 0 (the one that trained) 600 W + CPU 150 W = 750 W at 3,000 images/s
    assert r["load_watts"] == pytest.approx(750)
    assert (r["per"], r["precision"]) == ("image", "amp_bf16")
    assert r["per_sample_J"] == pytest.approx(0.25)
    assert r["per_kWh"] == pytest.approx(3000 / 750 * 3.6e6)  # 14.4 M images per kWh
    assert "amp_bf16 at 3,000 images/s" in r["basis"] and "RAPL" in r["basis"]
    t = rows["transformer"]
    assert t["per"] == "token" and t["load_watts"] == pytest.approx(500)  # GPU only
    assert t["per_sample_J"] == pytest.approx(500 / 250_000)
    assert NO_RAPL in t["basis"]
    assert "per" not in rows["matmul"] and rows["matmul"]["watts"] == pytest.approx(200)


def test_measured_watts_and_images_per_kwh():
    run = gpu_run()
    # GPU 0: mean of 600 and 500 W; the CPU: 150 W where RAPL was read
    assert energy.measured_watts(run) == pytest.approx(550 + 150)
    value, basis = energy.images_per_kwh(run)
    assert value == pytest.approx(14.4e6) and "750 W under load" in basis


def test_a_cpu_box_without_rapl_measures_nothing_and_says_why():
    run = cpu_run()
    row = by_probe(run)["resnet50"]
    assert row["joules"] is None and row["watts"] is None and row["per_sample_J"] is None
    assert row["basis"] == f"skipped, because the CPU energy is {NO_RAPL}"
    assert energy.measured_watts(run) is None
    assert energy.images_per_kwh(run) == (None, row["basis"])
    run.probes[0] = ProbeResult(name="resnet50", status="skipped", resource="cpu_compute",
                                reason="one warm step takes ~4.65 s, beyond its time budget")
    assert by_probe(run)["resnet50"]["basis"] == (
        "no energy per image, because the resnet50 probe skipped: one warm step takes ~4.65 s, "
        "beyond its time budget")
    no_tel = gpu_run(telemetry=False)
    assert energy.energy_rows(no_tel) == []
    assert energy.images_per_kwh(no_tel)[0] is None
    assert "no energy telemetry" in energy.images_per_kwh(no_tel)[1]


def test_the_trained_gpu_must_be_measured():
    run = gpu_run()
    run.extra["telemetry"]["probes"]["resnet50"] = rec({"1": 500.0}, 1500.0)
    row = by_probe(run)["resnet50"]
    assert row["load_watts"] is None
    assert row["basis"].startswith("skipped, because GPU 0's energy was not measured")


def test_buy_vs_rent_uses_the_measured_power_and_says_so():
    watts, how = cost.power_under_load(gpu_run())
    # 550 W per GPU x 8 + CPU 150 W (RAPL) + 150 W for memory, fans, NICs and drives
    assert watts == pytest.approx(550 * 8 + 150 + 150)
    assert how.startswith("measured under load by resnet50, transformer: 550 W per GPU × 8")
    fallback, how = cost.power_under_load(gpu_run(telemetry=False))
    assert (fallback, how.partition(": ")[2]) == cost.default_power_watts(
        gpu_run(telemetry=False))
    assert how.startswith("estimated, the run measured no power under load")
    costs = cost.run_costs(gpu_run(), None, 20.0)
    assert costs["images_per_kwh"] == pytest.approx(14.4e6)


def test_the_energy_section_renders_figures_reasons_and_steal():
    text = "\n".join(energy_report.section(gpu_run()))
    assert "## Energy" in text
    assert "| resnet50 | 10.0 s | 6.50 kJ (NVML energy counter) | 1.50 kJ (RAPL) | 800 W | " \
           "0.25 J/image | 14,400,000 images/kWh |" in text
    assert "| transformer | 10.0 s | 5.00 kJ (NVML energy counter) | not measurable here |" \
           in text
    assert f"- CPU energy {NO_RAPL}." in text
    assert "- CPU steal during ResNet50 training: 4.1% ⚠ another tenant took this CPU time" in text
    assert "- CPU steal during transformer training: 0.0%" in text
    assert "- CPU steal during matrix multiply: skipped, because no steal column" in text
    old = "\n".join(energy_report.section(gpu_run(telemetry=False)))
    assert "Energy: not measured, because this run's telemetry has no energy readings" in old


def test_the_environment_section_shows_virtualisation_and_gpu_sharing():
    env = {"host": {}, "virtualisation": {
        "kind": "vm", "hypervisor": "KVM", "container": "docker", "sandbox": None,
        "evidence": ["cpuinfo flag hypervisor", "/.dockerenv exists"], "reason": None},
        "gpus": [{"index": 0, "name": "NVIDIA A100", "persistence_mode": True,
                  "virtualization_mode": "passthrough", "mig_mode": {"current": True,
                                                                     "pending": True},
                  "mig_devices": 3}]}
    text = "\n".join(environment_section(env))
    assert ("| Virtualisation | vm (KVM), container docker; evidence: cpuinfo flag hypervisor, "
            "/.dockerenv exists |") in text
    assert "GPU virtualisation passthrough, MIG on (3 slices)" in text
    text = "\n".join(environment_section({"host": {}}))
    assert "| Virtualisation | not recorded (a snapshot by an older benchbench) |" in text


def test_compare_shows_virtualisation_gpu_mode_and_mig():
    def run(kind, mode, mig):
        env = {"virtualisation": {"kind": kind, "hypervisor": "KVM" if kind == "vm" else None},
               "gpus": [{"index": 0, "name": "H100", "virtualization_mode": mode,
                         "mig_mode": {"current": mig, "pending": mig},
                         "mig_devices": 7 if mig else 0}]}
        return RunResult(tool={}, started_at="t", environment=env, config={}, argv=[])

    rows = {r.name: r for r in environment_diff({
        "metal": [run("bare metal", "none (bare metal or passthrough)", False)],
        "cloud": [run("vm", "vGPU guest", True)]})}
    assert rows["virtualisation"].values == {"metal": ["bare metal"], "cloud": ["vm (KVM)"]}
    assert rows["GPU virtualisation"].values["cloud"] == ["vGPU guest"]
    assert rows["MIG"].values == {"metal": ["off"], "cloud": ["on (7 slices)"]}
    assert all(rows[n].differs for n in ("virtualisation", "GPU virtualisation", "MIG"))


# --- energy per image over the best precision's own timed steps ------------------------------

def timed_run(with_window=True):
    """resnet50's first round on cuda:0, telemetry at 1 s from t0 = 100 s: 0-20 s start-up,
    builds and the fp32 steps at 300 W, then amp_bf16's 20 timed steps from 20 s to 30 s at
    700 W, then 300 W again; the CPU packages 100 W throughout, 150 W during the steps. The
    counters over the whole 40 s give 16,000 J on GPU 0: 400 W averaged."""
    t = [float(i) for i in range(41)]
    gpu_w = [700.0 if 20 <= i <= 30 else 300.0 for i in range(41)]
    cpu_w = [150.0 if 20 <= i <= 30 else 100.0 for i in range(41)]
    best = thr("cuda:0", "amp_bf16", 3100.0)
    best.context.update(steps=20, round_values=[3000.0, 3200.0])
    if with_window:
        best.context["timed_monotonic_s"] = [120.0, 130.0]
    tel = rec({"0": 16000.0}, 4400.0, seconds=40.0)
    tel.update(t=t, t0_monotonic=100.0, cpu_power_W=cpu_w, gpus={"0": {"power_W": gpu_w}})
    return RunResult(tool={}, started_at="t", environment={}, config={}, argv=[],
                     probes=[probe("resnet50", "gpu_compute", [thr("cuda:0", "fp32", 1000.0),
                                                               best])],
                     extra={"telemetry": {"probes": {"resnet50": tel}, "flags": {}}})


def test_energy_per_image_integrates_power_over_the_timed_steps_only():
    r = by_probe(timed_run())["resnet50"]
    # 700 W + 150 W during the steps, against round 1's 3,000 images/s: 0.2833 J an image.
    assert r["load_watts"] == pytest.approx(850)
    assert r["throughput"] == 3000.0
    assert r["per_sample_J"] == pytest.approx(850 / 3000)
    assert r["basis"].startswith("850 W during amp_bf16's timed steps only (GPU 0 700 W")
    assert "its 20 timed steps (10.0 s)" in r["basis"] and "round 1" in r["basis"]
    # The whole round's average (400 W + 110 W) would have understated it by 40%.
    assert energy.load_power(timed_run())["gpu_W"] == pytest.approx(700)


def test_a_run_without_step_times_falls_back_to_the_whole_round_and_says_so():
    r = by_probe(timed_run(with_window=False))["resnet50"]
    assert r["load_watts"] == pytest.approx(400 + 110)
    assert "averaged over the probe's first round and all its precisions" in r["basis"]
    assert "recorded no timed-step times" in r["basis"]


def test_timed_steps_the_samples_barely_cover_fall_back_and_say_why():
    """The step times are there, but GPU 0's power samples have gaps over most of them: the
    fallback names that, not a missing record of the step times."""
    run = timed_run()
    gpu_w = run.extra["telemetry"]["probes"]["resnet50"]["gpus"]["0"]["power_W"]
    for i in range(20, 28):
        gpu_w[i] = None
    r = by_probe(run)["resnet50"]
    assert r["load_watts"] == pytest.approx(400 + 110)
    assert "the stored power samples cover under 50% of its 20 timed steps (10.0 s)" in r["basis"]
    assert "recorded no timed-step times" not in r["basis"]


def test_integrate_window_interpolates_its_edges_and_skips_gaps():
    from benchbench.machine.energy import integrate_power

    t, w = [0.0, 1.0, 2.0, 3.0], [100.0, 200.0, None, 400.0]
    # 0.5 .. 1.0: 150 W -> 200 W is 87.5 J over 0.5 s; 1..3 has a gap on each side of 2.
    assert integrate_power(t, w, 0.5, 3.0) == (pytest.approx(87.5), pytest.approx(0.5))
    assert integrate_power(t, w, 5.0, 6.0) == (None, 0.0)
