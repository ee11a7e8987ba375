"""Multi-node runs: the launchers' variables, starting together, gathering on rank 0, the
interconnect analysis and report, and a real 2-node run between two network namespaces."""

import json
import sys

import pytest
from helpers import render_md
from netns import two_hosts

from benchbench.analysis import scaling
from benchbench.core.config import ConfigError
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.engine import launch, multinode
from benchbench.engine.isolation import Outcome
from benchbench.reports import markdown

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "1",
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
SRUN = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "16", "SLURM_LOCALID": "5",
        "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123457"}


def test_torchrun_variables():
    env = launch.from_environ(TORCHRUN)
    assert env == launch.DistEnv("torchrun", 3, 8, 1, 1, "10.0.0.1", 29500)
    assert not env.is_master and not env.is_node_leader
    assert env.port_for("allreduce") == 29500 + launch.PORT_OFFSETS["allreduce"]


def test_srun_variables_and_the_master_from_the_node_list():
    from benchbench.engine.launch import master_port

    env = launch.from_environ(SRUN)
    assert (env.launcher, env.rank, env.world_size, env.local_rank, env.node_rank) == (
        "slurm", 5, 16, 5, 0)
    assert env.master_addr == "gpu07" and env.master_port == master_port(123457)
    assert launch.from_environ({**SRUN, "MASTER_ADDR": "a", "MASTER_PORT": "4000"}
                               ).master_addr == "a"


def test_no_launcher_or_one_process_is_a_single_node_run():
    assert launch.from_environ({}) is None
    assert launch.from_environ({**TORCHRUN, "RANK": "0", "WORLD_SIZE": "1"}) is None
    # inside an sbatch script but not under srun: no step task count
    assert launch.from_environ({k: v for k, v in SRUN.items()
                                if k != "SLURM_STEP_NUM_TASKS"}) is None


@pytest.mark.parametrize("env,needle", [
    ({**TORCHRUN, "RANK": "x"}, "RANK='x' in the environment is not an integer"),
    ({**TORCHRUN, "RANK": "8"}, "rank 8 does not fit a world of 8"),
    ({k: v for k, v in TORCHRUN.items() if k != "MASTER_ADDR"}, "MASTER_ADDR is not set"),
    ({**TORCHRUN, "MASTER_PORT": "65533"}, "must lie below 65536"),
])
def test_bad_launcher_variables_are_one_line_errors(env, needle):
    with pytest.raises(ConfigError, match=needle):
        launch.from_environ(env)


@pytest.mark.parametrize("nodelist,first", [
    ("gpu07", "gpu07"), ("gpu[07-08]", "gpu07"), ("a[3,5-9],b1", "a3"), ("n1,n2", "n1")])
def test_first_host_of_a_slurm_node_list(nodelist, first):
    assert launch.first_host(nodelist) == first


class FakeIsolator:
    def __init__(self, value=None, ok=True):
        self.value, self.ok, self.payloads = value, ok, []

    def call(self, target, payload, **kw):
        self.payloads.append(payload)
        return Outcome(self.ok, value=self.value, error=None if self.ok else "no store")


def test_a_rank_that_refused_its_input_stops_the_others_with_its_message():
    env = launch.from_environ(TORCHRUN)
    values = [json.dumps({"host": "n0", "error": None}),
              json.dumps({"host": "n1", "error": "--out x: folder is not empty"})]
    with pytest.raises(multinode.RankError, match="rank 1 on n1 refused its input: --out x"):
        multinode.start_together(FakeIsolator(values), env, None)
    multinode.start_together(FakeIsolator([values[0]]), env, None)  # all fine: returns
    with pytest.raises(multinode.RankError, match="start with the other ranks failed"):
        multinode.start_together(FakeIsolator(ok=False), env, None)


def _probe(name, status, **kw):
    return ProbeResult(name=name, status=status, resource="interconnect", **kw)


def _run(probes, environment=None):
    return RunResult(tool={"name": "benchbench", "version": "t"}, label="t",
                     started_at="2026-11-30T00:00:00+00:00",
                     environment=environment or {"host": {"hostname": "n0"}},
                     config={}, argv=[], probes=probes)


