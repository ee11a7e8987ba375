import math
import re
import time

import pytest

from benchbench.analysis.stability import MAX_ALIGNED, clock_range, judge, summarize

W = 0.1  # window width, s
MED_CLOCK, LOW_CLOCK = 1.98e9, 1.41e9


def series(values, width=W):
    return [(i * width, float(v)) for i, v in enumerate(values)]


def steady(n, level=1000.0):
    # A deterministic +-0.3% wiggle, like a healthy GPU probe.
    return [level * (1 + 0.003 * math.sin(i * 1.7)) for i in range(n)]


def gpu(n, throttle=None, clock=None, util=None):
    """One GPU's stored series, sampled at each window's midpoint (t = i * W + W / 2)."""
    throttle = throttle or {}
    clock = clock or {}
    return {"sm_clock_Hz": [clock.get(i, MED_CLOCK) for i in range(n)],
            "power_W": [699.0 if throttle.get(i) else 520.0 for i in range(n)],
            "temp_degC": [71.0] * n,
            "util": [util.get(i, 0.98) if util else 0.98 for i in range(n)],
            "throttle": [throttle.get(i, []) for i in range(n)]}


def telemetry(n, gpus=None, cpu_util=None, step=W):
    m = round(n * W / step)
    return {"t": [i * step + step / 2 for i in range(m)],
            "gpus": gpus or {}, "cpu_util": cpu_util or [0.3] * m}


def with_drops(n, drops, depth=0.7):
    values = steady(n)
    for i in drops:
        values[i] = 1000.0 * depth
    return values


# --- summarize -------------------------------------------------------------------------------

def test_worst_1pct_and_median():
    values = list(range(1, 101))
    values = values[::2] + values[1::2]  # order in time must not matter to the percentile
    s = summarize(series(values))
    assert s["median"] == 50.5
    assert s["worst_1pct_ratio"] == pytest.approx((1 + 0.99 * (2 - 1)) / 50.5)
    assert s["n_windows"] == 100


@pytest.mark.parametrize("values, sign", [
    ([1000 + i for i in range(100)], +1),
    ([1000 - i for i in range(100)], -1),
])
def test_drift_sign(values, sign):
    s = summarize(series(values))
    first, last = values[:10], values[-10:]
    expected = (sorted(last)[4] + sorted(last)[5]) / (sorted(first)[4] + sorted(first)[5]) - 1
    assert s["drift"] == pytest.approx(expected)
    assert math.copysign(1, s["drift"]) == sign


def test_drops_and_cv():
    s = summarize(series(with_drops(100, range(10, 15))))
    assert s["drops"] == 5
    assert 0.05 < s["cv"] < 0.1


def test_empty_and_dirty_input():
    assert summarize([]) == {"median": None, "cv": None, "worst_1pct_ratio": None,
                             "drift": None, "drops": 0, "n_windows": 0}
    s = summarize([(0.2, 10.0), (0.1, float("nan")), (0.0, 10.0), (0.3, None)])
    assert s["n_windows"] == 2 and s["median"] == 10.0


# --- judge -----------------------------------------------------------------------------------

def test_too_short():
    for n in (0, 1, 9):
        got = judge(series(steady(n)), None)
        assert got["judgement"] == "too short"
        assert got["reason"].startswith(f"only {n} throughput window")
        assert got["summary"]["n_windows"] == n
    assert judge(series(steady(10)), None)["judgement"] == "stable"


def test_stable_with_evidence_sentence():
    got = judge(series(steady(600)), telemetry(600, {"0": gpu(600)}))
    assert got["judgement"] == "stable"
    assert got["reason"] is None and got["aligned_drops"] == []
    assert re.fullmatch(r"CV 0\.\d% over 600 windows of 100 ms; worst 1% at 99\.\d% of the "
                        r"median; drift [+-]0\.\d%", got["evidence"][0])


