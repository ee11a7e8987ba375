"""Two "hosts" on one Linux machine: two network namespaces joined by a veth pair.

A multi-node test uses it to run one node per namespace, each with its own IP address,
so that traffic goes over a real link (the veth) instead of loopback:

    with two_hosts() as hosts:
        procs = [hosts.popen(i, argv_for_node(i), env) for i in (0, 1)]

or, for two processes that must both end in time (the other is killed if one hangs):

        results = hosts.run_both([argv0, argv1], env, timeout_s=60)

`two_hosts()` skips the calling test ("network namespaces unavailable: …") where
namespaces cannot be made: not Linux, no `ip` binary, not root, EPERM inside a
restricted container, no veth support, or no traffic across the pair. It always
tears down what it made, on failure, on a skip, and on KeyboardInterrupt: it kills
every process still inside either namespace, then deletes the namespaces, and the
veth pair goes with them (it never exists outside them). A run killed with SIGKILL
cannot clean up, so the next `two_hosts()` deletes namespaces left by a dead pid.

Notes for a torch.distributed job across the two namespaces:

- Gloo must bind to the veth. Both namespaces share this machine's hostname, which
  resolves to an address outside them (127.0.0.1 here), so without GLOO_SOCKET_IFNAME
  each rank advertises that address and connectFullMesh fails with "Connection refused".
  `popen` sets GLOO_SOCKET_IFNAME to `hosts.ifname` (the veth has this name in both
  namespaces) unless the caller's env sets it.
- Multi-node torchrun works with its default static rendezvous and no extra flags:
  `python -m torch.distributed.run --nnodes 2 --node-rank {0,1} --nproc-per-node 1
  --master-addr <hosts.ips[0]> --master-port <port> script.py`. The static rendezvous
  uses --master-addr as given and never resolves the local hostname.
- `--rdzv-backend c10d --rdzv-endpoint <hosts.ips[0]>:<port>` needs two more flags on
  each node i, else both nodes hang in rendezvous:
  `--rdzv-conf is_host={1 if i == 0 else 0}`, because torchrun decides who hosts the
  store by matching the endpoint against the hostname's addresses (127.0.0.1 here), so
  neither node would host it; and `--local-addr <hosts.ips[i]>`, because node 0
  otherwise publishes socket.getfqdn() as the workers' MASTER_ADDR, which node 1
  resolves to its own loopback.
- Each namespace starts with no listening sockets, so any fixed port is free there, and
  parallel runs cannot clash on ports; namespace names hold the pid and a random tag.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

# Each namespace has its own routing table holding only the veth's /24, so this subnet
# cannot clash with the machine's networks, nor with another run's namespaces.
SUBNET = "10.213.7"
PREFIX_LEN = 24
IFNAME = "bbveth0"
_NAME_PREFIX = "benchbench"
# A namespace-local port for the connectivity check; nothing else listens in a new namespace.
_CHECK_PORT = 7
_CHECK_TIMEOUT_S = 10.0
_IP_TIMEOUT_S = 10.0


class _Unavailable(Exception):
    """A setup step failed in a way that means this machine cannot host namespaces."""


@dataclass(frozen=True)
class Finished:
    """How one process ended: its exit code and its merged stdout and stderr."""

    returncode: int
    output: str


@dataclass
class TwoHosts:
    """Two namespaces joined by a veth pair; index 0 and 1 pick a host."""

    names: tuple[str, str]
    ips: tuple[str, str]
    # The veth end carries this name in both namespaces, as eth0 does on real nodes.
    ifname: str = IFNAME
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)

    def popen(
        self,
        ns_index: int,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        **kw,
    ) -> subprocess.Popen:
        """Start `argv` inside namespace `ns_index` (argument lists only, never a shell).

        The child sees os.environ, then GLOO_SOCKET_IFNAME=`ifname`, then `env` on top.
        Extra keyword arguments go to subprocess.Popen. The process is killed at teardown
        if it is still running.
        """
        full_env = {**os.environ, "GLOO_SOCKET_IFNAME": self.ifname, **(env or {})}
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.names[ns_index], *argv], env=full_env, **kw
        )
        self._procs.append(proc)
        return proc

    def run_both(
        self,
        argvs: Sequence[Sequence[str]],
        env: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> list[Finished]:
        """Run argvs[0] in host 0 and argvs[1] in host 1 together, and wait for both.

        Fails the test with both outputs if they have not both ended within `timeout_s`,
        after killing every process in both namespaces.
        """
        with contextlib.ExitStack() as stack:
            logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in argvs]
            procs = [
                self.popen(i, argv, env, stdout=log, stderr=subprocess.STDOUT)
                for i, (argv, log) in enumerate(zip(argvs, logs, strict=True))
            ]
            deadline = time.monotonic() + timeout_s
            timed_out = False
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
                    break
            if timed_out:
                self.kill_all()
            outputs = []
            for log in logs:
                log.seek(0)
                outputs.append(log.read().decode(errors="replace"))
        if timed_out:
            shown = "\n".join(f"--- host {i} ---\n{out}" for i, out in enumerate(outputs))
            pytest.fail(f"the two hosts did not finish within {timeout_s:g} s\n{shown}")
        return [Finished(p.returncode, out) for p, out in zip(procs, outputs, strict=True)]

    def kill_all(self) -> None:
        """SIGKILL every process inside either namespace and reap the ones started here.

        Killing by namespace rather than by process group matters: torchrun starts its
        workers in new sessions, so they would outlive a killed process group.
        """
        for name in self.names:
            _kill_namespace_pids(name)
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


@contextlib.contextmanager
def two_hosts() -> Iterator[TwoHosts]:
    """Make two namespaces joined by a veth pair, check traffic crosses it, yield them.

    Skips the calling test where namespaces are unavailable; always tears down.
    """
    if not sys.platform.startswith("linux"):
        pytest.skip(f"network namespaces unavailable: {sys.platform} is not Linux")
    if shutil.which("ip") is None:
        pytest.skip("network namespaces unavailable: no `ip` binary on PATH (iproute2)")
    _delete_stale_namespaces()
    tag = f"{_NAME_PREFIX}-{os.getpid()}-{secrets.token_hex(3)}"
    hosts = TwoHosts(names=(f"{tag}-0", f"{tag}-1"), ips=(f"{SUBNET}.1", f"{SUBNET}.2"))
    created: list[str] = []
    try:
        try:
            _set_up(hosts, created)
        except _Unavailable as exc:
            pytest.skip(f"network namespaces unavailable: {exc}")
        yield hosts
    finally:
        _tear_down(hosts, created)


def _set_up(hosts: TwoHosts, created: list[str]) -> None:
    for name in hosts.names:
        _ip(["netns", "add", name])
        created.append(name)
    ns0, ns1 = hosts.names
    # Created inside the namespaces, so no veth end ever sits in the root namespace
    # where a failed teardown could leave it behind.
    veth = ["type", "veth", "peer", "name", hosts.ifname, "netns", ns1]
    _ip(["-n", ns0, "link", "add", "name", hosts.ifname, *veth])
    for name, addr in zip(hosts.names, hosts.ips, strict=True):
        _ip(["-n", name, "addr", "add", f"{addr}/{PREFIX_LEN}", "dev", hosts.ifname])
        _ip(["-n", name, "link", "set", "lo", "up"])
        _ip(["-n", name, "link", "set", hosts.ifname, "up"])
    _check_traffic(hosts)


def _ip(args: list[str]) -> None:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _Unavailable(f"`ip {' '.join(args)}` failed: {exc}") from exc
    if done.returncode != 0:
        why = done.stderr.strip() or f"exit code {done.returncode}"
        raise _Unavailable(f"`ip {' '.join(args)}` failed: {why}")


# Python rather than ping: ping is often missing from slim images, Python never is here.
_SERVER = """
import socket, sys
with socket.create_server((sys.argv[1], int(sys.argv[2]))) as srv:
    srv.settimeout(float(sys.argv[3]))
    conn, _ = srv.accept()
    with conn:
        conn.sendall(b"ok")
