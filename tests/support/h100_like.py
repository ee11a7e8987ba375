"""Telemetry of an H100-class GPU under dense bf16 load, as NVML reports it, for the stability
judgement and the telemetry flags; no H100 has run benchbench yet, so this is modelled, not
recorded, on what such a GPU publishes and what the GPU-check issue describes:

- the SM clock boosts to 1980 MHz (the datasheet's boost) for the first seconds, then holds
  about 1755 MHz at the 700 W board limit, a little above or below;
- NVML's clock-event mask carries SwPowerCap ("power cap") in almost every sample under that
  load (here 97%), because the driver holds power at the board's limit;
- power 680-700 W; utilisation 100%; temperature rising from 55 to 68 degC.

`stability_run` gives the stability probe's 100 ms windows over 60 s with the telemetry's
stored shape (one point per 0.2 s, as a 60 s probe is downsampled to 300 points), and drops
planted at the given windows: by a neighbour (nothing in the telemetry changes) or by real
throttling (the SM clock falls and a power brake shows at those moments).
"""

import random

WINDOW_S = 0.1
POINT_S = 0.2
BOOST, SUSTAINED, BRAKED = 1980e6, 1755e6, 1200e6


def stability_run(drops: list[int], cause: str = "neighbour", seconds: float = 60.0,
                  seed: int = 7) -> tuple[list[tuple[float, float]], dict]:
    """(windows as (s, FLOP/s), the probe's telemetry); cause "neighbour" or "brake"."""
    rng = random.Random(seed)
    n = round(seconds / WINDOW_S)
    windows = []
    for i in range(n):
        rate = 7.6e14 * (1 + rng.gauss(0, 0.004))
        if i in drops:
            rate *= 0.72
        windows.append((i * WINDOW_S, rate))
    points = round(seconds / POINT_S)
    braked = {round(d * WINDOW_S / POINT_S) for d in drops} if cause == "brake" else set()
    t, clock, power, throttle, temp = [], [], [], [], []
    for k in range(points):
        t.append(round(k * POINT_S + POINT_S / 2, 3))
        if k in braked:
            clock.append(BRAKED)
            power.append(560.0)
            throttle.append(["power cap", "hw power brake"])
            temp.append(66.0)
            continue
        clock.append(BOOST if k * POINT_S < 3.0 else SUSTAINED + rng.choice((-15e6, 0, 15e6)))
        power.append(round(690 + rng.uniform(-10, 10), 2))
        throttle.append(["power cap"] if rng.random() < 0.97 else [])
        temp.append(round(55 + 13 * k / points, 1))
    gpu = {"util": [1.0] * points, "sm_clock_Hz": clock, "power_W": power,
           "temp_degC": temp, "throttle": throttle}
    return windows, {"t": t, "gpus": {"0": gpu}, "cpu_util": [0.08] * points}
