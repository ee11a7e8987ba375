"""The safety guarantees a user running benchbench as root on a production machine relies on,
each held by a test that fails when the guarantee breaks:

- it never changes GPU state: no NVML setter and no state-changing nvidia-smi anywhere in the
  package source, and none looked up while the snapshot, the doctor and telemetry run;
- fio reads only the probe's own scratch file, or a raw device with --readonly;
- subprocesses get argument lists, never a shell string;
- nothing a user supplies is unpickled, eval'd or yaml.load'ed;
- report.html escapes every string that came from the user or the machine, and report.md's
  tables survive a `|` in one.

The source checks walk the package's syntax trees, not its text: advice such as "run `sudo
nvidia-smi -pm 1`" is a string a human reads, and is allowed. Each checker is itself tested on
small snippets, so that a checker that finds nothing cannot pass for a clean package.
"""

from __future__ import annotations

import ast
import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_nvml import FakeNvml, _gpu
from helpers import cpu_facts, render_md, resolved
from hypothesis import given, settings
from hypothesis import strategies as st

import benchbench
from benchbench.analysis import verdict as verdict_mod
from benchbench.analysis.verdict_types import Verdict
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.doctor import checks as doctor
from benchbench.machine import environment
from benchbench.machine.telemetry import LiveSampler
from benchbench.probes.api import ProbeContext, RunInputs
from benchbench.reports import html as html_report
from benchbench.reports import markdown
from benchbench.storage_probes.storage import fio
from benchbench.storage_probes.storage import run as probe

PACKAGE = Path(benchbench.__file__).parent
FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
MiB = 1024**2

Finding = str
Checker = Callable[[ast.Module], list[tuple[int, str]]]


# --- walking the source ------------------------------------------------------------------------

def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it was imported as: {'sp': 'subprocess', 'run': 'subprocess.run'}."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(
                    ".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _qualname(expr: ast.expr, aliases: dict[str, str]) -> str | None:
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id, expr.id)
    if isinstance(expr, ast.Attribute):
        base = _qualname(expr.value, aliases)
        return f"{base}.{expr.attr}" if base else None
    return None


def _calls(tree: ast.Module) -> Iterator[tuple[ast.Call, str | None]]:
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, _qualname(node.func, aliases)


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    """The module and each function: where a name is assigned and then used."""
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(expr: ast.expr | None, *values: Any) -> bool:
    return isinstance(expr, ast.Constant) and any(expr.value is v for v in values)


