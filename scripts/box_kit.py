"""Build the box kit: the tools a lent GPU box lacks, in one folder that travels with the GPU
check (the device tool's `carry`, 64 MiB in all) and installs there offline.

    python scripts/box_kit.py [--out box-kit] [--python-version 3.12] [--cache DIR]

The folder (git-ignored, at most KIT_LIMIT_B) holds:
- wheels/: mlcommons-loadgen (LoadGen, for the inference workload) and torchao (fp8 training)
  for the box's Python on manylinux x86_64, which scripts/box_kit_install.py installs with
  --no-deps into a folder of their own, beside the box's torch and never over it;
- bin/fio: fio built static from the Debian archive's source with the optional engines that
  pull in other libraries left out, so that it runs on any x86_64 Linux whatever its glibc;
- MANIFEST.json: each file with its version, size and sha256, which the install prints.

The downloads and the fio build stay under --cache, so that a second run only copies and
checks what it has: the kit then builds without the network. A run that needs the network
(PyPI, the Debian archive) and has none stops with one line. The fio build needs apt-get
(Debian or Ubuntu), a C compiler and make.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from box_kit_install import sha256  # the box checks the kit with the same digest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "MANIFEST.json"
KIT_FORMAT = 1
# The device tool carries 64 MiB of ignored files in all; the kit leaves room for the rest.
KIT_LIMIT_B = 60 * 2**20
# The box's Python (docs/results/2026-12-04-h200*/gpu-validate.log: 3.12.3); the rehearsal in
# CI builds the kit for the Python it rehearses with.
BOX_PYTHON = "3.12"
# Both wheels are built for glibc 2.28 and later; the boxes run Ubuntu 24.04's 2.39.
PLATFORM = "manylinux_2_28_x86_64"
PYPI = "https://pypi.org/simple/"
# name: (version, what it is for). torchao's C++ extensions are built against one torch:
# 0.16.0 against 2.10 (its __init__ lists 2.10.0 and 2.11.0.dev), 0.17.0 is the first release
# built for 2.11 (its __init__ loads them only on torch >= 2.11.0, and 0.17.0 followed torch
# 2.11.0's release); the boxes run torch 2.11.0. torchao's compatibility table
# (pytorch/ao#2919) pairs each release with the torch it was built with in the same way.
WHEELS = {
    "mlcommons-loadgen": ("6.0.17", "MLPerf LoadGen: drives the inference Offline and Server "
                                    "scenarios (import mlperf_loadgen)"),
    "torchao": ("0.17.0", "fp8 training in the transformer workload; built for torch 2.11"),
}
# fio's optional engines that link other libraries (Ceph, Gluster, RDMA, PMEM, NFS, HTTP,
# NUMA ...): Debian's own fio needs 64 shared libraries for them. The storage probe uses
# io_uring, libaio and psync only.
FIO_CONFIGURE = ["--build-static", "--disable-native", "--disable-numa", "--disable-rdma",
                 "--disable-rados", "--disable-rbd", "--disable-http", "--disable-gfapi",
                 "--disable-libnfs", "--disable-pmem", "--disable-xnvme", "--disable-libzbc",
                 "--disable-tcmalloc", "--disable-dfs", "--disable-shm"]
# Static libraries for fio's libaio engine and its compressed logs, from the archive's -dev
# packages, unpacked into the cache (nothing is installed on this machine).
FIO_LIBS = ("libaio-dev", "zlib1g-dev")
# Where the archive is, per distribution (os-release ID): mirror, components, keyring.
ARCHIVES = {
    "debian": ("http://deb.debian.org/debian", "main",
               "/usr/share/keyrings/debian-archive-keyring.gpg"),
    "ubuntu": ("http://archive.ubuntu.com/ubuntu", "main universe",
               "/usr/share/keyrings/ubuntu-archive-keyring.gpg"),
}
DALI_NOTE = ("DALI (nvidia-dali-cuda130): it installs about 476 MB, over the 64 MiB that "
             "travels with the GPU check")


class KitError(Exception):
    """Why the kit cannot be built here, in one line."""


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _run(argv: list[str], cwd: Path | None = None, what: str = "") -> str:
    """Run a command; on failure, a KitError with its last line of output."""
    try:
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise KitError(f"{argv[0]} is not installed, and {what or 'the kit'} needs it") from None
    if out.returncode != 0:
        # pip's warnings about an index location it cannot use are not why it failed
        lines = [ln for ln in (out.stderr + out.stdout).splitlines()
                 if ln.strip() and "is ignored: it is neither" not in ln]
        raise KitError(f"{what or argv[0]} failed (exit {out.returncode}): "
                       f"{lines[-1] if lines else 'no output'}")
    return out.stdout


def need_network(what: str) -> None:
    """One line and a stop when PyPI cannot be reached: the kit cannot be built offline."""
    try:
        urllib.request.urlopen(PYPI, timeout=15).close()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise KitError(f"no network: {PYPI} cannot be reached ({reason}), and {what} must be "
                       "downloaded; build the kit on a machine with registry access") from None


# --- wheels -------------------------------------------------------------------------------------

def wheel_version(path: Path) -> str:
    return path.name.split("-")[1]


def fetch_wheels(cache: Path, python: str) -> list[Path]:
    """Each wheel of WHEELS for `python`, from the cache or PyPI (pip download --no-deps)."""
    where = cache / f"wheels-cp{python.replace('.', '')}"
    where.mkdir(parents=True, exist_ok=True)
    out = []
    for name, (version, _) in WHEELS.items():
        stem = name.replace("-", "_")
        have = sorted(where.glob(f"{stem}-{version}-*.whl"))
        if not have:
            need_network(f"{name} {version}")
            print(f"box kit: downloading {name} {version} for Python {python}, {PLATFORM}",
                  flush=True)
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                  "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
                  "--platform", PLATFORM, "--disable-pip-version-check", "--dest", str(where),
                  f"{name}=={version}"], what=f"pip download {name}=={version}")
            have = sorted(where.glob(f"{stem}-{version}-*.whl"))
        if not have:
            raise KitError(f"pip download left no {stem}-{version} wheel in {where}")
        out.append(have[-1])
    return out


# --- fio ----------------------------------------------------------------------------------------

def os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    pairs = (ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
    return {k: v.strip().strip('"') for k, v in pairs}


def _apt(cache: Path) -> list[str]:
    """apt-get over a private sources list and state in the cache: the machine's own apt
    configuration is neither read for sources nor changed."""
    rel = os_release()
    dist, suite = rel.get("ID", ""), rel.get("VERSION_CODENAME", "")
    if dist not in ARCHIVES or not suite:
        raise KitError(f"fio's source comes from the Debian or Ubuntu archive through apt-get, "
                       f"and this is {rel.get('PRETTY_NAME', 'an unknown system')}")
    mirror, components, keyring = ARCHIVES[dist]
    apt = cache / "apt"
    for sub in ("lists/partial", "archives/partial"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(
        f"deb [signed-by={keyring}] {mirror} {suite} {components}\n"
        f"deb-src [signed-by={keyring}] {mirror} {suite} {components}\n")
    return ["apt-get", "-q", "-o", f"Dir::Etc::SourceList={apt / 'sources.list'}",
            "-o", "Dir::Etc::SourceParts=/nonexistent", "-o", f"Dir::State::Lists={apt / 'lists'}",
            "-o", f"Dir::Cache={apt}", "-o", "Debug::NoLocking=1",
            "-o", "APT::Sandbox::User=root"]


def fetch_fio_source(cache: Path) -> tuple[Path, str]:
    """fio's upstream tarball and the archive's version of it (3.33-3), and the static
    libraries of FIO_LIBS unpacked under cache/sysroot."""
    src = cache / "fio-src"
    dsc = sorted(src.glob("fio_*.dsc"))
    sysroot = cache / "sysroot"
    if not dsc or not sysroot.exists():
        need_network("fio's source")
        apt = _apt(cache)
        print("box kit: downloading fio's source and its static libraries from the archive",
              flush=True)
        _run([*apt, "update"], what="apt-get update (private sources list)")
        src.mkdir(parents=True, exist_ok=True)
        _run([*apt, "source", "--download-only", "fio"], cwd=src, what="apt-get source fio")
        debs = cache / "debs"
        debs.mkdir(exist_ok=True)
        _run([*apt, "download", *FIO_LIBS], cwd=debs, what="apt-get download " +
             " ".join(FIO_LIBS))
        tmp = Path(tempfile.mkdtemp(prefix="sysroot.", dir=cache))
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(tmp)], what=f"dpkg-deb -x {deb.name}")
        shutil.rmtree(sysroot, ignore_errors=True)
        tmp.rename(sysroot)
        dsc = sorted(src.glob("fio_*.dsc"))
    version = next((ln.split(":", 1)[1].strip() for ln in dsc[-1].read_text().splitlines()
                    if ln.startswith("Version:")), "unknown")
    tarballs = sorted(src.glob("fio_*.orig.tar.*"))
    tarballs = [t for t in tarballs if not t.name.endswith(".asc")]
    if not tarballs:
        raise KitError(f"no fio .orig tarball beside {dsc[-1]}")
    return tarballs[-1], version


def is_static(path: Path) -> bool:
    """An ELF executable with no program interpreter (PT_INTERP): the kernel runs it without
    the dynamic loader, so no glibc or other library of the box's is needed."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only (x86_64)
            return False
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def build_fio(cache: Path) -> tuple[Path, str]:
    """fio built static (stripped) from the archive's source, from the cache when built."""
    tarball, version = fetch_fio_source(cache)
    upstream = version.split("-")[0].split(":")[-1]
    binary = cache / f"fio-{version}-static"
    if binary.exists():
        return binary, upstream
    for tool in ("make", os.environ.get("CC") or "gcc", "strip", "tar"):
        if shutil.which(tool) is None:
            raise KitError(f"{tool} is not installed, and building fio needs it "
                           "(apt-get install build-essential)")
    print(f"box kit: building fio {version} static (a minute on 2 cores)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="fio-build.", dir=cache))
    try:
        _run(["tar", "-xf", str(tarball), "-C", str(work)], what=f"tar -xf {tarball.name}")
        tree = next(p for p in work.iterdir() if p.is_dir())
        sysroot = cache / "sysroot"
        include = sysroot / "usr" / "include"
        libdirs = [str(p) for p in sysroot.glob("usr/lib/*") if p.is_dir()] + \
            [str(sysroot / "usr" / "lib")]
        env = {**os.environ, "LDFLAGS": " ".join(f"-L{d}" for d in libdirs)}
        argv = ["./configure", *FIO_CONFIGURE, f"--extra-cflags=-I{include}"]
        out = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise KitError(f"fio's configure failed: {(out.stdout + out.stderr).strip()[-200:]}")
        jobs = str(max(1, os.cpu_count() or 1))
        done = subprocess.run(["make", "-j", jobs, "fio"], cwd=tree, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            tail = [ln for ln in done.stderr.splitlines() if "error" in ln.lower()]
            raise KitError(f"building fio failed: {(tail or ['see make output'])[-1]}")
        _run(["strip", "-o", str(binary), str(tree / "fio")], what="strip fio")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary, upstream


def check_fio(binary: Path) -> str:
    """fio runs from the kit: its version, and a tiny read job whose JSON report parses."""
    if not is_static(binary):
        raise KitError(f"{binary} is not a static executable: it would need the box's libraries")
    version = _run([str(binary), "--version"], what="fio --version").strip()
    with tempfile.TemporaryDirectory(prefix="box-kit-fio.") as tmp:
        out = _run([str(binary), "--name=kit", f"--filename={Path(tmp) / 'f'}", "--size=1M",
                    "--rw=read", "--bs=64k", "--ioengine=psync", "--output-format=json"],
                   what="a fio job")
    report = json.loads(out[out.index("{"):])
    read = report["jobs"][0]["read"]["io_bytes"]
    if read != 2**20:
        raise KitError(f"fio's trial job read {read} B, not 1 MiB")
    return version


# --- the folder ---------------------------------------------------------------------------------

def _place(src: Path, dest: Path) -> bool:
    """Copy src to dest unless dest already holds the same bytes; whether it copied."""
    if dest.exists() and dest.stat().st_size == src.stat().st_size and sha256(dest) == sha256(src):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copy2(src, tmp)
    tmp.replace(dest)
    return True


def assemble(out: Path, python: str, wheels: list[Path], fio: Path, fio_version: str
             ) -> tuple[dict, list[str]]:
    """The kit folder from the cached pieces, its manifest, and what changed."""
    items, changed = [], []
    placed: list[tuple[Path, str, str, str]] = []
    for w in wheels:
        name = next(n for n in WHEELS if w.name.startswith(n.replace("-", "_") + "-"))
        placed.append((w, f"wheels/{w.name}", name, WHEELS[name][1]))
    placed.append((fio, "bin/fio", "fio", "the storage probe's fio (io_uring, libaio, psync), "
                                          "static"))
    for src, rel, name, why in placed:
        dest = out / rel
        if _place(src, dest):
            changed.append(rel)
        if rel == "bin/fio":
            dest.chmod(0o755)
        items.append({"name": name, "version": fio_version if name == "fio" else
                      wheel_version(src), "path": rel, "bytes": dest.stat().st_size,
                      "sha256": sha256(dest), "for": why})
    keep = {i["path"] for i in items} | {MANIFEST}
    for stale in sorted(p for p in out.rglob("*") if p.is_file()):
        if str(stale.relative_to(out)) not in keep:
            stale.unlink()
            changed.append(f"removed {stale.relative_to(out)}")
    manifest = {"kit": KIT_FORMAT, "python": python, "platform": PLATFORM,
                "machine": "x86_64", "items": items, "not_included": [DALI_NOTE]}
    text = json.dumps(manifest, indent=1) + "\n"
    path = out / MANIFEST
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        changed.append(MANIFEST)
    return manifest, changed


def folder_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def build(out: Path, python: str, cache: Path) -> dict:
    if platform.machine() != "x86_64":
        raise KitError(f"the kit's fio is built for x86_64 like the box, and this is "
                       f"{platform.machine()}")
    cache.mkdir(parents=True, exist_ok=True)
    wheels = fetch_wheels(cache, python)
    fio, fio_version = build_fio(cache)
    check_fio(fio)
    out.mkdir(parents=True, exist_ok=True)
    manifest, changed = assemble(out, python, wheels, fio, fio_version)
    size = folder_bytes(out)
    if size > KIT_LIMIT_B:
        raise KitError(f"{out} holds {mib(size)}, over the kit's {mib(KIT_LIMIT_B)}")
    for i in manifest["items"]:
        print(f"  {i['name']} {i['version']}: {i['path']}, {mib(i['bytes'])}, sha256 "
              f"{i['sha256']}")
    print(f"box kit: {out} {'updated: ' + ', '.join(changed) if changed else 'is up to date'}"
          f"; {mib(size)} of {mib(KIT_LIMIT_B)}, for Python {python} on {PLATFORM}; not in "
          f"the kit: {DALI_NOTE}")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "box-kit",
                    help="the kit folder (default: box-kit in the repository, git-ignored)")
    ap.add_argument("--python-version", default=BOX_PYTHON,
                    help=f"the Python the wheels are for (default {BOX_PYTHON}, the box's)")
    ap.add_argument("--cache", type=Path,
                    default=Path.home() / ".cache" / "benchbench-box" / "kit-cache",
                    help="downloads and the fio build (default ~/.cache/benchbench-box/"
                         "kit-cache)")
    a = ap.parse_args(argv)
    try:
        build(a.out.resolve(), a.python_version, a.cache.resolve())
    except KitError as exc:
        print(f"box kit: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
