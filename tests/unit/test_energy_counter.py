"""NVML's energy counter over the training probes' timed steps: read through the device layer,
in J; the shared trainer reads it as the steps begin and end; the simulated GPU keeps a counter
consistent with its power, so a simulated run shows the energy per sample."""

import pytest
from fake_nvml import GPUS, FakeNvml, NVMLError_NotSupported

from benchbench.analysis import energy
from benchbench.core.results import ProbeResult, RunResult
from benchbench.engine import simulate
from benchbench.machine import nvml
from benchbench.probes.meter import Meter

H100_UUID = "11111111-2222-3333-4444-555555555555"  # torch's spelling of GPU 0's


def test_the_meter_reads_the_counter_in_joules_opened_once(monkeypatch):
    fake = FakeNvml(gpus=[dict(GPUS[0], energy_mJ=[1_000_000, 1_002_500])])
    monkeypatch.setattr(nvml, "load_nvml", lambda: fake)
    meter = Meter()
    read = meter.energy_reader("cuda:0", H100_UUID)
    assert read() == pytest.approx(1002.5)  # the first read was the check that it works
    assert meter.energy_reader("cuda:0", H100_UUID) is read
    assert fake.looked_up.count("nvmlInit") == 1
    assert meter.energy_reader("cpu", H100_UUID) is None
    assert meter.energy_reader("cuda:0", None) is None


@pytest.mark.parametrize("fake", [
    FakeNvml(gpus=[dict(GPUS[0])]),  # no counter: NotSupported (before Volta)
    FakeNvml(gpus=[dict(GPUS[0], energy_mJ=[NVMLError_NotSupported("Not Supported")])]),
    FakeNvml(fail_init=RuntimeError("Driver Not Loaded"))])
def test_no_counter_means_no_reader_and_no_error(monkeypatch, fake):
    monkeypatch.setattr(nvml, "load_nvml", lambda: fake)
    assert nvml.energy_reader(H100_UUID) is None


@pytest.fixture(scope="module")
def simulated_resnet50():
    return simulate.simulate_probe(simulate.H200, "resnet50", quick=True, budget_s=20.0)


def test_the_trainer_reads_the_counter_over_at_least_a_second_of_timed_steps(simulated_resnet50):
    throughputs = [m for m in simulated_resnet50.measurements if m.metric == "throughput"]
    assert throughputs
    for m in throughputs:
        e = m.context["timed_energy"]
        # the simulated H200 draws 690 W while its steps run, and the window is held to 1.5 s
        assert e["s"] >= energy.MIN_WINDOW_S
        assert e["J"] == pytest.approx(simulate.H200.power_W * e["s"], rel=1e-3)
        assert e["samples"] == m.context["batch"] * m.context["steps"]
        assert e["source"] == "NVML energy counter"


def test_a_simulated_gpu_run_shows_the_energy_per_sample(simulated_resnet50):
    run = RunResult(tool={}, started_at="t", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="resnet50", status="ok", resource="gpu_compute",
                    measurements=simulated_resnet50.measurements)])
    (row,) = energy.energy_rows(run)
    assert row["load_watts"] == pytest.approx(690, rel=1e-3)
    assert row["per_sample_J"] == pytest.approx(690 / row["throughput"], rel=1e-3)
    assert "GPU 0 690 W (NVML energy counter)" in row["basis"]
