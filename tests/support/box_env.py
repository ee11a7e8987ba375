"""A Python environment that holds only what a lent GPU box holds, built in seconds without the
network: a venv without pip whose site-packages links to the distributions the box has (the
dependency closure of BOX_PACKAGES) in this interpreter's site-packages, and to nothing else.

    env = build(tmp_path / "box")    # env.python, env.bin_dir, env.site_packages

Its bin dir has python3 and no `python`: a box may have none. A namespace directory shared
with a distribution the box lacks (`nvidia/`, which DALI shares with torch's CUDA wheels) is
made a real directory holding links to the box's parts only, so `nvidia.dali` stays missing.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys
import venv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

# What the lent GPU box's python3 has (issue 29).
BOX_PACKAGES = ("torch", "torchvision", "pandas", "matplotlib", "pytest", "nvidia-ml-py",
                "psutil", "rich", "scipy")
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
