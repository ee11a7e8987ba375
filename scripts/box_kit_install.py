"""Install the box kit (scripts/box_kit.py) on a GPU box, offline, without touching its torch.

    python scripts/box_kit_install.py KIT_DIR TARGET_DIR [--unpack]

Prints the kit's manifest (each file's version, size and sha256), then installs each wheel
that fits this Python with --no-deps into TARGET_DIR, which the caller puts on PYTHONPATH:
with pip where the box has it (`pip install --no-deps --no-index --target`), else, or with
--unpack, by unpacking the wheel (a zip) into TARGET_DIR. A wheel whose file does not match
its sha256, that is built for another Python or machine, or whose package the box already has,
is not installed, and the line says why. Then it runs the kit's fio (its version and a tiny
JSON job), says what could not travel (DALI), and checks that torch's version and files are
the ones it found before. Exits 1 when something the kit holds could not be installed or
torch changed; stdlib only, as the box may have nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MANIFEST = "MANIFEST.json"  # box_kit.MANIFEST
# The import each wheel's package gives, to say whether the box already has it.
IMPORTS = {"mlcommons-loadgen": "mlperf_loadgen", "torchao": "torchao"}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def torch_state() -> tuple[str | None, str | None]:
    """torch's version and the file it imports from, without importing it (seconds on a
    cold box)."""
    try:
        version = md.version("torch")
    except md.PackageNotFoundError:
        version = None
    spec = importlib.util.find_spec("torch")
    return version, spec.origin if spec else None


def glibc() -> tuple[int, int] | None:
    name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if name == "glibc" and m else None


def fits(wheel: str) -> str | None:
    """Why a wheel (by its file name's tags) cannot install on this Python and machine, or
    None when it can: cpXY-cpXY needs Python X.Y, cpXY-abi3 X.Y or later, manylinux_2_N a
    glibc of 2.N or later on the same machine."""
    tags = wheel[:-len(".whl")].split("-")[-3:]
    pythons, abi, plats = tags[0].split("."), tags[1], tags[2].split(".")
    here = sys.version_info[:2]
    ok_python = False
    for p in pythons:
        m = re.fullmatch(r"(?:cp|py)(\d)(\d*)", p)
        if not m:
            continue
        want = (int(m.group(1)), int(m.group(2) or 0))
        if p.startswith("py") and not m.group(2):
            ok_python |= want[0] == here[0]
        elif abi == "abi3" or p.startswith("py"):
            ok_python |= here >= want
        else:
            ok_python |= here == want
    if not ok_python:
        return (f"it is built for {tags[0]}-{abi} and this Python is "
                f"{here[0]}.{here[1]}")
    if plats == ["any"]:
        return None
    machine, libc = platform.machine(), glibc()
    for plat in plats:
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", plat)
        legacy = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
        m2 = re.fullmatch(r"(manylinux2014|manylinux2010|manylinux1)_(\w+)", plat)
        need, arch = ((int(m.group(1)), int(m.group(2))), m.group(3)) if m else \
            (legacy[m2.group(1)], m2.group(2)) if m2 else (None, None)
        if need and arch == machine and libc and libc >= need:
            return None
    return (f"it is built for {'.'.join(plats)} and this is {machine} with glibc "
            f"{'.'.join(map(str, libc)) if libc else 'unknown'}")


def has_pip() -> bool:
    return importlib.util.find_spec("pip") is not None


def unpack(wheel: Path, target: Path) -> None:
    """A wheel's files into target, as an install with --target lays them out: the
    <name>.data/purelib and platlib trees at the top, its scripts and headers left out."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            if info.is_dir() or not parts or not parts[-1]:
                continue
            dest = target.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = info.external_attr >> 16
            if mode & 0o111:
                dest.chmod(0o755)


def install(wheel: Path, target: Path, force_unpack: bool) -> str:
    """Install the wheel alone (no dependency) into target; how it was done."""
    if has_pip() and not force_unpack:
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "--no-index", "--no-compile", "--disable-pip-version-check",
                              "--target", str(target), str(wheel)],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return "pip install --no-deps --target"
        why = (out.stderr.strip().splitlines() or ["no output"])[-1]
        unpack(wheel, target)
        return f"unpacked, because pip failed: {why}"
    unpack(wheel, target)
    return "unpacked (--unpack)" if force_unpack else "unpacked: this Python has no pip"


