"""A Python environment that holds only what a lent GPU box holds, in one of two kinds:

- the box's own versions (`cached()`): a venv of the box's Python (3.12) with the box's torch
  (2.11.0) and torchvision (0.26.0) and its other packages from PyPI, no pip, no setuptools,
  built once outside the repository by `.ci/run` (`python tests/support/box_env.py build`), so
  that a test that uses it stays offline;
- a linked one (`build()`), built in seconds without the network, for where the first cannot
  be built: a venv without pip whose site-packages links to the distributions the box has (the
  dependency closure of BOX_PACKAGES) in this interpreter's site-packages, and to nothing else.
  It runs this interpreter's Python and torch, not the box's.

    env = cached() or build(tmp_path / "box")    # env.python, env.bin_dir, env.site_packages

Either bin dir has python3 and no `python`: a box may have none. In the linked kind, a
namespace directory shared with a distribution the box lacks (`nvidia/`, which DALI shares with
torch's CUDA wheels) is made a real directory holding links to the box's parts only, so
`nvidia.dali` stays missing. `offline(argv)` runs a command as on the box: in a network
namespace of its own, with only the loopback up.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata as md
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

# What the lent GPU box's python3 has (issue 29).
BOX_PACKAGES = ("torch", "torchvision", "pandas", "matplotlib", "pytest", "nvidia-ml-py",
                "psutil", "rich", "scipy")
# The boxes' versions, as gpu-validate.log printed them (docs/results/2026-12-04-h200*:
# Python 3.12.3, torch 2.11.0+cu130, torchvision 0.26.0); the other packages' were not printed.
BOX_PYTHON = "3.12"
BOX_PINS = {"torch": "2.11.0", "torchvision": "0.26.0"}
# Where `build_venv` puts the box's venv unless this variable names another folder.
VENV_VARIABLE = "BENCHBENCH_BOX_VENV"
STAMP = "box-venv.json"
# Never in the box, even where a box package asks for it: torch names setuptools on Python
# 3.12 and later, and a box may lack it (a system Python that refuses pip, PEP 668).
NOT_ON_THE_BOX = ("pip", "setuptools", "wheel", "benchbench", "hypothesis", "junitparser",
                  "ruptures", "prometheus-client", "nvidia-dali-cuda130", "nvidia-dali-cuda120",
                  "torchao")


@dataclass(frozen=True)
class BoxEnv:
    root: Path
    bin_dir: Path
    python: Path
    site_packages: Path
    distributions: tuple[str, ...]
    # "box": the box's Python and packages (cached); "linked": this interpreter's
    kind: str = "linked"
    python_version: str = f"{sys.version_info[0]}.{sys.version_info[1]}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: Iterable[str] = BOX_PACKAGES) -> dict[str, md.Distribution]:
    """The installed distributions that `roots` need, by canonical name. A root that is not
    installed raises PackageNotFoundError; a dependency that is not installed is left out (an
    optional or platform-specific one)."""
    skip = {canonical(n) for n in NOT_ON_THE_BOX}
    found: dict[str, md.Distribution] = {}
    done: set[tuple[str, str]] = set()
    # (name, extra): a requirement's extras bring their own requirements (torch asks for
    # cuda-toolkit[cublas, cudart, ...]).
    todo = [(canonical(r), "", True) for r in roots]
    while todo:
        name, extra, required = todo.pop()
        if name in skip or (name, extra) in done:
            continue
        done.add((name, extra))
        try:
            dist = found.get(name) or md.distribution(name)
        except md.PackageNotFoundError:
            if required:
                raise
            continue
        found[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(canonical(req.name), e, False) for e in ("", *sorted(req.extras))]
    return found


def _parts(dist: md.Distribution) -> set[tuple[str, ...]]:
    """The distribution's files as path parts below its site directory (none outside it)."""
    if dist.files is not None:
        return {tuple(Path(f).parts) for f in dist.files if Path(f).parts[0] != ".."}
    # No RECORD (an old egg-info install): its top-level names and its metadata folder.
    site = Path(dist.locate_file(""))
    names = (dist.read_text("top_level.txt") or "").split()
    parts = {(p.name,) for n in names for p in site.glob(f"{n}*")
             if p.name == n or p.name.startswith(f"{n}.")}
    meta = getattr(dist, "_path", None)
    return parts | ({(Path(meta).name,)} if meta else set())