def _strings(expr: ast.AST) -> list[str]:
    """Every string constant inside `expr`, f-string parts included."""
    return [n.value for n in ast.walk(expr) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


@functools.cache
def _package_sources() -> list[tuple[str, ast.Module]]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20, "the package source was not found"
    return [(str(f.relative_to(PACKAGE.parent)), ast.parse(f.read_text(), str(f)))
            for f in files]


def _scan(checker: Checker) -> list[Finding]:
    return [f"{name}:{line}: {what}" for name, tree in _package_sources()
            for line, what in checker(tree)]


def _flags(checker: Checker, code: str) -> list[tuple[int, str]]:
    return checker(ast.parse(textwrap.dedent(code)))


# Process launchers: what they are handed is a program and its arguments, or a shell line.
LIST_LAUNCHERS = {f"subprocess.{f}" for f in ("run", "Popen", "call", "check_call",
                                              "check_output")} | {
    "asyncio.create_subprocess_exec", "pty.spawn", "os.posix_spawn", "os.posix_spawnp",
    *(f"os.{f}" for f in ("execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                          "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
                          "spawnle", "spawnlp", "spawnlpe"))}
SHELL_LAUNCHERS = {"os.system", "os.popen", "subprocess.getoutput",
                   "subprocess.getstatusoutput", "asyncio.create_subprocess_shell"}
LAUNCHERS = LIST_LAUNCHERS | SHELL_LAUNCHERS


# --- 1. GPU state: NVML setters and nvidia-smi -------------------------------------------------

NVML_SETTER = re.compile(
    r"^nvml(DeviceSet|DeviceReset|DeviceClear|DeviceModify|SystemSet|UnitSet)\w*$")
# nvidia-smi options that change state (nvidia-smi -h): persistence, power limit, locked and
# application clocks and their resets, GPU reset, compute mode, ECC, MIG, accounting.
SMI_SETTERS = {
    "-pm", "-pl", "-lgc", "-rgc", "-lmc", "-rmc", "-ac", "-rac", "-acp", "-r", "-c", "-e",
    "-mig", "-am", "-caa", "-cc", "--persistence-mode", "--power-limit", "--lock-gpu-clocks",
    "--reset-gpu-clocks", "--lock-memory-clocks", "--reset-memory-clocks",
    "--applications-clocks", "--reset-applications-clocks", "--applications-clocks-permission",
    "--gpu-reset", "--compute-mode", "--ecc-config", "--multi-instance-gpu",
    "--accounting-mode", "--clear-accounted-apps", "--clear-ecc-errors", "--auto-boost-default"}


def _is_smi(token: str) -> bool:
    return token.strip().split("/")[-1] in ("nvidia-smi", "nvidia-smi.exe")


def _is_smi_setter(token: str) -> bool:
    return token in SMI_SETTERS or token.split("=")[0] in SMI_SETTERS


def nvml_setters(tree: ast.Module) -> list[tuple[int, str]]:
    """Any name, attribute, import or getattr string naming an NVML setter."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # getattr(nvml, "nvmlDeviceSet...")
        found += [(node.lineno, f"NVML setter {n}") for n in names if NVML_SETTER.match(n)]
    return found


def nvidia_smi_setters(tree: ast.Module) -> list[tuple[int, str]]:
    """nvidia-smi with a state-changing option, as an argument list (a literal list or tuple,
    or the arguments of a launcher, in a scope that names nvidia-smi as a program) or as a
    shell line given to a launcher. Sentences that merely mention it are advice, not calls."""
    found = []
    launcher_args: set[int] = set()
    for call, name in _calls(tree):
        if name in LAUNCHERS:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                launcher_args |= {id(n) for n in ast.walk(arg)}
                # a shell line, f-string parts joined: f"nvidia-smi -i {i} -pl {w}"
                words = " ".join(_strings(arg)).split()
                if any(_is_smi(w) for w in words) and any(map(_is_smi_setter, words)):
                    found.append((call.lineno, f"{name} runs nvidia-smi {' '.join(words)!r}"))
    for scope in _scopes(tree):
        nodes = list(ast.walk(scope))
        # "nvidia-smi" as a program: a whole string, not a word inside a sentence
        program = any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and _is_smi(n.value) for n in nodes)
        if not program:
            continue
        for n in nodes:
            if isinstance(n, (ast.List, ast.Tuple)) or (isinstance(n, ast.Constant)
                                                       and id(n) in launcher_args):
                parts = [n] if isinstance(n, ast.Constant) else n.elts
                for p in parts:
                    if (isinstance(p, ast.Constant) and isinstance(p.value, str)
                            and _is_smi_setter(p.value)):
                        found.append((p.lineno, f"nvidia-smi argument {p.value!r}"))
    return sorted(set(found))


def test_package_calls_no_nvml_setter():
    assert _scan(nvml_setters) == []


def test_package_runs_no_state_changing_nvidia_smi():
    assert _scan(nvidia_smi_setters) == []


@pytest.mark.parametrize("code", [
    "pynvml.nvmlDeviceSetPersistenceMode(h, 1)",
    "nvml.nvmlDeviceResetGpuLockedClocks(h)",
    "nvml.nvmlDeviceClearEccErrorCounts(h, 0)",
    "nvml.nvmlDeviceModifyDrainState(pci, 1)",
    "nvml.nvmlSystemSetNvlinkBwMode(1)",
    "nvml.nvmlUnitSetLedState(u, 1)",
    "from pynvml import nvmlDeviceSetPowerManagementLimit",
    "fn = getattr(nvml, 'nvmlDeviceSetApplicationsClocks')",
])
def test_the_nvml_checker_finds_setters(code):
    assert _flags(nvml_setters, code)


@pytest.mark.parametrize("code", [
    "subprocess.run(['nvidia-smi', '-pm', '1'])",
    "subprocess.check_call(('/usr/bin/nvidia-smi', '--persistence-mode=1'))",
    """
    def cap(i, w):
        cmd = ['nvidia-smi', '-i', str(i), '-pl', str(w)]
        subprocess.run(cmd, check=True)
    """,
    """
    import subprocess as sp
    def reset():
        smi = shutil.which('nvidia-smi')
        sp.Popen([smi, '-r'])
    """,
    "os.system(f'nvidia-smi -lgc {clock}')",
    "os.system(f'nvidia-smi -i {i} -pl {watts}')",
    "os.popen('nvidia-smi -mig 1')",
    "os.execvp('nvidia-smi', ['nvidia-smi', '-c', '3'])",
    "subprocess.run('sudo nvidia-smi -ac 1593,1410', shell=True)",
])
def test_the_nvidia_smi_checker_finds_state_changes(code):
    assert _flags(nvidia_smi_setters, code)


@pytest.mark.parametrize("code", [
    "fix = 'enable it: `sudo nvidia-smi -pm 1` (or nvidia-persistenced)'",
    "fix = f'`sudo nvidia-smi -i {i} -pl {w:g}`'",
    "print('reset it with nvidia-smi -r -i N')",
    "subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv'])",
    "subprocess.run(['fio', '--readonly', '-r'])",
    "nvml.nvmlDeviceGetPowerManagementLimit(h)",
])
def test_the_gpu_checkers_allow_advice_and_queries(code):
    assert _flags(nvml_setters, code) == [] and _flags(nvidia_smi_setters, code) == []


# Queries only: what a read-only NVML client looks up.
READ_ONLY = ("nvmlInit", "nvmlShutdown", "nvmlDeviceGet", "nvmlSystemGet", "nvmlUnitGet",
             "nvmlErrorString", "NVML_")


class SamplingNvml(FakeNvml):
    """The recorded H100 pair, also answering the telemetry sampler's live queries."""

    NVML_TEMPERATURE_GPU = 0

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=90, memory=40)

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 60