def test_throttling_by_reason():
    n = 100
    drops = range(40, 49)
    reasons = {i: ["sw_power_cap"] for i in range(40, 46)}
    clocks = {i: LOW_CLOCK for i in range(40, 46)}
    tel = telemetry(n, {"0": gpu(n, throttle=reasons, clock=clocks)})
    got = judge(series(with_drops(n, drops)), tel)
    assert got["judgement"] == "throttling"
    # Drop 46 sees the reason one window back; drops 47 and 48 see none.
    assert ("7 of 9 drops coincide with sw_power_cap on GPU 0 (SM clock 1,410 MHz vs median "
            "1,980 MHz)") in got["evidence"]
    assert any(e.startswith("2 windows more than 10% below the median with no throttle reason")
               for e in got["evidence"])
    first = got["aligned_drops"][0]
    assert set(first) == {"t", "ratio", "gpu", "throttle", "explains", "clock_drop",
                          "sm_clock_Hz", "power_W", "temp_degC", "cpu_util"}
    assert first["ratio"] == pytest.approx(0.7, rel=0.01)
    by_t = {round(d["t"], 1): d for d in got["aligned_drops"]}
    assert by_t[4.2]["throttle"] == ["sw_power_cap"] and by_t[4.2]["power_W"] == 699.0
    assert by_t[4.2]["sm_clock_Hz"] == LOW_CLOCK
    assert by_t[4.8]["throttle"] == [] and by_t[4.8]["sm_clock_Hz"] == MED_CLOCK


def test_non_throttling_reasons_are_ignored():
    n = 100
    benign = {i: ["gpu_idle", "applications_clocks_setting", "sync boost", "display clock"]
              for i in range(40, 46)}
    got = judge(series(with_drops(n, range(40, 46))), telemetry(n, {"0": gpu(n, benign)}))
    assert got["judgement"] == "noisy"


def test_throttling_on_the_second_gpu_is_shown():
    n = 100
    hot = {i: ["hw thermal slowdown"] for i in range(30, 36)}
    tel = telemetry(n, {"0": gpu(n), "1": gpu(n, throttle=hot)})
    got = judge(series(with_drops(n, range(30, 36))), tel)
    assert got["judgement"] == "throttling"
    assert got["evidence"][1].startswith("6 of 6 drops coincide with hw thermal slowdown on GPU 1")
    assert {d["gpu"] for d in got["aligned_drops"]} == {"1"}


def test_throttling_by_clock_drop():
    n = 100
    clocks = {i: 1.2e9 for i in range(60, 66)}
    got = judge(series(with_drops(n, range(60, 66))), telemetry(n, {"0": gpu(n, clock=clocks)}))
    assert got["judgement"] == "throttling"
    assert ("6 of 6 drops coincide with an SM clock drop on GPU 0 (SM clock 1,200 MHz vs median "
            "1,980 MHz)") in got["evidence"]
    assert all(d["clock_drop"] and d["throttle"] == [] for d in got["aligned_drops"])


def test_an_idle_gpu_lowering_its_clock_is_not_throttling():
    # Starved of input, the GPU idles and drops its clock on purpose: the cause is upstream.
    n = 100
    idle = range(60, 66)
    tel = telemetry(n, {"0": gpu(n, clock={i: 0.6e9 for i in idle},
                                  util={i: 0.05 for i in idle})})
    got = judge(series(with_drops(n, idle)), tel)
    assert got["judgement"] == "noisy"
    assert not any(d["clock_drop"] for d in got["aligned_drops"])


def test_noisy_with_clean_telemetry():
    n = 200
    drops = [17, 55, 56, 90, 123, 124, 125, 160, 181, 182, 190, 199]
    got = judge(series(with_drops(n, drops)), telemetry(n, {"0": gpu(n)}))
    assert got["judgement"] == "noisy"
    assert ("12 windows more than 10% below the median with no throttle reason or clock drop in "
            "the telemetry: another tenant or process is the likely cause") in got["evidence"]


def test_a_minority_of_throttled_drops_is_noisy_but_mentioned():
    n = 100
    reasons = {i: ["power cap"] for i in (20, 21)}
    tel = telemetry(n, {"0": gpu(n, reasons)})
    got = judge(series(with_drops(n, [20, 21, 50, 60, 70, 80])), tel)
    assert got["judgement"] == "noisy"
    assert ("2 of 6 drops coincide with power cap on GPU 0 (SM clock 1,980 MHz vs median "
            "1,980 MHz)") in got["evidence"]
    assert any(e.startswith("4 windows more than 10% below") for e in got["evidence"])


def test_noisy_without_drops():
    got = judge(series([960.0, 1040.0] * 50), None)
    assert got["judgement"] == "noisy"
    assert got["aligned_drops"] == []
    assert "many small swings" in got["evidence"][-1]


def test_no_telemetry_cannot_tell():
    got = judge(series(with_drops(100, range(5, 11))), None)
    assert got["judgement"] == "noisy"
    assert "no telemetry was recorded" in got["evidence"][-1]
    assert got["aligned_drops"][0]["gpu"] is None


