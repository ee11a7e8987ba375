"""The two-namespace harness carries a real 2-node torchrun gloo job between its hosts."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from netns import two_hosts

# Node 0 hosts torchrun's store here; a fresh namespace has no other listener.
MASTER_PORT = 29500
# Measured at 7 to 18 s on a 2-core machine (two torch imports per node); the margin is
# for a loaded CI box, and a hung rendezvous still ends well inside a minute.
TIMEOUT_S = 50

ALL_REDUCE = textwrap.dedent(
    """
    import sys

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    tensor = torch.ones(4)
    dist.all_reduce(tensor)
    with open(sys.argv[1], "w") as out:
        out.write(f"{dist.get_rank()} {dist.get_world_size()} {tensor.tolist()}")
    dist.destroy_process_group()
    """
)


@pytest.fixture
def hosts():
    with two_hosts() as pair:
        yield pair


@pytest.mark.slow
def test_torchrun_gloo_all_reduce_across_two_namespaces(hosts, tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    outs = [tmp_path / f"node{rank}.txt" for rank in (0, 1)]
    argvs = [
        [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "2", "--node-rank", str(rank), "--nproc-per-node", "1",
            "--master-addr", hosts.ips[0], "--master-port", str(MASTER_PORT),
            "--log-dir", str(tmp_path / f"torchrun{rank}"),  # not a torchelastic_* in /tmp
            str(script), str(outs[rank]),
        ]
        for rank in (0, 1)
    ]

    finished = hosts.run_both(argvs, env={"OMP_NUM_THREADS": "1"}, timeout_s=TIMEOUT_S)

    for rank, done in enumerate(finished):
        assert done.returncode == 0, f"node {rank} failed:\n{done.output}"
    assert [out.read_text() for out in outs] == [
        "0 2 [2.0, 2.0, 2.0, 2.0]",
        "1 2 [2.0, 2.0, 2.0, 2.0]",
    ]


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_ctrl_c_still_kills_what_runs_inside_and_deletes_both_namespaces():
    with pytest.raises(KeyboardInterrupt), two_hosts() as pair:
        sleeper = pair.popen(0, [sys.executable, "-c", "import time; time.sleep(600)"])
        raise KeyboardInterrupt
    assert sleeper.poll() is not None
    assert not any(name in _namespaces() for name in pair.names)


def test_run_both_kills_both_hosts_when_one_hangs(hosts):
    hang = [sys.executable, "-c", "import time; print('hanging', flush=True); time.sleep(600)"]
    quick = [sys.executable, "-c", "print('done')"]
    with pytest.raises(pytest.fail.Exception, match=r"(?s)within 1 s.*host 0 ---\nhanging"):
        hosts.run_both([hang, quick], timeout_s=1)
    for name in hosts.names:
        inside = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        assert inside.stdout.split() == []


def test_namespaces_left_by_a_dead_run_are_swept():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f"benchbench-{dead.pid}-0badc0-0"
    if subprocess.run(["ip", "netns", "add", stale], capture_output=True).returncode != 0:
        pytest.skip("network namespaces unavailable: `ip netns add` failed")
    try:
        with two_hosts():
            assert stale not in _namespaces()
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True)


def test_a_refused_ip_command_skips_with_its_reason(tmp_path, monkeypatch):
    fake_ip = tmp_path / "ip"
    fake_ip.write_text("#!/bin/sh\necho 'mkdir /run/netns failed: Permission denied' >&2\nexit 1\n")
    fake_ip.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(pytest.skip.Exception) as skipped, two_hosts():
        pass
    assert str(skipped.value.msg).startswith("network namespaces unavailable: `ip netns add")
    assert str(skipped.value.msg).endswith("mkdir /run/netns failed: Permission denied")