def test_snapshot_doctor_and_telemetry_look_up_only_queries(monkeypatch, clock):
    nvml = SamplingNvml()
    spawned: list[Any] = []

    def no_spawn(args, *a, **kw):
        spawned.append(args)
        raise OSError("this test runs no program")

    # Every route to NVML and to a program leads to the recorder: the snapshot's loader, a
    # direct `import pynvml`, and subprocess (nvidia-smi).
    monkeypatch.setattr(environment, "load_nvml", lambda: nvml)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    info, reason = environment.gpu_snapshot()
    assert reason is None and len(info["gpus"]) == 2
    env = {"host": {"memory_total": 512 * 1024**3, "cores_usable": 64}, "gpus": info["gpus"],
           "driver": info.get("driver"), "cuda_driver": info.get("cuda_driver"),
           "gpus_reason": reason, "torch": {"torch": "2.5.1+cu124", "torch_cuda": "12.4"}}
    run = RunResult(tool={"name": "benchbench"}, started_at="t", environment=env, config={},
                    argv=[])
    for scenario in [None, *doctor.SCENARIOS]:
        assert doctor.run_checks(env, run, scenario)
    sampler = LiveSampler(None, nvml, clock=clock)
    sampler.open()
    for _ in range(3):
        clock.advance(0.1)
        sampler.sample()
    sampler.close()
    assert sampler.result().source["gpu"] == "NVML"
    threaded = LiveSampler(None, nvml, interval_s=0.01)  # the thread the runner starts
    threaded.start()
    time.sleep(0.05)
    threaded.stop()
    assert "nvmlDeviceGetPowerUsage" in nvml.looked_up  # the recorder saw the sampling
    assert [n for n in nvml.looked_up if NVML_SETTER.match(n)] == []
    assert sorted({n for n in nvml.looked_up if not n.startswith(READ_ONLY)}) == []
    assert spawned == []


# --- 2. fio: the probe's own scratch file, or a raw device read-only ---------------------------

REPORT = FIXTURES / "fio" / "rand4k-io_uring-tmp.json"


