"""inference: the server scenario's queue on a known service time, the whole workload at small
sizes on this CPU, and its planning on the simulated H200."""

import pytest
from helpers import cpu_facts, resolved

from benchbench.workloads.inference import server


def service_of(fixed_s: float, per_item_s: float):
    return lambda k: fixed_s + per_item_s * k


def test_a_lightly_loaded_server_answers_in_one_service_time():
    load = server.offer(10.0, 500, 8, service_of(0.002, 0.0005), seed=1)
    assert len(load.latencies) == 500
    assert load.percentile(0.5) == pytest.approx(0.0025, rel=0.05)  # alone in its batch
    assert load.summary()["mean_batch"] < 1.05


def test_dynamic_batching_holds_latency_where_one_at_a_time_would_not():
    """At 1,500 requests/s a server taking 1 ms a request saturates one at a time; batching
    queued requests (2 ms + 0.05 ms a request) keeps up."""
    batched = server.offer(1500.0, 2000, 64, service_of(0.002, 0.00005), seed=2)
    single = server.offer(1500.0, 2000, 1, service_of(0.001, 0.0), seed=2)
    assert batched.percentile(0.99) < 0.01 < single.percentile(0.99)
    assert batched.summary()["mean_batch"] > 2


def test_the_search_finds_the_highest_rate_within_the_bound():
    service = service_of(0.002, 0.0002)
    found = server.search(100.0, 1e6, 0.015, 1000, 64, service, lambda: 1e9)
    best = found.best
    assert best is not None and best.percentile(0.99) <= 0.015
    higher = [ld for ld in found.loads if ld.rate > best.rate]
    assert higher and all(ld.percentile(0.99) > 0.015 for ld in higher)
    # The rates climb by RATE_STEP, then narrow between the last pass and the first failure.
    assert found.loads[1].rate == pytest.approx(150.0)
    # A bound no rate can meet: no best, and the search stops at the first failure.
    slow = server.search(100.0, 1e6, 0.001, 200, 64, service, lambda: 1e9)
    assert slow.best is None and len(slow.loads) == 1


def test_the_search_stops_at_the_budget():
    found = server.search(10.0, 1e6, 1.0, 1000, 4, service_of(0.01, 0.0), lambda: 0.0)
    assert len(found.loads) == 1 and found.stopped_by == "budget"


def test_the_workload_runs_every_part_on_this_cpu():
    pytest.importorskip("torch")
    from benchbench.core.sampling import Budget
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.inference import run as inference

    cfg = resolved("inference", batch_sizes=(1, 2), requests=40, decode_batches=(1, 4),
                   prompt_tokens=16, new_tokens=4, image_size=32, min_sample_s=0.001)
    ctx = ProbeContext(device="cpu", policy=cfg.repeat_policy(2), budget=Budget(30.0),
                       facts=cpu_facts())
    out = inference.run(ctx, cfg)
    by = {}
    for m in out.measurements:
        by.setdefault(m.metric, []).append(m)
    assert {m.key["batch_size"] for m in by["offline_throughput"]} == {1, 2}
    assert all(m.unit == "samples/s" for m in by["offline_throughput"])
    (peak,) = by["peak_offline_throughput"]
    assert peak.statistic == "max" and peak.value == max(m.value for m in
                                                         by["offline_throughput"])
    (latency,) = by["server_latency"]
    assert latency.unit == "s" and len(latency.samples) == 40  # every request's latency kept
    assert latency.context["p99_s"] >= latency.context["p50_s"] > 0
    if latency.context["meets_bound"]:
        assert by["server_throughput"][0].value == latency.key["rate"]
    else:  # a CPU rarely serves ResNet50 within 15 ms: said, not hidden
        assert any(n.startswith("server: no rate tried kept p99 within 15 ms") for n in
                   out.notes)
    for metric, unit in (("prefill_throughput", "tokens/s"), ("time_to_first_token", "s"),
                         ("time_per_output_token", "s"), ("decode_throughput", "tokens/s")):
        assert sorted(m.key["batch"] for m in by[metric]) == [1, 4]
        assert all(m.unit == unit and m.value > 0 for m in by[metric])
    tpot = next(m for m in by["time_per_output_token"] if m.key["batch"] == 1)
    assert len(tpot.samples) == 3  # new_tokens - 1 decode steps, each timed


def test_planning_on_the_simulated_h200_serves_within_the_bound():
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", False, 60.0)
    assert sim.duration_s <= 60.0
    by = {}
    for m in sim.measurements:
        by.setdefault(m.metric, []).append(m)
    (served,) = by["server_throughput"]
    assert served.context["p99_s"] <= 0.015 and served.value > 1000
    assert {m.key["precision"] for m in by["peak_offline_throughput"]} == {"bf16", "fp32"}
    assert sorted(m.key["batch"] for m in by["decode_throughput"]) == [1, 8, 64]
