"""inference: the simulated server's queue on a known service time, generation's vLLM metrics
on known times, the whole workload at small sizes on this CPU (with LoadGen and without), and
its planning on the simulated H200."""

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


def test_a_first_rate_that_misses_steps_down_then_narrows():
    """Started far above what the server sustains, the search steps down by RATE_STEP² until
    a rate meets the bound, then bisects; and it steps no lower than `lowest`."""
    service = service_of(0.002, 0.0002)
    found = server.search(1e5, 1e6, 0.015, 1000, 64, service, lambda: 1e9, lowest=100.0)
    best = found.best
    assert best is not None and best.percentile(0.99) <= 0.015
    assert found.loads[1].rate == pytest.approx(1e5 / server.RATE_STEP ** 2)
    higher = [ld for ld in found.loads if ld.rate > best.rate]
    assert higher and all(ld.percentile(0.99) > 0.015 for ld in higher)
    # Two bisections after the first rate that met the bound.
    first_met = next(i for i, ld in enumerate(found.loads) if ld.percentile(0.99) <= 0.015)
    assert len(found.loads) == first_met + 1 + server.NARROWING
    # A bound no rate can meet: down to `lowest`, and no further.
    slow = server.search(1e4, 1e6, 0.001, 200, 64, service, lambda: 1e9, lowest=1000.0)
    assert slow.best is None and slow.loads[-1].rate == 1000.0
    assert [round(ld.rate) for ld in slow.loads] == [10000, 4444, 1975, 1000]


def test_the_search_stops_at_the_budget():
    found = server.search(10.0, 1e6, 1.0, 1000, 4, service_of(0.01, 0.0), lambda: 0.0)
    assert len(found.loads) == 1 and found.stopped_by == "budget"


def test_generation_follows_vllms_definitions():
    from benchbench.workloads.inference.generation import measurements

    # Two generations of 4 requests: TTFT 0.1 and 0.3 s, then 3 decode steps each.
    timed = [(0.1, [0.01, 0.02, 0.03]), (0.3, [0.02, 0.02, 0.02])]
    by = {m.metric: m for m in measurements({"batch": 4}, 4, 16, 4, timed, "cpu")}
    ttft = by["ttft"]
    assert ttft.samples == [0.1, 0.3] and ttft.context["requests"] == 8
    assert ttft.context["mean_s"] == pytest.approx(0.2)
    assert ttft.context["p99_s"] == pytest.approx(0.1 + 0.99 * 0.2)  # numpy's linear p99
    # TPOT per request: (latency - TTFT) / (output tokens - 1).
    assert by["tpot"].samples == pytest.approx([0.06 / 3, 0.06 / 3])
    assert by["itl"].samples == [0.01, 0.02, 0.03, 0.02, 0.02, 0.02]
    assert by["itl"].context["median_s"] == pytest.approx(0.02)
    # Output throughput counts the prefill's time; the decode-only rate does not.
    assert by["output_throughput"].value == pytest.approx(8 * 4 / (0.16 + 0.36))
    assert by["decode_throughput"].value == pytest.approx(4 * 6 / 0.12)
    assert by["prefill_throughput"].value == pytest.approx(2 * 4 * 16 / 0.4)


class _TimedModels:
    """generate() whose prefill takes 0.1 s and each decode step 0.05 s on `clock`."""

    def __init__(self, clock):
        self.clock, self.batches = clock, []

    def generate(self, precision, batch, prompt, new):
        self.batches.append(batch)
        return (lambda: self.clock.advance(0.1)), (lambda: self.clock.advance(0.05))


