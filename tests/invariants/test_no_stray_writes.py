"""benchbench writes only to --out, to scratch it removes, and to its cache folder.

The end-to-end test runs `benchbench run --quick` as a user would, with HOME, TMPDIR, the XDG
folders, the working directory and BENCHBENCH_CACHE all fresh and under tmp_path.

How it sees the writes: strace -f follows every process of the run (forkserver, probe
workers, DataLoader workers, rank processes, fio) and logs each successful call that creates,
opens for writing, renames or removes a path, or binds a Unix socket. A short probe run
decides whether strace works on the machine at hand (it does in the Firecracker VM this was
written in, and gVisor implements ptrace too). A trace beats a before/after listing twice
over: it sees files that were made and removed again (so scratch is shown to be scratch), and
it attributes entries in the machine-wide /tmp and /dev/shm to this run, where a listing would
also catch any other process's, for instance another test session's. Where strace is missing
(`apt-get install strace`) or ptrace is refused (a container without CAP_SYS_PTRACE), the test
falls back to listing /tmp, /var/tmp and /dev/shm before and after, and says so in its output.

Either way, the private folders (HOME, the XDG folders, TMPDIR, the working directory) must be
empty at the end: that is where libraries put caches by default, and where scratch would stay.

Writes that are allowed besides --out and the cache folder:
- TMPDIR, when it is empty again at the end (scratch: fio's job folder, multiprocessing's
  pymp-* folder and its listener socket);
- /dev/shm entries (multiprocessing's semaphores, torch's shared tensors), when gone at the end;
- device nodes under /dev (opening /dev/null or /dev/nvidia0 for writing writes no file), and
  the run's own /proc/<pid>/ entries (thread names);
- Python bytecode in __pycache__ folders. The interpreter writes it beside the sources it
  imports, for any program; pip writes it at install time, so a pip-installed benchbench
  writes none at run time, and only an editable install or a checkout compiles on first run.
  Moving it into the cache (PYTHONPYCACHEPREFIX) would make every process compile all of
  torch anew (see benchbench/engine/sandbox.py).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import benchbench
from benchbench.engine import sandbox

REPO = Path(benchbench.__file__).resolve().parent.parent
WRITE_CALLS = {  # syscall -> which of its path arguments it writes: first, last, or all
    **dict.fromkeys(["open", "openat", "openat2", "creat", "mkdir", "mkdirat", "unlink",
                     "unlinkat", "rmdir", "truncate", "mknod", "mknodat"], "first"),
    **dict.fromkeys(["rename", "renameat", "renameat2"], "all"),
    **dict.fromkeys(["link", "linkat", "symlink", "symlinkat"], "last"),
    "bind": "first",
}
FORKS = ("clone", "clone3", "fork", "vfork")  # a child starts where its parent is
WRITE_FLAGS = re.compile(r"\bO_(WRONLY|RDWR|CREAT|TRUNC)\b")
# An optional directory fd (with -y: its path in <>), then a quoted path.
PATH_ARG = re.compile(r'(?:(?:AT_FDCWD|\d+)<((?:[^>\\]|\\.)*)>,\s*)?"((?:[^"\\]|\\.)*)"')
UNIX_SOCKET = re.compile(r'sun_path="((?:[^"\\]|\\.)*)"')
LINE = re.compile(r"^(\w+)\((.*)\)\s+=\s+\S+")
OWN_PROC = re.compile(r"^/proc/(self|thread-self|\d+)/")
PYC = re.compile(r"/__pycache__(/[^/]+\.pyc(\.\d+)?)?$")


# --- the pure part: which variables the sandbox sets ------------------------------------------

def test_cache_env_puts_every_library_cache_in_the_cache_folder(tmp_path):
    added = sandbox.cache_env({}, tmp_path)
    assert set(added) == set(sandbox.LIBRARY_CACHES)
    assert {"MPLCONFIGDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_HOME", "CUDA_CACHE_PATH",
            "PYTORCH_KERNEL_CACHE_PATH"} <= set(added)
    for value in added.values():
        assert Path(value).parent == tmp_path / "libs"
    assert len(set(added.values())) == len(added)  # no two libraries share a folder
    # Left alone on purpose (see sandbox.py): benchbench's own cache resolves through them.
    assert not {"XDG_CACHE_HOME", "TORCH_HOME", "PYTHONPYCACHEPREFIX", "TMPDIR"} & set(added)


def test_the_users_choice_wins_and_empty_means_unset(tmp_path):
    environ = {"MPLCONFIGDIR": "/mine/mpl", "TRITON_HOME": ""}
    added = sandbox.cache_env(environ, tmp_path)
    assert "MPLCONFIGDIR" not in added
    assert added["TRITON_HOME"] == str(tmp_path / "libs" / "triton")


def _python(code: str, env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_imports_no_library_before_the_sandbox_runs(tmp_path):
    # cli.main() contains the caches first; that is too late for a library that the import
    # of benchbench.cli itself already loaded (matplotlib reads MPLCONFIGDIR on import).
    code = ("import sys, benchbench.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'torchvision', 'matplotlib', 'triton') or m.startswith('nvidia.dali')))")
    assert _python(code, _fresh_env(tmp_path), tmp_path / "cwd").strip() == "[]"


def test_the_libraries_read_the_variables(tmp_path):
    """The variables are the names the installed libraries read (a renamed one would fail)."""
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    env = _fresh_env(tmp_path)
    code = """
