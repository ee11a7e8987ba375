"""The SM clock a GPU measurement ran at: read around each timed sample (probes/api.py,
through the meter and NVML), and shown beside the figures with the rate per GHz of it
(analysis/clocks.py, the report's probe tables)."""

import dataclasses

import fake_nvml
import pytest
from helpers import render_md
from synthetic_runs import clocked_matmul_run as matmul_run
from synthetic_runs import clocked_run
from synthetic_runs import timed_measurement as m

from benchbench.analysis import clocks
from benchbench.core.results import ProbeResult
from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.machine import nvml
from benchbench.probes.api import ProbeContext, Timed, throughput
from benchbench.probes.meter import Meter


def test_a_rate_per_ghz_is_the_same_work_per_cycle_at_another_clock():
    run = matmul_run()
    pr = run.probes[0]
    bf16, fp16 = (clocks.at_clock(run, pr.measurements[i]) for i in (1, 3))
    assert bf16.per_GHz == pytest.approx(488e12) and fp16.per_GHz == pytest.approx(488e12)
    assert bf16.clock_Hz == pytest.approx(1.4825e9) and bf16.share == pytest.approx(0.749, abs=1e-3)
    assert bf16.held_down and fp16.clock_Hz < bf16.clock_Hz
    # a sample whose clock was not read is left out, not guessed: 3 of 4 here
    assert clocks.at_clock(run, pr.measurements[0]).samples == 3
    # a peak over sizes stands for its best size's samples
    assert clocks.behind(pr, pr.measurements[2]) is pr.measurements[1]


def test_too_few_clocked_samples_or_none_give_no_figure():
    run = matmul_run()
    few = m("flops", {"device": "cuda:0", "dtype": "tf32", "size": 8192}, [1.0, 2.0, 3.0],
            sm_clock_Hz=[1e9, None, None])
    assert clocks.at_clock(run, few) is None
    assert clocks.at_clock(run, m("flops", {"device": "cpu"}, [1.0, 2.0, 3.0])) is None
    host = m("copy_bandwidth", {"memory": "host"}, [1.0, 2.0, 3.0], sm_clock_Hz=[1e9] * 3)
    assert clocks.at_clock(run, host) is None  # a host copy's samples say nothing of a GPU
    misaligned = m("flops", {"device": "cuda:0"}, [1.0, 2.0, 3.0], sm_clock_Hz=[1e9, 1e9])
    assert clocks.at_clock(run, misaligned) is None


def test_the_report_shows_the_clock_and_the_rate_per_ghz_beside_each_figure():
    text = render_md(matmul_run())
    section = text[text.index("### Matrix multiply"):]
    section = section[:section.index("\n### ", 5) if "\n### " in section[5:] else None]
    assert "| SM clock (of its max) | per GHz of it |" in section
    # the peak row reads its best size's clocks
    peak_row = next(ln for ln in section.splitlines() if ln.startswith("| cuda:0 | bf16 | **"))
    assert "1,482 MHz (74.9%) | 488 TFLOP/s |" in peak_row
    fp16_row = next(ln for ln in section.splitlines() if "| fp16 | 8192 |" in ln)
    assert "1,350 MHz (68.2%) | 488 TFLOP/s |" in fp16_row
    line = next(ln for ln in section.splitlines() if ln.startswith("- SM clock of cuda:0"))
    assert "1,336–1,500 MHz, median 1,480 MHz, 74.7%" in line
    assert "of its 1,980 MHz maximum (held below 90% of it)" in line
    assert "A rate per GHz is the work per cycle" in line


def test_a_gpu_at_its_maximum_clock_is_not_said_to_be_held_down():
    text = render_md(matmul_run(fp16_clock=1.9e9, max_hz=1.55e9))
    line = next(ln for ln in text.splitlines() if ln.startswith("- SM clock of cuda:0"))
    assert "held below" not in line


def test_a_copy_keeps_its_clocks_but_the_report_does_not_read_them():
    """A copy's bytes are paced by the memory clock or a link, and a host-to-device copy leaves
    the SMs idle at whatever clock idling gives them: its samples' clocks stay in results.json,
    and the report reads none (no column, no line, no "held down")."""
    copy = ProbeResult(name="memory_bandwidth", status="ok", resource="gpu_memory", measurements=[
        m("copy_bandwidth", {"memory": "cuda:0", "size_bytes": 2 << 30}, [4.1e12, 4.2e12, 4.0e12],
          unit="B/s", sm_clock_Hz=[0.345e9, 0.345e9, 0.345e9]),
        m("copy_bandwidth", {"device": "cuda:0", "direction": "h2d"}, [5e10, 5e10, 5e10],
          unit="B/s", sm_clock_Hz=[0.345e9, 0.345e9, 0.345e9])])
    run = clocked_run(copy)
    assert all(clocks.at_clock(run, x) is None for x in copy.measurements)
    assert clocks.pooled(copy.measurements) is None
    section = render_md(run)
    section = section[section.index("### Memory copy"):]
    assert "SM clock" not in section and "per GHz" not in section


def test_a_run_without_clocks_has_no_clock_column():
    run = matmul_run()
    plain = [dataclasses.replace(x, context={k: v for k, v in x.context.items()
                                             if k != "sm_clock_Hz"})
             for x in run.probes[0].measurements]
    run.probes[0].measurements[:] = plain
    text = render_md(run)
    assert "SM clock" not in text


