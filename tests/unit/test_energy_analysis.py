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


def thr(device, precision, value, unit="samples/s", counter=None):
    """A throughput; `counter` = (J, s) of the energy counter over its timed steps, which
    processed value × s samples."""
    context = {} if counter is None else {"timed_energy": {
        "J": counter[0], "s": counter[1], "samples": value * counter[1],
        "source": "NVML energy counter"}}
    return Measurement(metric="throughput", key={"device": device, "precision": precision},
                       value=value, unit=unit, statistic="total_over_time", samples=[value],
                       higher_is_better=True, context=context)


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


def gpu_run(gpus=8, telemetry=True, counters=True):
    """resnet50 on cuda:0: 1,000 (fp32) and 3,000 (amp_bf16) images/s; over its 10 s GPU 0 used
    6,000 J (600 W), GPU 1 500 J, the CPU packages 1,500 J (150 W); amp_bf16's 2 s of timed
    steps read 1,400 J on GPU 0's energy counter (700 W). transformer: 250,000 tokens/s, GPU 0
    5,000 J (500 W) over the probe, its 1.5 s of timed steps 900 J (600 W), the CPU not
    measurable. matmul: 2,000 J on GPU 0."""
    probes = [
        probe("matmul", "gpu_compute"),
        probe("resnet50", "gpu_compute", [
            thr("cuda:0", "fp32", 1000.0),
            thr("cuda:0", "amp_bf16", 3000.0, counter=(1400.0, 2.0) if counters else None)]),
        probe("transformer", "gpu_compute", [
            thr("cuda:0", "amp_bf16", 250_000.0, "tokens/s",
                counter=(900.0, 1.5) if counters else None)]),
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
    assert r["watts"] == pytest.approx(650 + 150)  # every GPU and the CPU, over the probe
    # while timed: GPU 0's counter, 1,400 J over 2 s = 700 W, over 6,000 images
    assert r["load_watts"] == pytest.approx(700)
    assert (r["per"], r["precision"]) == ("image", "amp_bf16")
    assert r["per_sample_J"] == pytest.approx(1400 / 6000)
    assert r["per_kWh"] == pytest.approx(3.6e6 * 6000 / 1400)  # 15.4 million images per kWh
    assert r["basis"] == ("700 W during amp_bf16's timed steps only (GPU 0 700 W (NVML energy "
                          "counter) + CPU not measurable here, over its ? timed steps (2 s), "
                          "round 1) ÷ its throughput there, 3,000 images/s")
    t = rows["transformer"]
    assert t["per"] == "token" and t["load_watts"] == pytest.approx(600)  # GPU only
    assert t["per_sample_J"] == pytest.approx(900 / 375_000)
    assert "per" not in rows["matmul"] and rows["matmul"]["watts"] == pytest.approx(200)


def test_measured_watts_and_images_per_kwh():
    run = gpu_run()
    # GPU 0: mean of 700 and 600 W while timed; the CPU was not measurable
    assert energy.measured_watts(run) == pytest.approx(650)
    value, basis = energy.images_per_kwh(run)
    assert value == pytest.approx(3.6e6 * 6000 / 1400)
    assert basis.startswith("700 W during amp_bf16's timed steps only")


def test_a_cpu_box_without_rapl_measures_nothing_and_says_why():
    run = cpu_run()
    run.probes[0].measurements[0].context["timed_monotonic_s"] = [100.0, 110.0]
    row = by_probe(run)["resnet50"]
    assert row["joules"] is None and row["watts"] is None and row["per_sample_J"] is None
    assert row["basis"] == f"energy per image not measured, because the CPU energy is {NO_RAPL}"
    assert energy.measured_watts(run) is None
    assert energy.images_per_kwh(run) == (None, row["basis"])
    run.probes[0] = ProbeResult(name="resnet50", status="skipped", resource="cpu_compute",
                                reason="one warm step takes ~4.65 s, beyond its time budget")
    assert by_probe(run)["resnet50"]["basis"] == (
        "no energy per image, because the resnet50 probe skipped: one warm step takes ~4.65 s, "
        "beyond its time budget")
    bare = gpu_run(telemetry=False, counters=False)
    assert energy.energy_rows(bare) == []
    assert energy.images_per_kwh(bare)[0] is None
    assert "no energy telemetry" in energy.images_per_kwh(bare)[1]


def test_a_run_without_telemetry_still_gives_the_counters_energy_per_sample():
    """A simulated GPU run keeps no telemetry, but its timed steps read the energy counter."""
    rows = by_probe(gpu_run(telemetry=False))
    assert set(rows) == {"resnet50", "transformer"}
    assert rows["resnet50"]["per_sample_J"] == pytest.approx(1400 / 6000)
    assert rows["resnet50"]["gpu_J"] is None and rows["resnet50"]["watts"] is None


def test_without_a_counter_the_trained_gpus_own_samples_must_cover_the_steps():
    run = timed_run()
    tel = run.extra["telemetry"]["probes"]["resnet50"]
    tel["gpus"] = {"1": tel["gpus"]["0"]}  # only GPU 1 was sampled
    row = by_probe(run)["resnet50"]
    assert row["load_watts"] is None
    assert row["basis"] == ("energy per image not measured, because the stored power samples "
                            "cover under 50% of its 20 timed steps (10 s)")


def test_buy_vs_rent_uses_the_measured_power_and_says_so():
    watts, how = cost.power_under_load(gpu_run())
    host_w, _ = cost._host_allowance(gpu_run())
    # 650 W per GPU (700 and 600 while timed) x 8 + the host allowance (no RAPL here)
    assert watts == pytest.approx(650 * 8 + host_w)
    assert how.startswith("measured under load by resnet50, transformer: 650 W per GPU × 8")
    bare = gpu_run(telemetry=False, counters=False)
    fallback, how = cost.power_under_load(bare)
    assert (fallback, how.partition(": ")[2]) == cost.default_power_watts(bare)
    assert how.startswith("estimated, the run measured no power under load")
    costs = cost.run_costs(gpu_run(), None, 20.0)
    assert costs["images_per_kwh"] == pytest.approx(3.6e6 * 6000 / 1400)


def test_the_energy_section_renders_figures_reasons_and_steal():
    text = "\n".join(energy_report.section(gpu_run()))
    assert "## Energy" in text
    # three significant figures throughout: 15,428,571 images/kWh reads 15.4 million; the
    # timed steps took 2 s of the 10 s, so the probe's mean power is mostly start-up
    assert "| resnet50 | 10.0 s | 6.50 kJ (NVML energy counter) | 1.50 kJ (RAPL) | — (mostly " \
           "start-up) | 700 W | 0.233 J/image, 15.4 million images/kWh |" in text
    assert "| transformer | 10.0 s | 5.00 kJ (NVML energy counter) | not measurable here | " \
           "— (mostly start-up) | 600 W | 0.0024 J/token, 1.5 billion tokens/kWh |" in text
    assert "| matmul | 10.0 s | 2.00 kJ (NVML energy counter) | not measurable here | 200 W | " \
           "— | — |" in text
    assert f"- CPU energy {NO_RAPL}." in text
    assert "- CPU steal during ResNet50 training: 4.1% ⚠ another tenant took this CPU time" in text
    assert "- CPU steal during transformer training: 0.0%" in text
    assert "- CPU steal during matrix multiply: skipped, because no steal column" in text
    old = "\n".join(energy_report.section(gpu_run(telemetry=False, counters=False)))
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
    """Without a counter reading, a window of 1 s or more integrates the power samples."""
    r = by_probe(timed_run())["resnet50"]
    # 700 W + 150 W during the steps, against round 1's 3,000 images/s: 0.2833 J an image.
    assert r["load_watts"] == pytest.approx(850)
    assert r["throughput"] == 3000.0
    assert r["per_sample_J"] == pytest.approx(850 / 3000)
    assert r["basis"].startswith("850 W during amp_bf16's timed steps only (GPU 0 700 W (NVML "
                                 "power samples, one-second averages) + CPU packages 150 W")
    assert "its 20 timed steps (10 s)" in r["basis"] and "round 1" in r["basis"]
    # The whole round's average (400 W + 110 W) would have understated it by 40%.
    assert energy.load_power(timed_run())["gpu_W"] == pytest.approx(700)


def test_the_energy_counter_over_the_steps_wins_over_the_power_samples():
    run = timed_run()
    best = run.probes[0].measurements[1]
    # the counter read 7,200 J over the 10 s of steps that processed 31,000 images
    best.context["timed_energy"] = {"J": 7200.0, "s": 10.0, "samples": 31_000.0}
    r = by_probe(run)["resnet50"]
    assert r["load_watts"] == pytest.approx(720 + 150)
    assert r["throughput"] == pytest.approx(3100)  # the counter's own window
    assert r["per_sample_J"] == pytest.approx(870 / 3100)
    assert "GPU 0 720 W (NVML energy counter)" in r["basis"]


@pytest.mark.parametrize("counter", [None, {"J": 70.0, "s": 0.1, "samples": 310.0}])
def test_a_timed_window_under_a_second_is_not_measured_and_says_why(counter):
    """NVML's power is a one-second average: 0.1 s of steps after a long start-up reads the
    start-up (an H200's ResNet50 read 165 W of a steady 590), and the counter is held to the
    same length."""
    run = timed_run()
    best = run.probes[0].measurements[1]
    best.context["timed_monotonic_s"] = [120.0, 120.1]
    if counter:
        best.context["timed_energy"] = counter
    r = by_probe(run)["resnet50"]
    assert r["per_sample_J"] is None and r["load_watts"] is None and r["per_kWh"] is None
    assert r["basis"] == ("energy per image not measured, because amp_bf16's timed window was "
                          "0.1 s, under the 1 s over which NVML averages a GPU's power")
    assert energy.load_power(run) is None


def test_a_run_without_step_times_measures_no_energy_per_sample_and_says_so():
    r = by_probe(timed_run(with_window=False))["resnet50"]
    assert r["load_watts"] is None and r["per_sample_J"] is None
    assert r["basis"] == ("energy per image not measured, because this run recorded no "
                          "timed-step times")


def test_timed_steps_the_samples_barely_cover_are_not_measured_and_say_why():
    """The step times are there, but GPU 0's power samples have gaps over most of them."""
    run = timed_run()
    gpu_w = run.extra["telemetry"]["probes"]["resnet50"]["gpus"]["0"]["power_W"]
    for i in range(20, 28):
        gpu_w[i] = None
    r = by_probe(run)["resnet50"]
    assert r["load_watts"] is None
    assert "the stored power samples cover under 50% of its 20 timed steps (10 s)" in r["basis"]


def test_a_probe_that_was_mostly_start_up_shows_no_mean_power_and_says_what_it_covered():
    run = timed_run()
    run.probes[0].measurements[0].context["timed_s"] = 2.0  # fp32: 2 s; amp_bf16: 10 s of 40
    row = by_probe(run)["resnet50"]
    assert row["timed_share"] == pytest.approx(12 / 40)
    text = "\n".join(energy_report.section(run))
    assert "| resnet50 | 40.0 s | 16.0 kJ (NVML energy counter) | 4.40 kJ (RAPL) | — (mostly " \
           "start-up) | 850 W | 0.283 J/image, 12.7 million images/kWh |" in text
    assert ("- resnet50: its timed steps took 12.0 s of its 40.0 s; the rest was start-up "
            "(model builds, kernel selection and autotuning, warm-up), so its mean power over "
            "the probe, 510 W, is not the training's.") in text


def test_three_significant_figures():
    assert [energy.three(x) for x in (102_104_275, 3_653_174_281, 4685.0, 588.4, 0.0353,
                                      0.000985)] == [
        "102 million", "3.65 billion", "4,680", "588", "0.0353", "0.000985"]


def test_integrate_window_interpolates_its_edges_and_skips_gaps():
    from benchbench.machine.energy import integrate_power

    t, w = [0.0, 1.0, 2.0, 3.0], [100.0, 200.0, None, 400.0]
    # 0.5 .. 1.0: 150 W -> 200 W is 87.5 J over 0.5 s; 1..3 has a gap on each side of 2.
    assert integrate_power(t, w, 0.5, 3.0) == (pytest.approx(87.5), pytest.approx(0.5))
    assert integrate_power(t, w, 5.0, 6.0) == (None, 0.0)