class FakeFio:
    """subprocess.Popen standing in for fio: records each start, writes a recorded report."""

    starts: list[dict[str, Any]] = []

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        target = next((a.split("=", 1)[1] for a in args if isinstance(a, str)
                       and a.startswith("--filename=")), None) if isinstance(args, list) else None
        target = target.replace("\\:", ":") if target else None
        FakeFio.starts.append({"args": args, "rest": rest, "kwargs": kwargs, "target": target,
                               "target_existed": bool(target) and os.path.exists(target)})
        self.args, self.pid, self.returncode = args, 999_999, 0
        self.text = "fio-3.33\n"
        for a in args if isinstance(args, list) else ():
            if isinstance(a, str) and a.startswith("--output="):
                shutil.copy(REPORT, a.split("=", 1)[1])
                self.text = ""

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[str, str]:
        return self.text, ""

    def poll(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def kill(self) -> None:
        pass

    def __enter__(self) -> FakeFio:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


@pytest.fixture
def fake_fio(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    FakeFio.starts = []
    monkeypatch.setattr(subprocess, "Popen", FakeFio)
    monkeypatch.setattr(fio, "find_fio", lambda: "/opt/fio/bin/fio")
    return FakeFio.starts


def _ctx(run_dir: Path, **inputs: Any) -> ProbeContext:
    return ProbeContext(device="cpu",
                        policy=RepeatPolicy(min_repeats=2, max_repeats=2, warmup_s=0.0),
                        budget=Budget(60.0), facts=cpu_facts(),
                        inputs=RunInputs(run_dir=str(run_dir), **inputs))


def _check_starts(starts: list[dict[str, Any]]) -> list[str]:
    """Every start is an argument list of strings, without a shell; returns fio's targets."""
    assert starts, "fio was never started"
    for s in starts:
        assert type(s["args"]) is list and all(type(a) is str for a in s["args"]), s["args"]
        assert not s["kwargs"].get("shell") and not s["rest"], s
        assert s["args"][0] == "/opt/fio/bin/fio"
    jobs = [s for s in starts if "--version" not in s["args"]]
    assert jobs, "no fio job ran"
    for s in jobs:
        assert "--readonly" in s["args"]
        assert sum(a.startswith("--filename=") for a in s["args"]) == 1
    return [s["target"] for s in jobs]


CFG = resolved("storage", size=16 * MiB, runtime=1.0, jobs=("seq1m", "rand4k"), numjobs=2)


@pytest.mark.parametrize("folder", ["plain", "a:b c;$(touch pwned)`id`&|*"])
def test_fio_reads_only_the_scratch_file_the_probe_created(tmp_path, fake_fio, folder):
    where = tmp_path / folder
    where.mkdir()
    (tmp_path / "run").mkdir()
    (where / "users-file.bin").write_bytes(b"not benchbench's")
    before = set(os.listdir(where))
    out = probe.run(_ctx(tmp_path / "run", storage_path=str(where)), CFG)
    targets = _check_starts(fake_fio)
    scratch = where / out.params["scratch_file"]
    assert set(targets) == {str(scratch)}
    assert scratch.name.startswith(probe.SCRATCH_PREFIX) and scratch.name not in before
    assert all(s["target_existed"] for s in fake_fio if s["target"])  # it was there to read
    assert set(os.listdir(where)) == before  # and is gone, the user's file untouched
    assert (where / "users-file.bin").read_bytes() == b"not benchbench's"
    assert not (tmp_path / "pwned").exists()


def test_fio_never_reads_inside_the_users_dataset(tmp_path, fake_fio):
    data = tmp_path / "data" / "class0"
    data.mkdir(parents=True)
    (data / "img.jpg").write_bytes(os.urandom(4096))
    (tmp_path / "run").mkdir()
    out = probe.run(_ctx(tmp_path / "run", data_dir=str(data.parent),
                         dataset={"source": "user", "path": str(data.parent)}), CFG)
    targets = _check_starts(fake_fio)
    assert set(targets) == {str(tmp_path / "run" / out.params["scratch_file"])}
    assert os.listdir(data) == ["img.jpg"]


def test_a_raw_device_is_read_only_with_readonly(tmp_path, fake_fio, monkeypatch):
    device = os.path.realpath(tmp_path / "nvme9n1")  # stands in for /dev/nvme9n1
    monkeypatch.setattr(probe, "_is_block", lambda p: os.path.realpath(p) == device)
    monkeypatch.setattr(probe, "_device_size", lambda d: 64 * MiB)
    (tmp_path / "run").mkdir()
    out = probe.run(_ctx(tmp_path / "run"), resolved("storage",
        raw_device=device, runtime=1.0, jobs=("rand4k",)))
    assert out.params["raw_device"] is True
    assert set(_check_starts(fake_fio)) == {device}
    assert not os.path.exists(device)  # nothing was created where the device would be


@settings(max_examples=80, deadline=None)
@given(filename=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                        min_size=1, max_size=40),
       job=st.sampled_from(sorted(fio.JOBS)), engine=st.sampled_from(fio.ENGINES),
       runtime=st.none() | st.floats(0.1, 60), numjobs=st.integers(1, 8))
def test_fio_arguments_carry_the_filename_whole_and_readonly(filename, job, engine, runtime,
                                                              numjobs):
    args = fio.FioJob(job, filename, 16 * MiB, engine, 4, numjobs, runtime).args("fio", "o.json")
    assert type(args) is list and all(type(a) is str for a in args)
    assert "--readonly" in args
    given_names = [a.removeprefix("--filename=") for a in args if a.startswith("--filename=")]
    assert len(given_names) == 1
    # fio splits --filename at an unescaped ':' into several files: none may be left
    assert re.search(r"(?<!\\):", given_names[0]) is None
    assert given_names[0].replace("\\:", ":") == filename


# --- 3. argument lists, never a shell string ---------------------------------------------------

def _stringish(expr: ast.expr, assigned: dict[str, list[ast.expr]]) -> bool:
    """A string built at run time: an f-string, a concatenation or %, .format, .join, str(),
    shlex.split (a list, but split from a string), or a name assigned one of those."""
    if isinstance(expr, ast.JoinedStr):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mod)):
        return any(isinstance(n, (ast.JoinedStr, ast.Constant)) and isinstance(
            getattr(n, "value", ""), str) for n in (expr.left, expr.right)) or _stringish(
            expr.left, assigned) or _stringish(expr.right, assigned)
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in ("format", "join", "split") and (
                f.attr != "split" or (isinstance(f.value, ast.Name) and f.value.id == "shlex")):
            return True
        return isinstance(f, ast.Name) and f.id == "str"
    if isinstance(expr, ast.Name):
        return any(_stringish(v, {}) for v in assigned.get(expr.id, []))
    return False