def test_a_figure_under_its_reference_says_its_clock_was_held_down():
    """The published-references table: 724 TFLOP/s of bf16 is 92% of a published 790 on an
    H200, and its samples ran at 75% of the GPU's maximum clock: the row says both."""
    run = matmul_run()
    run.environment["gpus"][0]["name"] = "NVIDIA H200"
    text = render_md(run)
    row = next(ln for ln in text.splitlines() if ln.startswith("| matmul bf16 (cuda:0)"))
    assert row.rstrip(" |").endswith(", its SM clock held at 74.9% of its maximum (1,482 MHz)")
    text = render_md(matmul_run(max_hz=1.55e9))
    row = next(ln for ln in text.splitlines() if ln.startswith("| matmul bf16 (cuda:0)"))
    assert "SM clock" not in row


# --- reading the clock around each timed sample ------------------------------------------------

class ClockMeter(Meter):
    """The host clock for timing, and an SM clock that reads the values given, in turn."""

    def __init__(self, reads):
        super().__init__()
        self.reads, self.asked = (None if reads is None else list(reads)), []

    def timer_for(self, device):
        return lambda fn, inner: [fn() for _ in range(inner)] and 0.01 * inner

    def sm_clock_reader(self, device, uuid):
        self.asked.append((device, uuid))
        return (lambda: self.reads.pop(0)) if self.reads is not None else None


def context(meter, gpus=({"index": 0, "uuid": "abc"},)):
    policy = RepeatPolicy(min_repeats=3, max_repeats=3, warmup_s=0.0, warmup_steps=1)
    return ProbeContext(device="cuda", policy=policy, budget=Budget(10.0),
                        facts={"gpus": list(gpus)}, meter=meter)


def test_each_timed_sample_carries_the_mean_of_the_clock_read_as_it_began_and_ended():
    meter = ClockMeter([1.4e9, 1.6e9, 1.5e9, None, 1.2e9, 1.2e9])
    timed = context(meter).time_op(lambda: None, "cuda:0", 1, 0.0)
    assert meter.asked == [("cuda:0", "abc")]  # the GPU named by its UUID in the run's facts
    assert timed.sm_clock_Hz == [1.5e9, None, 1.2e9]  # a failed read leaves its sample's None
    got = throughput("flops", {"device": "cuda:0"}, timed, 1e12, "FLOP/s")
    assert got.context["sm_clock_Hz"] == [1.5e9, None, 1.2e9]
    assert "as each timed sample began and as it ended" in got.context["sm_clock_read"]


def test_no_clock_reader_leaves_the_samples_as_they_were():
    meter = ClockMeter(None)
    timed = context(meter).time_op(lambda: None, "cuda:0", 1, 0.0)
    assert timed.sm_clock_Hz is None
    assert "sm_clock_Hz" not in throughput("flops", {}, timed, 1.0, "FLOP/s").context


def test_a_device_the_facts_do_not_name_has_no_uuid():
    ctx = context(ClockMeter(None))
    assert ctx.gpu_uuid("cuda:0") == "abc"
    assert ctx.gpu_uuid("cuda:3") is None and ctx.gpu_uuid("cuda") is None
    assert ctx.gpu_uuid("cpu") is None


def test_a_zero_time_sample_drops_its_clock_with_it():
    timed = Timed([0.0, 1.0, 2.0], 1, 0, "target_cv", [1e9, 2e9, 3e9])
    got = throughput("flops", {}, timed, 1.0, "FLOP/s")
    assert got.samples == [1.0, 0.5] and got.context["sm_clock_Hz"] == [2e9, 3e9]


# --- NVML ----------------------------------------------------------------------------------------

def test_nvml_reads_the_sm_clock_in_hz_opened_once_per_gpu_for_the_probe(monkeypatch):
    fake = fake_nvml.FakeNvml()  # GPU 0 at 1,980 MHz, GPU 1 idle at 345
    monkeypatch.setattr(nvml, "load_nvml", lambda: fake)
    meter = Meter()
    read = meter.sm_clock_reader("cuda:1", "66666666-2222-3333-4444-555555555555")  # torch's
    assert read() == 345e6
    assert meter.sm_clock_reader("cuda:1", "66666666-2222-3333-4444-555555555555") is read
    assert fake.looked_up.count("nvmlInit") == 1  # NVML opened once for the probe's meter
    assert meter.sm_clock_reader("cuda:0", "GPU-00000000-0000-0000-0000-000000000000") is None
    assert meter.sm_clock_reader("cuda:0", None) is None
    assert meter.sm_clock_reader("cpu", "66666666-2222-3333-4444-555555555555") is None


def test_no_nvml_means_no_clock_and_no_error(monkeypatch):
    failing = fake_nvml.FakeNvml(fail_init=fake_nvml.NVMLError("Driver Not Loaded"))
    monkeypatch.setattr(nvml, "load_nvml", lambda: failing)
    assert nvml.sm_clock_reader("11111111-2222-3333-4444-555555555555") is None
    assert Meter().sm_clock_reader("cuda:0", "11111111-2222-3333-4444-555555555555") is None