import json
from benchbench.engine import sandbox
sandbox.contain_caches()
import matplotlib
from torch._inductor.runtime.cache_dir_utils import cache_dir
got = {"mpl_cache": matplotlib.get_cachedir(), "mpl_config": matplotlib.get_configdir(),
       "inductor": cache_dir()}
try:
    from triton import knobs
    got["triton"] = knobs.cache.dir
except ImportError:  # no Triton, or one without triton.knobs: nothing to check
    pass
print(json.dumps(got))
"""
    got = json.loads(_python(code, env, tmp_path / "cwd").splitlines()[-1])
    libs = tmp_path / "cache" / "libs"
    assert got["mpl_cache"] == got["mpl_config"] == str(libs / "matplotlib")
    assert got["inductor"] == str(libs / "torchinductor")
    if "triton" in got:
        assert got["triton"] == str(libs / "triton" / ".triton" / "cache")


# --- end to end --------------------------------------------------------------------------------

# Fresh folders under tmp_path that must still be empty after a run.
PRIVATE = {"HOME": "home", "TMPDIR": "tmp", "XDG_CACHE_HOME": "xdg/cache",
           "XDG_CONFIG_HOME": "xdg/config", "XDG_DATA_HOME": "xdg/data",
           "XDG_STATE_HOME": "xdg/state", "XDG_RUNTIME_DIR": "xdg/runtime"}


def _fresh_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment with every folder a library might write to made fresh, and
    the variables the sandbox sets removed, so that the sandbox is what sets them."""
    drop = {*sandbox.LIBRARY_CACHES, "TMP", "TEMP", "TRITON_CACHE_DIR", "TORCH_HOME",
            "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "MATPLOTLIBRC"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("XDG_")}
    for name, sub in {**PRIVATE, "BENCHBENCH_CACHE": "cache"}.items():
        env[name] = str(tmp_path / sub)
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "cwd").mkdir(exist_ok=True)
    # The checkout, also when benchbench is not installed (the subprocess runs in cwd/).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _strace_prefix(tmp_path: Path) -> list[str] | None:
    """The strace command line, or None when strace cannot trace here."""
    binary = shutil.which("strace")
    if not binary:
        return None
    calls = ",".join([*WRITE_CALLS, "chdir", "fchdir", *FORKS])
    # -ff: one file per process, so no call is split across lines; -y: a directory fd's path;
    # -z: successful calls only; -x: non-ASCII bytes as \x escapes; seccomp-bpf stops the
    # process only at the traced calls, which keeps the run's timing close to untraced.
    base = [binary, "-ff", "-qq", "-y", "-z", "-x", "-e", "signal=none", "-e", f"trace={calls}"]
    for extra in (["--seccomp-bpf"], []):
        probe = [*base, *extra, "-o", str(tmp_path / "probe"), sys.executable, "-c",
                 f"open({str(tmp_path / 'probe-file')!r}, 'w').close()"]
        try:
            ok = subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        traced = any("probe-file" in p.read_text(errors="replace")
                     for p in tmp_path.glob("probe.*"))
        for p in [*tmp_path.glob("probe*")]:
            p.unlink()
        if ok and traced:
            return [*base, *extra, "-o", str(tmp_path / "trace" / "t")]
    return None


def _unquote(text: str) -> str:
    return os.fsdecode(ast.literal_eval(f'b"{text}"'))