"""
_CLIENT = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[3])
while True:
    try:
        with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1) as conn:
            sys.exit(0 if conn.recv(2) == b"ok" else 1)
    except ConnectionRefusedError:  # the server in the other namespace is not listening yet
        if time.monotonic() > deadline:
            raise
        time.sleep(0.02)
"""


def _check_traffic(hosts: TwoHosts) -> None:
    """A TCP round trip from host 1 to host 0 across the veth."""
    args = [hosts.ips[0], str(_CHECK_PORT), str(_CHECK_TIMEOUT_S)]
    server = subprocess.Popen(
        ["ip", "netns", "exec", hosts.names[0], sys.executable, "-c", _SERVER, *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        client = subprocess.run(
            ["ip", "netns", "exec", hosts.names[1], sys.executable, "-c", _CLIENT, *args],
            capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S + 5,
        )
        server_out, _ = server.communicate(timeout=_CHECK_TIMEOUT_S + 5)
    except subprocess.TimeoutExpired as exc:
        server.kill()
        server.wait()
        raise _Unavailable(f"no TCP traffic from {hosts.ips[1]} to {hosts.ips[0]}") from exc
    if client.returncode != 0 or server.returncode != 0:
        why = (client.stderr.strip() or server_out.strip()).splitlines()[-1:] or ["no output"]
        raise _Unavailable(
            f"no TCP traffic from {hosts.ips[1]} to {hosts.ips[0]} over {hosts.ifname}: {why[0]}"
        )


def _tear_down(hosts: TwoHosts, created: list[str]) -> None:
    # Each step on its own, so one failure (or a second Ctrl-C mid-way) leaves the rest done
    # by the next run's stale sweep at worst.
    with contextlib.suppress(Exception):
        hosts.kill_all()
    for name in created:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=_IP_TIMEOUT_S)


def _kill_namespace_pids(name: str) -> None:
    done = subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, timeout=_IP_TIMEOUT_S
    )
    pids = [int(tok) for tok in done.stdout.split() if tok.isdigit()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _delete_stale_namespaces() -> None:
    """Delete namespaces a SIGKILLed run of this helper left behind (its pid is dead)."""
    done = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=_IP_TIMEOUT_S
    )
    for line in done.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) != 4 or parts[0] != _NAME_PREFIX or not parts[1].isdigit():
            continue
        if _pid_alive(int(parts[1])):
            continue
        _kill_namespace_pids(name)
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=_IP_TIMEOUT_S)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