def shell_strings(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    aliases = _aliases(tree)
    for scope in _scopes(tree):
        assigned: dict[str, list[ast.expr]] = {}
        for n in ast.walk(scope):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        assigned.setdefault(t.id, []).append(n.value)
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            name = _qualname(call.func, aliases)
            shell = _kw(call, "shell")
            if shell is not None and not _is_const(shell, False, None):
                found.append((call.lineno, f"{name}(shell=...)"))
            if name in SHELL_LAUNCHERS:
                found.append((call.lineno, f"{name} runs a shell line"))
            if name in LIST_LAUNCHERS:
                first = call.args[0] if call.args else _kw(call, "args")
                if first is not None and _stringish(first, assigned):
                    found.append((call.lineno, f"{name} given a string built at run time"))
    return sorted(set(found))


def test_package_starts_programs_with_argument_lists():
    assert _scan(shell_strings) == []


@pytest.mark.parametrize("code", [
    "subprocess.run(cmd, shell=True)",
    "subprocess.Popen(args, shell=use_shell)",
    "subprocess.run(f'fio --filename={path}')",
    "subprocess.check_output('fio --filename=' + path)",
    "subprocess.call('fio %s' % path)",
    "subprocess.run(' '.join(args))",
    "subprocess.run(shlex.split(user_text))",
    "subprocess.run(args='fio {}'.format(p))",
    "os.system('sync')",
    "os.popen(cmd).read()",
    "subprocess.getoutput('df -h ' + path)",
    """
    from subprocess import Popen as P
    def go(path):
        line = f'dd if={path}'
        P(line)
    """,
])
def test_the_shell_checker_finds_shell_strings(code):
    assert _flags(shell_strings, code)


@pytest.mark.parametrize("code", [
    "subprocess.run(['fio', f'--filename={path}', '--readonly'])",
    "subprocess.Popen(args, shell=False, start_new_session=True)",
    "subprocess.run([binary, '--version'], capture_output=True)",
    "subprocess.run('true')",
])
def test_the_shell_checker_allows_argument_lists(code):
    assert _flags(shell_strings, code) == []


# --- 4. no pickle, eval or yaml.load on what a user supplies -----------------------------------
#
# Results files, configs and fio reports are read with json and tomllib only. Probe workers
# answer through multiprocessing pipes (isolation.py, workloads/_ranks.py) and the ranks of one
# distributed run through torch.distributed's gather_object and broadcast_object_list: those
# pickle between benchbench's own processes, not user input, and appear here as no load call.

UNSAFE_CALLS = {
    "pickle.load", "pickle.loads", "pickle.Unpickler", "_pickle.load", "_pickle.loads",
    "cPickle.load", "cPickle.loads", "dill.load", "dill.loads", "cloudpickle.load",
    "cloudpickle.loads", "joblib.load", "marshal.load", "marshal.loads", "shelve.open",
    "pandas.read_pickle", "jsonpickle.decode", "yaml.unsafe_load", "yaml.full_load",
    "yaml.load_all", "yaml.unsafe_load_all", "eval", "exec", "builtins.eval", "builtins.exec"}


def unsafe_deserialisers(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""])
            found += [(node.lineno, f"imports {m}") for m in mods if m.split(".")[0] == "shelve"]
    for call, name in _calls(tree):
        if name in UNSAFE_CALLS:
            found.append((call.lineno, f"calls {name}"))
        elif name == "yaml.load":
            loader = _kw(call, "Loader") or (call.args[1] if len(call.args) > 1 else None)
            loader_name = _qualname(loader, _aliases(tree)) if loader is not None else None
            if not (loader_name or "").endswith("SafeLoader"):
                found.append((call.lineno, "yaml.load without a SafeLoader"))
        elif name in ("torch.load", "torch.serialization.load"):
            if not _is_const(_kw(call, "weights_only"), True):
                found.append((call.lineno, f"{name} without weights_only=True"))
        elif name in ("numpy.load", "numpy.lib.npyio.load"):
            allow = _kw(call, "allow_pickle")
            if allow is not None and not _is_const(allow, False, None):
                found.append((call.lineno, f"{name} with allow_pickle"))
    return sorted(set(found))