@pytest.mark.parametrize("budget_s, ran", [(1.0, [1]), (1.4, [1, 8]), (10.0, [1, 8, 64])])
def test_generation_starts_a_batch_only_where_what_is_left_pays_for_the_last_ones_cost(
        budget_s, ran):
    """A batch of 1 costs 0.65 s here (a warm-up of 0.15 s, two generations of 0.25 s); a
    larger one costs at least that. It once started whenever any time was left, and a quick
    run on 2 cores overran its share by the whole batch."""
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.engine.sim_device import FakeClock
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.inference.generation import generation

    clock = FakeClock()
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), facts={}, clock=clock,
                       budget=Budget(budget_s, clock=clock))
    models, notes = _TimedModels(clock), []
    cfg = resolved("inference", decode_batches=(1, 8, 64), prompt_tokens=16, new_tokens=4,
                   generations=2)
    out = generation(ctx, cfg, models, "cpu", "fp32", notes)
    assert sorted({m.key["batch"] for m in out}) == ran
    assert clock() - 1000.0 <= budget_s
    if len(ran) < 3:
        left = budget_s - 0.65 * len(ran)
        (note,) = notes
        assert note == (f"generation at batch {', '.join(map(str, [1, 8, 64][len(ran):]))} "
                        f"skipped, because the {left:.3g} s left would not pay for batch "
                        f"{[1, 8, 64][len(ran)]}: batch {ran[-1]} took 0.65 s")


def _cpu_run(**values):
    from benchbench.core.sampling import Budget
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.inference import run as inference

    cfg = resolved("inference", batch_sizes=(1, 2), requests=40, decode_batches=(1, 4),
                   prompt_tokens=16, new_tokens=4, image_size=32, min_sample_s=0.001,
                   **values)
    ctx = ProbeContext(device="cpu", policy=cfg.repeat_policy(2), budget=Budget(30.0),
                       facts=cpu_facts())
    out = inference.run(ctx, cfg)
    by = {}
    for m in out.measurements:
        by.setdefault(m.metric, []).append(m)
    return out, by


def _check_offline_and_generation(by, notes):
    # A busy machine may leave the larger sizes out for the budget: said, not hidden.
    sizes = {m.key["batch_size"] for m in by["offline_throughput"]}
    assert sizes == {1, 2} or sizes == {1} and any(
        n.startswith("offline fp32 batch 2 and above skipped, because") for n in notes)
    assert all(m.unit == "samples/s" for m in by["offline_throughput"])
    (peak,) = by["peak_offline_throughput"]
    assert peak.statistic == "max" and peak.value == max(m.value for m in
                                                         by["offline_throughput"])
    for metric, unit in (("prefill_throughput", "tokens/s"), ("ttft", "s"), ("tpot", "s"),
                         ("itl", "s"), ("output_throughput", "tokens/s"),
                         ("decode_throughput", "tokens/s")):
        assert sorted(m.key["batch"] for m in by[metric]) in ([1, 4], [1])
        assert all(m.unit == unit and m.value > 0 for m in by[metric])
    if len(by["itl"]) == 1:
        assert any(n.startswith("generation at batch 4 skipped, because ") for n in notes)
    itl = next(m for m in by["itl"] if m.key["batch"] == 1)
    # generations x (new_tokens - 1) steps, each timed: the 2 asked for, or fewer where the
    # budget would not pay for one more (a slow VM), and then batch 4 was skipped for it too
    generations = itl.context["generations"]
    assert len(itl.samples) == generations * 3
    assert generations == 2 or (1 <= generations and len(by["itl"]) == 1)


