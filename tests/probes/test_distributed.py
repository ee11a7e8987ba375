"""The distributed probes for real on CPU ranks (gloo): all-reduce sweep, DDP scaling, the rank
launcher's timeouts and port handling, and the store exchange multi-node runs use."""

import socket
import threading

import pytest
from helpers import resolved

torch = pytest.importorskip("torch")

from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.engine.launch import free_port  # noqa: E402
from benchbench.machine.environment import torch_facts  # noqa: E402
from benchbench.probes import _ranks  # noqa: E402
from benchbench.probes.allreduce import run as allreduce  # noqa: E402
from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs  # noqa: E402
from benchbench.workloads.ddp_scaling import run as ddp_scaling  # noqa: E402


def ctx(budget=20.0, inputs=None):
    seen = []
    c = ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=3, max_repeats=3, warmup_s=0.0),
                     budget=Budget(budget), facts=torch_facts(),
                     progress=lambda *a: seen.append(a), inputs=inputs or RunInputs())
    return c, seen


def spec(**kw):
    base = dict(target="tests.support.isolation_targets:echo_rank", payload=None, rank=0,
                world_size=2, local_rank=0, backend="gloo", device="cpu",
                master_addr="127.0.0.1", port=0, timeout_s=3.0, prefix="test")
    return _ranks.RankSpec(**{**base, **kw})


def test_two_gloo_ranks_sweep_small_sizes():
    c, seen = ctx()
    out = allreduce.run(c, resolved("allreduce", sizes=(1024, 65536, 1024**2), iters=5, warmup=2,
                                           timeout_s=30))
    by = {(m.metric, m.key.get("size_bytes")): m for m in out.measurements}
    assert {s for (metric, s) in by if metric == "busbw"} == {1024, 65536, 1024**2}
    for size in (1024, 65536, 1024**2):
        t, alg, bus = by["allreduce_time", size], by["algbw", size], by["busbw", size]
        assert t.unit == "s" and not t.higher_is_better and len(t.samples) == 3
        assert all(s > 0 for s in t.samples)
        # algbw = bytes / time per sample; busbw = algbw x 2(n-1)/n, which is 1 at n = 2
        assert alg.samples == pytest.approx([size / s for s in t.samples])
        assert bus.samples == pytest.approx(alg.samples)
        assert t.key["world_size"] == 2 and t.key["backend"] == "gloo"
    peak = by["peak_busbw", None]
    assert peak.statistic == "max" and peak.value == max(by["busbw", s].value
                                                         for s in (1024, 65536, 1024**2))
    assert out.params["backend"] == "gloo" and out.params["world_size"] == 2
    assert seen[-1][0] == "done"  # rank 0's progress crossed the process boundary


@pytest.fixture
def no_ranks(monkeypatch):
    """Fails a probe that starts a rank: one that skips must say so before it pays for any."""
    def refuse(*args, **kwargs):
        raise AssertionError("ranks were spawned")

    monkeypatch.setattr(allreduce, "run_ranks", refuse)
    monkeypatch.setattr(ddp_scaling, "run_ranks", refuse)


def one_gpu():
    from benchbench.engine import simulate

    facts = simulate.facts_for(simulate.H200)
    assert facts["cuda_device_count"] == 1
    return ProbeContext(device="cuda", policy=RepeatPolicy(min_repeats=3, max_repeats=3),
                        budget=Budget(20.0), facts=facts)


@pytest.mark.usefixtures("no_ranks")
def test_one_rank_has_nothing_to_exchange_and_starts_no_rank():
    c, _ = ctx()
    with pytest.raises(ProbeSkipped, match=r"^one rank: there is nothing to exchange"):
        allreduce.run(c, resolved("allreduce", sizes=(4096,), iters=3, warmup=1, ranks=1))
    with pytest.raises(ProbeSkipped, match=r"^one GPU: there is nothing to exchange"):
        allreduce.run(one_gpu(), resolved("allreduce", "cuda", facts=one_gpu().facts))
    assert allreduce.nothing_to_exchange(2, "cpu") is None
    assert allreduce.nothing_to_exchange(8, "cuda") is None


@pytest.mark.usefixtures("no_ranks")
def test_ddp_at_one_rank_has_nothing_to_exchange_and_starts_no_rank():
    with pytest.raises(ProbeSkipped, match=r"^one GPU: there is nothing to exchange .*no "
                                           r"scaling to read"):
        ddp_scaling.run(one_gpu(), resolved("ddp_scaling", "cuda", facts=one_gpu().facts))
    c, _ = ctx()
    with pytest.raises(ProbeSkipped, match=r"^one rank: there is nothing to exchange"):
        ddp_scaling.run(c, resolved("ddp_scaling", counts=(1,)))
    assert ddp_scaling.nothing_to_exchange([1, 2], "cpu") is None
    assert ddp_scaling.nothing_to_exchange([4], "cuda") is None  # one count, but exchanging


def test_bus_factor_follows_nccl_tests():
    assert allreduce.bus_factor(1) == 0
    assert allreduce.bus_factor(2) == 1
    assert allreduce.bus_factor(8) == pytest.approx(1.75)
    rows = [{"bytes": 1000, "iters": 1, "time_s": [1e-3, 2e-3]}]
    ms = {m.metric: m for m in allreduce._measurements(rows, {"world_size": 8}, 8, {})}
    assert ms["algbw"].samples == pytest.approx([1e6, 5e5])
    assert ms["busbw"].samples == pytest.approx([1.75e6, 8.75e5])
    assert ms["busbw"].value == pytest.approx(1.75e6 * 0.75)  # median of the two