def test_package_never_unpickles_or_evaluates():
    assert _scan(unsafe_deserialisers) == []


@pytest.mark.parametrize("code", [
    "pickle.loads(data)",
    "import pickle as pk\npk.load(fh)",
    "from pickle import loads\nloads(blob)",
    "eval(text)",
    "exec(compile(src, 'cfg', 'exec'))",
    "yaml.load(fh)",
    "yaml.load(fh, Loader=yaml.Loader)",
    "yaml.unsafe_load(fh)",
    "marshal.loads(blob)",
    "import shelve",
    "torch.load(path)",
    "torch.load(path, weights_only=False)",
    "import numpy as np\nnp.load(path, allow_pickle=True)",
])
def test_the_deserialiser_checker_finds_unsafe_loads(code):
    assert _flags(unsafe_deserialisers, code)


@pytest.mark.parametrize("code", [
    "json.loads(text)",
    "tomllib.load(fh)",
    "pickle.dumps(obj)",
    "yaml.safe_load(fh)",
    "yaml.load(fh, Loader=yaml.SafeLoader)",
    "torch.load(path, weights_only=True)",
    "import numpy as np\nnp.load(path)",
    "model.eval()",
])
def test_the_deserialiser_checker_allows_safe_loads(code):
    assert _flags(unsafe_deserialisers, code) == []


# --- 5. the reports: HTML escaped, Markdown tables whole ---------------------------------------

def evil(field: str) -> str:
    """A value as a hostile or careless user or machine could give it, tagged by field."""
    return f'<script>alert(1)</script><b>{field}</b> "q" & a|b'


FIELDS = ("label", "hostname", "cpu model", "storage path", "dataset path", "gpu name",
          "skip reason", "partial reason", "key value", "telemetry flag")