def test_the_workload_runs_every_part_through_loadgen_on_this_cpu(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("mlperf_loadgen")
    from benchbench.core.sampling import Budget
    from benchbench.probes.api import ProbeContext, RunInputs
    from benchbench.workloads.inference import run as inference

    cfg = resolved("inference", batch_sizes=(1, 2), decode_batches=(1, 4), prompt_tokens=16,
                   new_tokens=4, image_size=32, min_sample_s=0.001)
    assert cfg.loadgen  # installed here: auto turns it on
    ctx = ProbeContext(device="cpu", policy=cfg.repeat_policy(2), budget=Budget(30.0),
                       facts=cpu_facts(), inputs=RunInputs(run_dir=str(tmp_path)))
    out = inference.run(ctx, cfg)
    by = {}
    for m in out.measurements:
        by.setdefault(m.metric, []).append(m)
    _check_offline_and_generation(by, out.notes)
    (lg_offline,) = by["loadgen_offline_throughput"]
    assert lg_offline.key["batch_size"] in (1, 2) and lg_offline.value > 0
    # LoadGen's count is what the SUT served, plus what it answered unserved past the run's
    # deadline (a VM that slowed after the sweep), which makes the run INVALID.
    c = lg_offline.context
    assert c["served"] + c["abandoned"] == c["samples"]
    assert c["abandoned"] == 0 or (not c["valid"] and "unserved" in c["why_invalid"])
    assert lg_offline.context["label"].startswith("LoadGen Offline, ")
    latency = by["server_latency"][-1]
    c = latency.context
    assert c["driver"] == "loadgen" and c["label"].startswith("LoadGen Server, ")
    # The bound: 5x one image's latency as a VALID LoadGen SingleStream run measured it.
    assert c["bound_source"].startswith("not MLPerf's (on a CPU): 5x LoadGen SingleStream's "
                                        "p90 latency of one image (a VALID run), ")
    assert latency.key["latency_bound_s"] >= 5 * c["batch1_latency_s"]
    assert "inference/single_stream_summary.txt" in c["logs"]
    assert c["tried"] and all(t["queries"] >= 459 or not t["valid"] for t in c["tried"])
    if c["meets_bound"]:
        (served,) = by["server_throughput"]
        # LoadGen's completed samples/s at the highest VALID target, the target beside it
        assert served.context["target_qps"] == latency.key["rate"] and served.context["valid"]
        assert served.value == served.context["completed_per_s"] > 0
        assert served.context["p99_s"] <= latency.key["latency_bound_s"]
    # MLPerf's official seeds, from LoadGen's built-in mlperf.conf
    assert c["settings_from"].startswith("mlperf.conf's resnet50 Server settings (qsl_rng_seed ")
    assert lg_offline.context["settings_from"].startswith("mlperf.conf's resnet50 Offline ")
    # LoadGen's logs are in the run folder, and the run lists them.
    assert out.artifacts and all((tmp_path / f).is_file() for f in out.artifacts)
    assert set(c["logs"]) <= set(out.artifacts) and out.params["loadgen"]
    # The report names them beside the figures they back, with LoadGen's settings.
    from benchbench.core.results import ProbeResult, RunResult
    from benchbench.reports import guide as guide_report

    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="inference", status="ok", resource="cpu_compute",
                    measurements=out.measurements)])
    text = "\n".join(guide_report.section(run))
    assert ("LoadGen's logs: `inference/offline_summary.txt`, `inference/offline_detail.txt`."
            in text)
    assert "LoadGen's settings: mlperf.conf's resnet50 Offline settings (qsl_rng_seed " in text


def test_without_loadgen_the_server_part_is_the_simulated_server_and_says_so(monkeypatch):
    pytest.importorskip("torch")
    from benchbench.workloads.inference import run as inference

    monkeypatch.setattr(inference, "loadgen_installed", lambda: False)
    out, by = _cpu_run(loadgen=True)  # asked for, not installed
    _check_offline_and_generation(by, out.notes)
    assert "loadgen_offline_throughput" not in by and out.artifacts == []
    assert any(n.startswith("LoadGen skipped, because mlperf_loadgen is not installed")
               for n in out.notes)
    latency = by["server_latency"][-1]
    assert latency.context["label"] == "simulated server (LoadGen not installed)"
    assert latency.context["driver"] == "simulated"
    assert latency.unit == "s" and len(latency.samples) == 40  # every request's latency kept
    assert latency.context["p99_s"] >= latency.context["p50_s"] > 0


def test_a_quick_run_without_loadgen_finds_the_simulated_h200s_server_rate():
    """Without LoadGen the simulated server starts below where the queue model on the
    measured batch times puts the bound. From half of one image at a time, a quick run's
    budget paid for one or two rates (164 requests/s on a real H200, 0.03x its offline
    peak), reported as a floor."""
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", True, 13.0,
                                  overrides={"loadgen": False})
    by = {}
    for m in sim.measurements:
        by.setdefault(m.metric, []).append(m)
    (served,) = by["server_throughput"]
    assert served.context["stopped_by"] != "budget" and not served.context["lower_bound"]
    assert served.context["p99_s"] <= 0.015
    assert any(t["p99_s"] > 0.015 for t in served.context["tried"])  # a rate above it missed
    peak = next(m for m in by["peak_offline_throughput"] if m.key["precision"] == "bf16")
    assert served.value > 0.5 * peak.value