def test_rank_zero_merges_every_rank_and_the_other_nodes():
    env = launch.DistEnv("slurm", 0, 4, 0, 0, "n0", 20000)
    run = _run([_probe("allreduce", "ok"), _probe("matmul", "ok")])
    reports = [
        {"rank": 0, "local_rank": 0, "node_rank": 0, "host": "n0", "environment": {},
         "dataset": None, "probes": []},
        {"rank": 1, "local_rank": 1, "node_rank": 0, "host": "n0", "environment": None,
         "dataset": None, "probes": [{"name": "allreduce", "status": "skipped"}]},
        {"rank": 2, "local_rank": 0, "node_rank": 1, "host": "n1", "environment": {"x": 1},
         "dataset": None, "probes": [{"name": "allreduce", "status": "skipped"},
                                     {"name": "matmul", "status": "failed", "reason": "boom"}]},
        {"rank": 3, "local_rank": 1, "node_rank": 1, "host": "n1", "environment": None,
         "dataset": None, "probes": []},
    ]
    multinode.merge(run, env, reports, {"allreduce", "ddp_scaling"})
    dist = run.extra["distributed"]
    assert (dist["world_size"], dist["nodes"], dist["hosts"]) == (4, 2, ["n0", "n1"])
    assert [n["host"] for n in run.extra["nodes"]] == ["n1"]
    assert run.extra["nodes"][0]["probes"] == [
        {"name": "matmul", "status": "failed", "reason": "boom"}]
    assert multinode.failed_elsewhere(reports) == ["rank 2 (n1): matmul: boom"]
    text = render_md(run)
    assert "**Launched by slurm**: 4 ranks on 2 nodes" in text
    assert "node n1 (rank 2): matmul failed" in text


def _ddp_run(throughputs, context=None):
    ms = [
        Measurement(
            metric="throughput",
            key={"ranks": n, "precision": "amp_bf16"},
            value=t,
            unit="samples/s",
            statistic="total_over_time",
            samples=[t],
            higher_is_better=True,
            context=context or {},
        )
        for n, t in throughputs.items()
    ]
    return _run([_probe("ddp_scaling", "ok", measurements=ms)])


def test_ddp_efficiency_marginal_and_knee():
    d = scaling.ddp_scaling(_ddp_run({1: 1000, 2: 1980, 4: 3900, 8: 6500}))
    rows = {r["ranks"]: r for r in d["rows"]}
    assert rows[2]["efficiency"] == pytest.approx(0.99)
    assert rows[4]["marginal"] == pytest.approx((3900 - 1980) / 2000)  # 0.96
    assert rows[8]["marginal"] == pytest.approx((6500 - 3900) / 4000)  # 0.65
    assert d["knee"] == 4 and d["guide_knee"] == 4
    # once a count falls below 0.9 the knee stays, even if a later count recovers
    assert scaling.ddp_scaling(_ddp_run({1: 100, 2: 150, 4: 400}))["knee"] == 1
    assert scaling.ddp_scaling(_ddp_run({2: 10}))["reason"]


def test_cpu_ddp_is_not_read_as_an_interconnect_limit():
    run = _ddp_run({1: 10, 2: 9}, {"functional_check_only": "2 CPU ranks share 2 cores"})
    text = render_md(run)
    assert "A functional check only: 2 CPU ranks share 2 cores" in text
    assert "Cost knee" not in text


def _allreduce_run(busbw, world=2, nodes=1, backend="nccl", nccl=None, topology=None):
    ctx = {"nccl": nccl or {}}
    key = {"backend": backend, "dtype": "fp32", "world_size": world, "nodes": nodes}
    ms = [
        Measurement(
            metric="peak_busbw",
            key=key,
            value=busbw,
            unit="B/s",
            statistic="max",
            samples=[busbw],
            higher_is_better=True,
            context={**ctx, "best_size_bytes": 1024**3},
        )
    ]
    pr = _probe("allreduce", "ok", measurements=ms,
                params={"backend": backend, "world_size": world})
    return _run([pr], {"host": {"hostname": "n0"}, "topology": topology})


NVSWITCH = {"pairs": [{"a": 0, "b": 1, "path": "NVLink ×18 via NVSwitch",
                       "per_direction": 450e9}]}