VERDICT_FIELDS = ("workload", "per workload", "evidence", "advice", "unknown", "how", "detail",
                  "note", "doctor line")


def _evil_run(host: str | None = None) -> RunResult:
    run = RunResult(**{k: v for k, v in json.loads(
        (FIXTURES / "results_v1_cpu.json").read_text()).items()
        if k not in ("probes", "schema_version")})
    gpus = environment.gpu_snapshot(FakeNvml(gpus=[_gpu(name=evil("gpu name"))]))[0]["gpus"]
    run.label = evil("label")
    run.environment["host"].update(hostname=host or evil("hostname"),
                                   cpu_model=evil("cpu model"))
    run.environment["storage"]["path"] = evil("storage path")
    run.environment["gpus"] = gpus
    run.extra["dataset"] = {"source": "user", "path": evil("dataset path"), "num_images": 3,
                            "num_classes": 1, "mean_file_size": 1000, "median_file_size": 1000}
    run.extra["telemetry"] = {"flags": {"storage": [evil("telemetry flag")]}}
    bw = Measurement(
        metric="read_bandwidth",
        key={"job": evil("key value"), "bs": 4096},
        value=1e9,
        unit="B/s",
        statistic="total_over_time",
        samples=[1e9, 1.1e9],
        higher_is_better=True,
        context={"path": evil("storage path")},
    )
    run.probes = [
        ProbeResult(
            name="host_device_copy",
            status="skipped",
            resource="host_device_link",
            reason=evil("skip reason"),
        ),
        ProbeResult(
            name="storage",
            status="ok",
            resource="storage",
            reason=evil("partial reason"),
            measurements=[bw],
        ),
    ]
    return run


def _evil_verdict() -> Verdict:
    return Verdict.from_dict({"workload": evil("workload"), "limiting_resource": "storage",
            "capacities": {"storage": 1234.0, "gpu_compute": None},
            "capacity_details": {"storage": {"status": "measured", "how": evil("how")},
                                 "gpu_compute": {"missing": evil("how")}},
            "predicted_accelerator_utilisation": 0.5, "evidence": [evil("evidence")],
            "advice": [evil("advice")], "unknown": [evil("unknown")],
            "constraints": [{"check": evil("detail"), "status": "warn",
                             "detail": evil("detail")}],
            "per_workload": {evil("per workload"): {"limiting_resource": "storage",
                                                "evidence": [evil("evidence")]}}})


def test_report_html_escapes_every_user_and_machine_string():
    run, v = _evil_run(), _evil_verdict()
    page = html_report.render(run, v, ["## Doctor", "", evil("doctor line")], {},
                              markdown.render(run, v, []), notes=[evil("note")])
    assert re.search(r"<\s*script", page, re.IGNORECASE) is None
    assert re.search(r"<\s*/?\s*b\s*>", page, re.IGNORECASE) is None
    for field in FIELDS + VERDICT_FIELDS:
        assert html.escape(evil(field), quote=True) in page, field


def _tables(md: str) -> list[list[str]]:
    """report.md's tables, each as its lines, split as CommonMark splits lines."""
    tables, current = [], []
    for line in re.split(r"\r\n|\r|\n", md):
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def _assert_tables_whole(md: str) -> None:
    tables = _tables(md)
    assert len(tables) >= 3
    for t in tables:
        assert len(t) >= 2 and re.match(r"^\|(-+\|)+$", t[1]), t
        assert {_cells(r) for r in t} == {_cells(t[0])}, t


def test_report_md_escapes_pipes_in_table_cells():
    md = render_md(_evil_run())
    _assert_tables_whole(md)
    for field in ("hostname", "cpu model", "storage path", "gpu name", "skip reason"):
        assert evil(field).replace("|", "\\|") in md, field


@pytest.mark.parametrize("brk", ["\r", "\u2028"])
def test_a_line_break_in_a_cell_keeps_the_table_whole(brk):
    host = f"node{brk}07|rack"
    run = _evil_run(host)
    md = render_md(run)
    _assert_tables_whole(md)
    page = html_report.render(run, verdict_mod.verdict(run), [], {}, md)
    assert re.search(r"<td>Host</td><td>node.07\|rack — ", page, re.DOTALL), "row split"