def traced_writes(trace_dir: Path, cwd: Path) -> list[tuple[str, str]]:
    """(syscall, absolute path) for every path the traced processes wrote.

    Every process starts in `cwd` unless its parent forked it from elsewhere, which fails the
    test: its relative paths could not be placed. (fio's libnuma steps into /sys and back.)
    """
    writes = []
    for f in sorted(trace_dir.iterdir()):
        here = str(cwd)
        for line in f.read_text(errors="replace").splitlines():
            m = LINE.match(line)
            if not m:
                continue
            call, args = m.groups()
            found = [(_unquote(base) if base else None, _unquote(path))
                     for base, path in PATH_ARG.findall(args)]
            if call == "chdir":
                here = os.path.normpath(os.path.join(here, found[0][1]))
            elif call == "fchdir":
                here = _unquote(re.search(r"<(.*)>", args).group(1))
            elif call in FORKS:
                assert here == str(cwd), f"{f.name}: {line}: forked in {here}"
            if call == "bind":  # a Unix socket's file; an abstract one (@"...") is none
                found = [(None, _unquote(x)) for x in UNIX_SOCKET.findall(args)]
            which = WRITE_CALLS.get(call)
            if which is None or call in ("open", "openat", "openat2") and not WRITE_FLAGS.search(
                    PATH_ARG.sub("", args)):
                continue
            for base, path in {"first": found[:1], "last": found[-1:], "all": found}[which]:
                writes.append((call, os.path.normpath(os.path.join(base or here, path))))
    return writes


def sort_writes(writes: list[tuple[str, str]], allowed: list[Path]
                ) -> tuple[list[str], set[str]]:
    """The stray writes ("call path"), and the /dev/shm paths, which must be gone at the end."""
    stray, shm = [], set()
    for call, path in writes:
        if path.startswith("/dev/shm/"):
            shm.add(path)
        elif not (any(_under(path, root) for root in allowed) or path.startswith("/dev/")
                  or OWN_PROC.match(path) or PYC.search(path)):
            stray.append(f"{call} {path}")
    return stray, shm


def _under(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root) + os.sep)


def _listing(*folders: str) -> set[str]:
    names = set()
    for folder in folders:
        try:
            names |= {os.path.join(folder, n) for n in os.listdir(folder)}
        except OSError:
            pass
    return names


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


SHARED = ("/tmp", "/var/tmp", "/dev/shm")


@pytest.mark.slow
def test_a_quick_run_writes_only_to_out_scratch_and_its_cache(tmp_path):
    env = _fresh_env(tmp_path)
    cwd, out, cache = tmp_path / "cwd", tmp_path / "out", tmp_path / "cache"
    strace = _strace_prefix(tmp_path)
    if strace:
        (tmp_path / "trace").mkdir()
    else:
        print("strace cannot trace here: falling back to listing /tmp, /var/tmp and /dev/shm")
    before = _listing(*SHARED)
    started = time.monotonic()
    # --device auto on purpose: on a GPU machine the CUDA caches are traced too.
    proc = subprocess.run([*(strace or []), sys.executable, "-m", "benchbench", "run", "--quick",
                           "--device", "auto", "--out", str(out)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)
    print(f"benchbench run --quick took {time.monotonic() - started:.0f} s"
          f"{' under strace' if strace else ''}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((out / "results.json").read_text())
    status = {p["name"]: p["status"] for p in run["probes"]}
    print(f"probes: {status}")  # what was exercised: a busy machine skips more of them
    # The storage probe writes the scratch file; without it its cleanup went untested.
    assert status["storage"] == "ok", status

    # Where libraries keep caches by default, and where scratch would stay behind.
    for folder in [*(Path(env[name]) for name in PRIVATE), cwd]:
        assert _tree(folder) == [], f"{folder} is not empty at the end"
    # Nor in the run folder or the cache: the storage probe's scratch file, a half-written
    # dataset (.<digest>.tmp-*), an atomic write's temp file (.results.json.*.tmp).
    for root in (out, cache):
        assert not [p for p in root.rglob("*") if p.name.startswith(".benchbench-scratch-")
                    or ".tmp-" in p.name or p.name.endswith(".tmp")]
    # The sandbox is what put matplotlib's font list there (the reports always import it).
    assert list((cache / "libs" / "matplotlib").glob("fontlist-*.json"))

    if not strace:
        assert sorted(_listing(*SHARED) - before) == []
        return
    writes = traced_writes(tmp_path / "trace", cwd)
    stray, shm = sort_writes(writes, [out, cache, Path(env["TMPDIR"])])
    assert stray == []
    assert sorted(p for p in shm if os.path.lexists(p)) == []
    # The storage probe's scratch file really was made (and, above, is gone): the check is
    # not vacuous.
    assert [p for _, p in writes if os.path.basename(p).startswith(".benchbench-scratch-")]