def test_busbw_against_the_link_it_ran_over():
    a = scaling.allreduce_vs_link(_allreduce_run(370e9, topology=NVSWITCH))
    assert a["link"] == "NVLink ×18 via NVSwitch" and a["fraction"] == pytest.approx(370 / 450)
    assert "in line" in a["finding"]
    low = scaling.allreduce_vs_link(_allreduce_run(100e9, topology=NVSWITCH))
    assert "under 60%" in low["finding"]
    # above the wire: explained by NVLS when NCCL's log shows it, flagged when it does not
    nvls = scaling.allreduce_vs_link(_allreduce_run(480e9, topology=NVSWITCH,
                                                    nccl={"nvls_used": True}))
    assert "NVLS or SHARP in-switch" in nvls["finding"]
    odd = scaling.allreduce_vs_link(_allreduce_run(480e9, topology=NVSWITCH))
    assert "topology reading may be wrong" in odd["finding"]


def test_cross_node_busbw_against_the_100_gbps_rule():
    slow = scaling.allreduce_vs_link(_allreduce_run(9e9, world=16, nodes=2))
    assert slow["cross_node"]["passes"] is False and slow["cross_node"]["minimum"] == 12.5e9
    text = render_md(_allreduce_run(9e9, world=16, nodes=2))
    assert "across 2 nodes: **misses** the guide's >= 100 Gbps" in text
    assert scaling.allreduce_vs_link(_allreduce_run(20e9, world=16, nodes=2)
                                     )["cross_node"]["passes"]
    cpu = scaling.allreduce_vs_link(_allreduce_run(0.5e9, backend="gloo"))
    assert "no link rate" in cpu["reason"]


@pytest.mark.slow
def test_two_node_run_between_network_namespaces(tmp_path):
    """Two hosts joined by a veth pair, each launched as multi-node torchrun launches it:
    the all-reduce crosses the link, and rank 0 gathers both nodes into one run folder."""
    pytest.importorskip("torch")
    out = tmp_path / "run"
    with two_hosts() as hosts:
        argvs = [[sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                  "--node-rank", str(node), "--nproc-per-node", "1",
                  "--master-addr", hosts.ips[0], "--master-port", "29500",
                  # torchrun's logs in the test's folder: by default each agent leaves a
                  # torchelastic_* folder in /tmp
                  "--log-dir", str(tmp_path / f"torchrun{node}"),
                  "-m", "benchbench", "run", "--only", "allreduce,memory_bandwidth",
                  "--device", "cpu", "--quick", "--time-budget", "8",
                  "--set", "allreduce.sizes=1K,64K,1M",
                  "--set", "memory_bandwidth.host_size_bytes=64M", "--out", str(out)]
                 for node in (0, 1)]
        done = hosts.run_both(argvs, env={"OMP_NUM_THREADS": "1"}, timeout_s=150)
    assert [d.returncode for d in done] == [0, 0], done[0].output + done[1].output
    assert "results sent to rank 0" in done[1].output
    data = json.loads((out / "results.json").read_text())
    probes = {p["name"]: p for p in data["probes"]}
    assert probes["allreduce"]["status"] == "ok"
    busbw = [m for m in probes["allreduce"]["measurements"] if m["metric"] == "busbw"]
    assert {m["key"]["nodes"] for m in busbw} == {2} and len(busbw) == 3
    assert data["distributed"]["world_size"] == 2 and data["distributed"]["nodes"] == 2
    # node 1's leader ran the per-node probe; rank 0 carried it into the run folder
    assert [p["name"] for p in data["nodes"][0]["probes"]] == ["memory_bandwidth"]
    assert data["nodes"][0]["probes"][0]["status"] == "ok"
    assert "across 2 nodes" in (out / "report.md").read_text()


def test_environment_names_the_path_between_each_gpu_pair():
    topo = {"pairs": [
        {"a": 0, "b": 1, "path": "NVLink ×4", "p2p_read": "ok"},
        {"a": 2, "b": 3, "path": "NVLink ×4", "p2p_read": "ok"},
        {"a": 0, "b": 2, "path": "PCIe Gen4 x16 through the host bridge",
         "p2p_read": "not supported"}]}
    text = "\n".join(markdown.environment_section({"topology": topo}))
    assert ("| GPU links | 0-1, 2-3: NVLink ×4 (P2P ok); 0-2: PCIe Gen4 x16 through the host "
            "bridge (P2P not supported) |") in text
    assert "GPU links" not in "\n".join(markdown.environment_section({"topology": None}))