def test_cpu_run_uses_cpu_util_as_context():
    n = 100
    drops = range(70, 76)
    cpu = [0.95 if 69 <= i <= 76 else 0.5 for i in range(n)]
    got = judge(series(with_drops(n, drops)), telemetry(n, cpu_util=cpu))
    assert got["judgement"] == "noisy"
    assert any("a CPU reports no throttle reasons" in e for e in got["evidence"])
    assert "peaked at 95% (mean over the drops) vs 54% over the probe" in got["evidence"][-1]
    assert all(d["cpu_util"] == 0.95 for d in got["aligned_drops"])


def test_thermal_slide_without_drops_is_throttling():
    n = 100
    values = [1000.0 - 0.6 * i for i in range(n)]  # -6% over the run, never 10% below median
    hot = {i: ["hw thermal slowdown"] for i in range(85, n)}
    got = judge(series(values), telemetry(n, {"0": gpu(n, throttle=hot)}))
    assert got["summary"]["drops"] == 0
    assert got["judgement"] == "throttling"
    assert got["evidence"][1].startswith("throughput slid −5.")
    assert got["evidence"][2] == ("10 of the last 10 windows coincide with hw thermal "
                                  "slowdown on GPU 0 (SM clock 1,980 MHz vs median 1,980 MHz)")


def test_slide_without_telemetry_is_noisy():
    got = judge(series([1000.0 - 0.6 * i for i in range(100)]), None)
    assert got["judgement"] == "noisy"
    assert got["evidence"][1].startswith("throughput moved −5.")


def test_downsampled_telemetry_still_aligns():
    # A stored 60 s probe keeps one point per second: each point stands for ten windows.
    n = 600
    tel = telemetry(n, {"0": gpu(60, throttle={30: ["power cap"]}, clock={30: LOW_CLOCK})},
                    step=1.0)
    got = judge(series(with_drops(n, range(302, 306))), tel)
    assert got["judgement"] == "throttling"
    assert got["aligned_drops"][0]["throttle"] == ["power cap"]


def test_gaps_in_telemetry():
    n = 100
    g = gpu(n, throttle={i: ["power cap"] for i in range(40, 46)})
    for key in ("sm_clock_Hz", "power_W", "temp_degC", "util", "throttle"):
        g[key][41] = None
    g["util"] = g["util"][:50]  # a series that stopped early
    tel = telemetry(n, {"0": g})
    tel["cpu_util"] = None
    tel["t"][:10] = [None] * 10  # unreadable stamps must not shift the other samples
    got = judge(series(with_drops(n, range(40, 46))), tel)
    assert got["judgement"] == "throttling"


def test_aligned_drops_are_capped_and_worst_first():
    n = 300
    values = steady(n)
    for k, i in enumerate(range(100, 130)):
        values[i] = 1000.0 * (0.5 + 0.01 * k)
    got = judge(series(values), None)
    ratios = [d["ratio"] for d in got["aligned_drops"]]
    assert len(ratios) == MAX_ALIGNED
    assert ratios == sorted(ratios)
    assert ratios[0] == pytest.approx(0.5, rel=0.01)


def test_live_machine_types():
    windows, start = [], time.perf_counter()
    for _ in range(12):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.005:
            n += 1
        windows.append((t0 - start, n / (time.perf_counter() - t0)))
    got = judge(windows, None)
    assert got["judgement"] in ("stable", "throttling", "noisy", "too short")
    assert all(isinstance(e, str) for e in got["evidence"])
    assert isinstance(got["summary"]["median"], float)


# --- an H100-class GPU under dense bf16 load (tests/support/h100_like.py) ---------------------

NEIGHBOUR_DROPS = [57, 140, 141, 222, 305, 306, 307, 410, 480, 555]


def test_h100_power_cap_that_is_always_on_explains_no_drop():
    """The power cap is active in ~97% of the samples: drops a neighbour caused must not be
    blamed on it."""
    from h100_like import stability_run

    windows, tel = stability_run(NEIGHBOUR_DROPS, cause="neighbour")
    got = judge(windows, tel)
    assert got["judgement"] == "noisy", got["evidence"]
    assert any(re.fullmatch(r"power cap on GPU 0 was active around (9\d|100)% of the other "
                            r"windows as well as \d+% of these: it explains none of them", e)
               for e in got["evidence"]), got["evidence"]
    assert any(e.startswith("10 windows more than 10% below the median with no throttle reason "
                            "or clock drop") for e in got["evidence"]), got["evidence"]
    assert all(d["explains"] == [] and not d["clock_drop"] for d in got["aligned_drops"])