def _link(src: Path, dest: Path, mine: set[tuple[str, ...]],
          others: set[tuple[str, ...]]) -> None:
    """Link each first part of `mine` from src into dest; one that another distribution
    shares becomes a directory, handled one level down."""
    for head in sorted({p[0] for p in mine}):
        if not (src / head).exists() or (dest / head).exists():
            continue
        shared = any(p[0] == head for p in others)
        if shared and (src / head).is_dir():
            (dest / head).mkdir()
            _link(src / head, dest / head, {p[1:] for p in mine if p[0] == head and len(p) > 1},
                  {p[1:] for p in others if p[0] == head and len(p) > 1})
        else:
            os.symlink(src / head, dest / head)


def build(root: Path, packages: Iterable[str] = BOX_PACKAGES) -> BoxEnv:
    """A venv at root whose site-packages holds the closure of `packages`; python3, no python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    bin_dir = root / "bin"
    real = (bin_dir / "python").resolve()
    for old in bin_dir.glob("python*"):  # python3.X links to python: each to the interpreter
        old.unlink()
    for name in ("python3", f"python3.{sys.version_info[1]}"):
        os.symlink(real, bin_dir / name)
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    wanted = closure(packages)
    by_site: dict[Path, tuple[set, set]] = {}
    for dist in wanted.values():
        by_site.setdefault(Path(dist.locate_file("")), (set(), set()))[0].update(_parts(dist))
    for dist in md.distributions():
        here = by_site.get(Path(dist.locate_file("")))
        if here is not None and canonical(dist.metadata["Name"] or "") not in wanted:
            here[1].update(_parts(dist))
    for src, (mine, others) in by_site.items():
        _link(src, site, mine, others)
    return BoxEnv(root, bin_dir, bin_dir / "python3", site, tuple(sorted(wanted)))


# --- the box's own versions, in a cached venv ---------------------------------------------------

def venv_dir() -> Path:
    """Where the box's venv lives: $BENCHBENCH_BOX_VENV, else under ~/.cache, named by the
    versions it holds (outside the repository: ~4 GB of torch and its CUDA libraries)."""
    given = os.environ.get(VENV_VARIABLE)
    if given:
        return Path(given).expanduser()
    pins = "-".join(f"{k}{v}" for k, v in BOX_PINS.items())
    return Path.home() / ".cache" / "benchbench-box" / f"py{BOX_PYTHON}-{pins}"


def requirements() -> list[str]:
    return [f"{p}=={BOX_PINS[p]}" if p in BOX_PINS else p for p in BOX_PACKAGES]


def find_python(version: str = BOX_PYTHON) -> str | None:
    """An interpreter of that version that runs: `python3.12` on PATH (a pyenv shim that
    refuses counts as none), else pyenv's, else the system's. Its real path, not a shim."""
    candidates = [shutil.which(f"python{version}") or "",
                  *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/"
                                                       f"python{version}")), reverse=True),
                  f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for c in filter(None, candidates):
        try:
            out = subprocess.run([c, "-c", "import sys, venv; print(sys.executable)"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def _site(root: Path, version: str) -> Path:
    return root / "lib" / f"python{version}" / "site-packages"


def cached(root: Path | None = None) -> BoxEnv | None:
    """The box's venv where `build_venv` finished it for today's requirements, else None."""
    root = root or venv_dir()
    try:
        stamp = json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("requirements") != requirements() or not (root / "bin" / "python3").exists():
        return None
    version = str(stamp["python"])
    return BoxEnv(root, root / "bin", root / "bin" / "python3", _site(root, version),
                  tuple(stamp.get("distributions") or ()), kind="box", python_version=version)


def _pip(python: Path, *args: str) -> None:
    # This interpreter's pip installs into the venv's interpreter (pip --python): the venv
    # itself never holds pip, as a box may not.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python),
                    "--disable-pip-version-check", *args], check=True)


def build_venv(root: Path | None = None, python: str | None = None) -> BoxEnv:
    """The box's venv at root (venv_dir() by default), built from PyPI unless `cached`
    finds it finished: the box's Python, its pinned torch and torchvision, and the rest of
    BOX_PACKAGES; then no pip, setuptools or wheel (torch asks for setuptools on 3.12, a box
    may lack it), and python3 without `python`. Raises RuntimeError when no such Python runs."""
    root = root or venv_dir()
    done = cached(root)
    if done is not None:
        print(f"box venv: {root} is up to date (Python {done.python_version}, "
              f"{', '.join(requirements()[:2])})")
        return done
    python = python or find_python()
    if python is None:
        raise RuntimeError(f"no Python {BOX_PYTHON} runs here (python{BOX_PYTHON} on PATH, "
                           f"~/.pyenv/versions/{BOX_PYTHON}.*, /usr/bin): install one first")
    t0 = time.monotonic()
    if root.exists():
        shutil.rmtree(root)
    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True)
    interpreter = root / "bin" / "python"
    _pip(interpreter, "install", "--quiet", *requirements())
    present = {canonical(d.metadata["Name"] or "") for d in md.distributions(
        path=[str(p) for p in (root / "lib").glob("python*/site-packages")])}
    extra = sorted(present & {canonical(n) for n in ("pip", "setuptools", "wheel")})
    if extra:
        _pip(interpreter, "uninstall", "--quiet", "--yes", *extra)
        present -= set(extra)
    version = subprocess.run([str(interpreter), "-c", "import sys; print("
                              "f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True, check=True).stdout.strip()
    interpreter.unlink()  # a box may have no `python`: python3 (and python3.X) stay
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
    stamp = {"python": version, "requirements": requirements(), "distributions": sorted(present),
             "built_s": round(time.monotonic() - t0, 1), "bytes": size}
    (root / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    print(f"box venv: built {root} in {stamp['built_s']} s, {size / 2**30:.2f} GiB: Python "
          f"{version}, {', '.join(requirements())}; removed {', '.join(extra) or 'nothing'}")
    env = cached(root)
    assert env is not None
    return env


def offline(argv: list[str]) -> list[str]:
    """argv in a network namespace of its own with only the loopback up (the run's ranks and
    LoadGen talk over it, as on the box), where this machine allows one; else argv as it is,
    and the refusing proxy the caller sets keeps it off the network."""
    ip = shutil.which("ip")
    if shutil.which("unshare") is None or ip is None:
        return argv
    up = [ip, "link", "set", "lo", "up"]
    if subprocess.run(["unshare", "--net", *up], capture_output=True).returncode != 0:
        return argv
    return ["unshare", "--net", "bash", "-c", f'{shlex.join(up)} && exec "$@"', "_", *argv]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build the box's venv (the box's Python, torch "
                                 "and packages from PyPI) for the GPU check's rehearsal.")
    ap.add_argument("command", choices=["build", "where", "version"],
                    help="build it; where: its folder; version: its Python (X.Y)")
    ap.add_argument("--dir", type=Path, default=None, help=f"default: ${VENV_VARIABLE}, else "
                    "~/.cache/benchbench-box/<versions>")
    ap.add_argument("--python", default=None, help=f"the Python {BOX_PYTHON} to use "
                    "(default: found on PATH, in pyenv or /usr/bin)")
    a = ap.parse_args(argv)
    if a.command in ("where", "version"):
        env = cached(a.dir)
        if env is None:
            print(f"box venv: none at {a.dir or venv_dir()}", file=sys.stderr)
            return 1
        print(env.root if a.command == "where" else env.python_version)
        return 0
    try:
        build_venv(a.dir, a.python)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"box venv: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