def test_nccl_on_a_cpu_run_is_skipped_with_the_reason():
    with pytest.raises(ProbeSkipped, match="NCCL needs CUDA GPUs"):
        allreduce.choose_backend("nccl", "cpu")
    assert allreduce.choose_backend("auto", "cpu") == "gloo"


def test_ddp_scaling_at_one_and_two_cpu_ranks():
    c, _ = ctx(budget=40.0)
    cfg = resolved("ddp_scaling", counts=(1, 2), batch_size=2, image_size=32, steps=2,
                           warmup_steps=1, channels_last=False, timeout_s=60)
    out = ddp_scaling.run(c, cfg)
    tput = {m.key["ranks"]: m for m in out.measurements if m.metric == "throughput"}
    assert set(tput) == {1, 2}
    for m in tput.values():
        assert m.unit == "samples/s" and m.value > 0 and len(m.samples) == 2
        assert m.context["functional_check_only"]  # CPU ranks: contention, not a link
        assert m.key["batch_per_rank"] == 2
    step = {m.key["ranks"]: m for m in out.measurements if m.metric == "step_time"}
    # throughput counts every rank's batch: 2 ranks x 2 images per step
    assert tput[2].value == pytest.approx(4 * 2 / sum(step[2].samples))


def test_counts_are_powers_of_two_and_the_world():
    assert ddp_scaling.counts_for(1, None) == [1]
    # the ends first: scaling efficiency needs one rank and all of them
    assert ddp_scaling.counts_for(6, None) == [1, 6, 2, 4]
    assert ddp_scaling.counts_for(8, None) == [1, 8, 2, 4]
    assert ddp_scaling.counts_for(4, (1, 3, 16)) == [1, 3]
    assert ddp_scaling.counts_for(4, (2,)) == [2]


def test_a_rank_that_never_joins_is_named_within_the_timeout():
    # Only rank 0 of two starts: the rendezvous gives up after timeout_s, naming rank 1.
    port = free_port()
    with pytest.raises(_ranks.RankFailure, match=r"rank 0 \(gloo\): rank 1 did not join "
                                                  r"within 2 s"):
        _ranks.run_rank(spec(port=port, timeout_s=2.0))


def test_a_hung_collective_fails_within_its_timeout():
    # Rank 1 never enters the all-reduce rank 0 waits in: gloo's timeout ends it.
    base = spec(target="tests.support.isolation_targets:rank_one_hangs", timeout_s=3.0)
    with pytest.raises(_ranks.RankFailure, match=r"rank.*\(gloo\)"):
        _ranks.spawn_local(base, work_s=1.0)


def test_a_rank_runs_with_its_imports_frozen():
    """As in a probe's worker: a rank's free_memory between counts looks at what the rank made,
    not at the objects of torch's imports."""
    base = spec(target="tests.support.isolation_targets:frozen_objects", timeout_s=20.0)
    assert _ranks.spawn_local(base, work_s=5.0) > 10_000


def test_a_port_taken_between_choice_and_bind_is_replaced(monkeypatch):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    ports = iter([taken])
    monkeypatch.setattr(_ranks, "free_port", lambda host: next(ports, None) or free_port())
    try:
        assert _ranks.spawn_local(spec(timeout_s=20.0), work_s=5.0) == {"rank": 0, "world": 2}
    finally:
        busy.close()


def test_a_busy_master_port_is_reported():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with pytest.raises(_ranks.PortInUse, match="already in use"):
            _ranks.run_rank(spec(port=busy.getsockname()[1]))
    finally:
        busy.close()


def test_exchange_gives_every_rank_all_values():
    launched = {"rank": 0, "world_size": 2, "local_rank": 0, "master_addr": "127.0.0.1",
                "master_port": free_port() - 1}
    got = {}

    def rank(r):
        got[r] = _ranks.exchange({**launched, "rank": r, "local_rank": r}, "start",
                                 f"value {r}", 20.0, to_all=r == 0 or r == 1)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == {0: ["value 0", "value 1"], 1: ["value 0", "value 1"]}


NCCL_LOG = """\
gpu07:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>
NCCL version 2.21.5+cuda12.4
gpu07:1234:1290 [0] NCCL INFO NVLS multicast support is available on dev 0
gpu07:1234:1290 [0] NCCL INFO Channel 00/02 :    0   1   2   3
gpu07:1234:1290 [0] NCCL INFO Channel 01/02 :    0   1   2   3
gpu07:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu07:1234:1290 [0] NCCL INFO Connected all rings
gpu07:1234:1290 [0] NCCL INFO NVLS comm 0x55a7be5601c0 headRank 0 nHeads 4 buffSize 4194304
"""


def test_nccl_facts_from_its_debug_log():
    facts = allreduce.nccl_facts(NCCL_LOG)
    assert facts == {"version": "2.21.5+cuda12.4", "nvls_available": True, "ring_channels": 2,
                     "transports": ["P2P/CUMEM"], "algorithms": None, "nvls_used": True}
    assert allreduce.nccl_facts("")["algorithms"] is None
    no_nvls = "x [0] NCCL INFO NVLS multicast support is not available on dev 0\n"
    assert allreduce.nccl_facts(no_nvls)["nvls_available"] is False