@pytest.mark.parametrize("loadgen", [True, False])
def test_planning_on_the_simulated_h200_serves_within_the_bound(loadgen):
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", False, 60.0,
                                  overrides={"loadgen": loadgen})
    assert sim.duration_s <= 60.0
    by = {}
    for m in sim.measurements:
        by.setdefault(m.metric, []).append(m)
    (served,) = by["server_throughput"]
    assert served.context["p99_s"] <= 0.015 and served.value > 1000
    assert served.key["latency_bound_s"] == 0.015
    assert served.context["bound_source"].startswith("MLPerf's 15 ms")
    assert {m.key["precision"] for m in by["peak_offline_throughput"]} == {"bf16", "fp32"}
    assert sorted(m.key["batch"] for m in by["decode_throughput"]) == [1, 8, 64]
    if loadgen:
        assert served.context["label"].startswith("LoadGen Server, ")
        (offline,) = by["loadgen_offline_throughput"]
        assert offline.context["valid"] and offline.key["precision"] == "bf16"
    else:
        assert served.context["label"] == "simulated server (LoadGen not installed)"


def test_the_report_shows_loadgens_verdict_p99_and_completed_rate():
    pytest.importorskip("torch")
    from helpers import render_md

    from benchbench.core.results import ProbeResult, RunResult
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", False, 60.0,
                                  overrides={"loadgen": True})
    run = RunResult(tool={"version": "t"}, started_at="", environment={}, argv=[],
                    config={"device_resolved": "cuda"}, probes=[ProbeResult(
                        name="inference", status="ok", resource="gpu_compute",
                        measurements=sim.measurements)])
    text = render_md(run)
    section = text[text.index("### Inference"):]
    served = next(m for m in sim.measurements if m.metric == "server_throughput")
    c = served.context
    # LoadGen's completed samples/s, its target beside it
    assert served.value == c["completed_per_s"] and c["target_qps"] > served.value
    assert (f"Server ({c['label']}): {served.value:,.0f} samples/s completed, LoadGen's "
            f"figure, at a target of {c['target_qps']:,.0f} queries/s within the 15 ms p99 "
            "bound (MLPerf's 15 ms p99 for ResNet-50, server scenario).") in section
    assert (f"At {c['target_qps']:,.0f} requests/s LoadGen said VALID, p99 "
            f"{c['p99_s'] * 1e3:,.3g} ms") in section
    assert "LoadGen's logs: " not in section  # the simulator keeps none
    assert f"{c['completed_per_s']:,.0f} samples/s completed" in section
    assert "Offline (LoadGen Offline, " in section and ", VALID; " in section
    runs = next(m for m in sim.measurements if m.metric == "ttft").context["generations"]
    assert f", {runs} generation{'' if runs == 1 else 's'} a batch)" in section


def test_one_short_server_run_reads_not_judged_with_the_queries_it_needed():
    """One Server run too short for LoadGen's early stopping: the report and the guide say
    "not judged" and how many queries a VALID verdict needs, as the run recorded it."""
    from helpers import render_md

    from benchbench.analysis import guide
    from benchbench.core.results import Measurement, ProbeResult, RunResult

    context = {"driver": "loadgen", "label": "LoadGen Server, one 0.25 s run of 9 queries, "
               "not a submission-length 600 s run", "valid": False, "meets_bound": False,
               "why_invalid": "too few queries for early stopping", "short_run": True,
               "queries_for_valid": 459, "p50_s": 0.02, "p90_s": 0.05, "p99_s": 0.0557,
               "completed_per_s": 32.8, "mean_batch": 1.2, "stopped_by": "budget",
               "bound_source": "not MLPerf's (on a CPU)",
               "tried": [{"rate": 35.9, "valid": False, "retry": False, "p99_s": 0.0557}]}
    latency = Measurement(metric="server_latency", key={
        "precision": "fp32", "image_size": 32, "max_batch": 8, "latency_bound_s": 0.1,
        "rate": 35.9}, value=0.02, unit="s", statistic="median", samples=[0.02] * 11,
        higher_is_better=False, context=context)
    run = RunResult(tool={"version": "t"}, started_at="", environment={}, argv=[],
                    config={"device_resolved": "cpu"}, probes=[ProbeResult(
                        name="inference", status="ok", resource="cpu_compute",
                        measurements=[latency])])
    why = ("the time budget paid for one LoadGen Server run shorter than a VALID verdict "
           "needs (459 queries): a longer run (more --time-budget) measures it")
    assert guide.serving(run).check == f"not judged: {why}"
    text = render_md(run)
    assert f"Not judged: {why}." in text[text.index("### Inference"):]