def check_fio(binary: Path) -> str:
    """fio's version from the kit, after a tiny read job whose JSON report it checks."""
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="box-kit-fio.") as tmp:
        out = subprocess.run([str(binary), "--name=kit", f"--filename={Path(tmp) / 'f'}",
                              "--size=1M", "--rw=read", "--bs=64k", "--ioengine=psync",
                              "--output-format=json"], capture_output=True, text=True,
                             timeout=30)
    if out.returncode != 0:
        raise RuntimeError((out.stderr.strip().splitlines() or ["no output"])[-1])
    report = json.loads(out.stdout[out.stdout.index("{"):])
    if report["jobs"][0]["read"]["io_bytes"] != 2**20:
        raise RuntimeError("its 1 MiB read job read another amount")
    return version


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kit", type=Path, help="the kit folder (holds MANIFEST.json)")
    ap.add_argument("target", type=Path, help="where the wheels go (put it on PYTHONPATH)")
    ap.add_argument("--unpack", action="store_true", help="unpack the wheels even where pip is")
    a = ap.parse_args(argv)
    try:
        manifest = json.loads((a.kit / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        print(f"box kit: {a.kit / MANIFEST} cannot be read: {exc}")
        return 1
    items = manifest.get("items") or []
    total = sum(int(i.get("bytes") or 0) for i in items)
    print(f"box kit: {a.kit} ({total / 2**20:.1f} MiB), built for Python "
          f"{manifest.get('python')} on {manifest.get('platform')}:")
    for i in items:
        print(f"  {i['name']} {i['version']}: {i['path']}, {i['bytes'] / 2**20:.1f} MiB, "
              f"sha256 {i['sha256']}")
    before = torch_state()
    a.target.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(a.target))  # where the installed packages are looked for below
    installed, not_installed, failed = [], [], []
    for i in items:
        path = a.kit / i["path"]
        what = f"{i['name']} {i['version']}"
        if not path.is_file():
            failed.append(f"{what}: {i['path']} is missing from the kit")
            continue
        if sha256(path) != i["sha256"]:
            failed.append(f"{what}: {i['path']} does not match its sha256 (a broken copy)")
            continue
        if i["name"] == "fio":
            try:
                path.chmod(0o755)
                installed.append(f"fio {check_fio(path).removeprefix('fio-')} from "
                                 f"{path.parent} (a 1 MiB read job reported in JSON)")
            except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
                failed.append(f"{what}: it does not run here: {exc}")
            continue
        module = IMPORTS.get(i["name"], i["name"].replace("-", "_"))
        why = fits(path.name)
        spec = importlib.util.find_spec(module)
        if why:
            not_installed.append(f"{what}, because {why}")
        elif spec is not None and not str(spec.origin or "").startswith(str(a.target)):
            not_installed.append(f"{what}, because the box has {module} already "
                                 f"({spec.origin})")
        else:
            how = install(path, a.target, a.unpack)
            importlib.invalidate_caches()
            if importlib.util.find_spec(module) is None:
                failed.append(f"{what}: installed ({how}) but {module} is not found")
            else:
                installed.append(f"{what} into {a.target} ({how}; no dependency)")
    for line in installed:
        print(f"installed: {line}")
    for line in not_installed:
        print(f"not installed: {line}")
    for line in failed:
        print(f"failed: {line}")
    for note in manifest.get("not_included") or []:
        print(f"not in the kit: {note}; the dataloader's DALI rows are skipped and the "
              "simulator keeps DALI's GPU path")
    after = torch_state()
    if after != before:
        print(f"failed: torch changed: {before[0]} at {before[1]} before, {after[0]} at "
              f"{after[1]} after")
        return 1
    print(f"torch untouched: {after[0]} at {after[1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
