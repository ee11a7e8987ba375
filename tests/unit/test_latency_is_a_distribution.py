"""A latency distribution is the measurement, not noise: the inference server's latencies, TTFT,
TPOT, ITL and per-step decode rates keep their spread without a "noisy" flag, while a
throughput whose repeats spread as much is flagged (reports/noise.py)."""

from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.reports import noise


def m(metric, samples, unit="s"):
    return Measurement(metric=metric, key={"precision": "bf16", "batch": 1},
                       value=sorted(samples)[len(samples) // 2], unit=unit, statistic="median",
                       samples=samples, higher_is_better=unit != "s")


SPREAD = [0.0021, 0.0023, 0.0030, 0.0019, 0.0025, 0.0041, 0.0022]  # CV about 28%


def test_latencies_are_not_noise_and_throughput_repeats_are():
    latencies = [m(name, SPREAD) for name in noise.DISTRIBUTIONS]
    repeats = m("offline_throughput", [1 / s for s in SPREAD], "samples/s")
    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="inference", status="ok", resource="gpu_compute",
                    measurements=[*latencies, repeats])])
    assert not any(noise.noisy(x) or noise.warning(x) for x in latencies)
    assert noise.noisy(repeats) and noise.warning(repeats).startswith("noisy: CV ")
    (row,) = noise.rows(run)
    assert row.metric == "offline_throughput"