def test_generation_attends_without_cudnn_and_matches_the_full_forward(monkeypatch):
    """cuDNN's attention, first on Hopper in recent PyTorch, builds a graph for every new key
    length (on two H200s each GPT-2 124M token took 35-58 ms with it allowed, 2.2 ms on a third
    without it). Generation
    leaves it out: every attention call runs with it disabled, and the cached prefill and
    decode still give the logits of the whole sequence run at once."""
    torch = pytest.importorskip("torch")
    from benchbench.workloads.models import gpt_generate
    from benchbench.workloads.models.gpt import GPT

    enabled = []
    real = gpt_generate.F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        enabled.append((torch.backends.cuda.cudnn_sdp_enabled(),
                        torch.backends.cuda.flash_sdp_enabled()))
        return real(*args, **kwargs)

    monkeypatch.setattr(gpt_generate.F, "scaled_dot_product_attention", spy)
    torch.manual_seed(0)
    model = GPT(2, 32, 4, 64, 16).eval()
    idx = torch.randint(0, 64, (2, 6))
    cache = gpt_generate.KVCache(model, 2, 8, torch.float32, torch.device("cpu"))
    gpt_generate.forward_cached(model, idx[:, :5], cache)
    cached = gpt_generate.forward_cached(model, idx[:, 5:], cache)
    assert enabled == [(False, True)] * 4  # 2 layers x (prefill, one decode step)
    assert torch.backends.cuda.cudnn_sdp_enabled()  # restored afterwards
    with torch.no_grad():
        x = model.wte(idx) + model.wpe(torch.arange(6))
        for block in model.blocks:
            x = block(x)
        full = model.lm_head(model.ln_f(x[:, -1:]))
    assert torch.allclose(cached, full, atol=1e-5)


def test_a_short_budget_drops_the_small_batches_not_the_plateau():
    """The sweep runs largest first: a quick run's budget measures the large batches, where
    the peak is, and drops the small ones, whose time is the host's launch path (smallest
    first, the real H200's quick run stopped at batch 16 and called that its peak)."""
    pytest.importorskip("torch")
    from benchbench.analysis import inference
    from benchbench.core.results import ProbeResult
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "inference", True, 13.0,
                                  overrides={"loadgen": False})
    bf16 = {m.key["batch_size"] for m in sim.measurements
            if m.metric == "offline_throughput" and m.key["precision"] == "bf16"}
    assert 256 in bf16 and 1 not in bf16
    assert any(n.startswith("offline bf16 batches 1-") and n.endswith(
        "skipped, because the time budget ran short") for n in sim.notes)
    pr = ProbeResult(name="inference", status="ok", resource="gpu_compute",
                     measurements=sim.measurements, reason="; ".join(sim.notes),
                     params={"batch_sizes": [2**i for i in range(9)]})
    peak = next(m for m in sim.measurements if m.metric == "peak_offline_throughput"
                and m.key["precision"] == "bf16")
    assert not inference.is_floor(pr, peak)  # the plateau was measured: the peak itself
    # The simulated H200's batches below 16 grow linearly: the host's launch path.
    host = inference.host_bound(pr)
    assert ("bf16", min(bf16)) in host and ("bf16", 64) not in host