def test_h100_power_brake_at_the_drops_is_throttling():
    from h100_like import SUSTAINED, stability_run

    windows, tel = stability_run(NEIGHBOUR_DROPS, cause="brake")
    got = judge(windows, tel)
    assert got["judgement"] == "throttling", got["evidence"]
    assert any(e.startswith("10 of 10 drops coincide with hw power brake on GPU 0 (SM clock "
                            f"1,200 MHz vs median {SUSTAINED / 1e6:,.0f} MHz)")
               for e in got["evidence"]), got["evidence"]
    # The power cap is there too, but as often as everywhere else: it is not named a cause.
    assert not any("coincide with power cap" in e for e in got["evidence"])
    assert all(d["explains"] == ["hw power brake"] for d in got["aligned_drops"])


# --- judged per GHz of the SM clock (analysis/stability_clock.py) -----------------------------

def capped(n, reasons=("power cap",), dips=(), depth=0.85):
    """A GPU at its power limit: the SM clock moves ±3% around 1,500 MHz from window to window
    and the throughput with it (the work per cycle within ±0.3%); `dips` are windows a
    neighbour slowed to `depth` without touching the clock."""
    clocks = [1.5e9 * (1 + 0.03 * math.sin(i * 0.7)) for i in range(n)]
    values = [c / 1.5e9 * v for c, v in zip(clocks, steady(n), strict=True)]
    for i in dips:
        values[i] *= depth
    tel = telemetry(n, {"0": gpu(n, throttle={i: list(reasons) for i in range(n)},
                                 clock=dict(enumerate(clocks)))})
    return series(values), tel, clocks


def test_dips_that_follow_the_clock_under_the_power_cap_are_steady_at_its_power_limit():
    windows, tel, _ = capped(100)
    got = judge(windows, tel)
    assert got["summary"]["cv"] > 0.02  # "noisy" by the bar of a steady clock
    assert got["judgement"] == "steady at its power limit", got["evidence"]
    assert clock_range(got["clock"]) == "1,456–1,545 MHz"
    assert got["evidence"][1].startswith("throughput followed the SM clock, which the power cap "
                                         "held at 1,456–1,545 MHz (power cap in 100% of the busy "
                                         "samples, no thermal, power-brake or hardware slowdown)")
    assert got["evidence"][2].startswith("per GHz of the clock read with each window (the "
                                         "telemetry's samples), throughput held steady: CV 0.")


def test_a_neighbours_dips_the_clock_does_not_explain_stay_noisy():
    windows, tel, _ = capped(100, dips=range(5, 100, 9))
    got = judge(windows, tel)
    assert got["judgement"] == "noisy", got["evidence"]
    assert got["evidence"][1].startswith("per GHz of the SM clock read with each window (the "
                                         "telemetry's samples; 1,456–1,545 MHz), throughput "
                                         "still varied")
    assert got["evidence"][1].endswith("the clock does not explain the spread")


def test_the_probes_own_clock_readings_come_first():
    windows, tel, clocks = capped(100)
    for g in tel["gpus"].values():  # the telemetry's clock says nothing
        g["sm_clock_Hz"] = [1.5e9] * len(g["sm_clock_Hz"])
    assert judge(windows, tel)["judgement"] != "steady at its power limit"
    got = judge(windows, tel, clocks)
    assert got["judgement"] == "steady at its power limit"
    assert got["clock"]["source"] == "the probe's own readings"


def test_a_clock_that_follows_a_thermal_limit_is_throttling():
    windows, tel, _ = capped(100, reasons=("power cap", "hw thermal slowdown"))
    got = judge(windows, tel)
    assert got["judgement"] == "throttling", got["evidence"]
    assert any("with a thermal, power-brake or hardware slowdown in 100% of the busy samples"
               in e for e in got["evidence"])


def test_a_capped_gpu_without_clock_readings_is_not_blamed_on_a_neighbour():
    windows, tel, _ = capped(100)
    for g in tel["gpus"].values():
        g["sm_clock_Hz"] = [None] * len(g["sm_clock_Hz"])
    got = judge(windows, tel)
    assert got["judgement"] == "uncertain"
    assert got["evidence"][-1].startswith("the power cap was active in 100% of the busy samples, "
                                          "and no SM clock was read with the windows")
