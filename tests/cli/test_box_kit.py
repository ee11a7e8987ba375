"""The box kit: scripts/box_kit.py builds a folder of at most 60 MiB (wheels for the box's
Python, a static fio, a manifest), once, and stops with one line without the network;
scripts/box_kit_install.py installs it offline beside the box's torch, never over it, with pip
or by unpacking the wheels, and says what it installed and what not. The real kit, where
.ci/run built it, installs into the box's venv and LoadGen, torchao and fio then work there."""

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import script

ROOT = Path(__file__).parents[2]
KIT = ROOT / "box-kit"
INSTALL = ROOT / "scripts" / "box_kit_install.py"




def _wheel(where: Path, name: str, module: str, tags: str = "py3-none-any") -> Path:
    """A minimal wheel of one module that says where it was imported from."""
    path = where / f"{name}-1.0-{tags}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{module}/__init__.py", "WHERE = __file__\n")
        zf.writestr(f"{name}-1.0.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{name}-1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nTag: {tags}\n")
        zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    return path


FAKE_FIO = """#!/bin/sh
case "$1" in --version) echo fio-3.33; exit 0 ;; esac
echo '{"fio version": "fio-3.33", "jobs": [{"read": {"io_bytes": 1048576}}]}'
"""


def _kit(tmp_path: Path, wheels: list[Path], fio: bool = True) -> Path:
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    items = []
    for w in wheels:
        (kit / "wheels" / w.name).write_bytes(w.read_bytes())
        items.append({"name": w.name.split("-")[0], "version": "1.0",
                      "path": f"wheels/{w.name}", "bytes": w.stat().st_size,
                      "sha256": hashlib.sha256(w.read_bytes()).hexdigest()})
    if fio:
        (kit / "bin").mkdir()
        (kit / "bin" / "fio").write_text(FAKE_FIO)
        (kit / "bin" / "fio").chmod(0o755)
        items.append({"name": "fio", "version": "3.33", "path": "bin/fio",
                      "bytes": len(FAKE_FIO),
                      "sha256": hashlib.sha256(FAKE_FIO.encode()).hexdigest()})
    (kit / "MANIFEST.json").write_text(json.dumps({"kit": 1, "python": "3.x", "platform":
                                                   "any", "items": items,
                                                   "not_included": ["DALI: too big"]}))
    return kit


def _install(kit: Path, target: Path, *extra: str, python: str = sys.executable):
    return subprocess.run([python, str(INSTALL), str(kit), str(target), *extra],
                          capture_output=True, text=True, timeout=120, cwd=target.parent)


def test_no_network_stops_the_build_with_one_line(tmp_path):
    env = {**os.environ, "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "box_kit.py"),
                           "--out", str(tmp_path / "kit"), "--cache", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("box kit: no network: https://pypi.org/")
    assert "build the kit on a machine with registry access" in lines[0]
    assert not (tmp_path / "kit").exists()


def test_the_kit_is_assembled_once_checked_against_its_limit(tmp_path, monkeypatch):
    kit = script("box_kit")
    cache = tmp_path / "cache"
    cache.mkdir()
    wheels = [_wheel(cache, "mlcommons_loadgen", "mlperf_loadgen",
                     "cp312-cp312-manylinux_2_28_x86_64"),
              _wheel(cache, "torchao", "torchao", "cp310-abi3-manylinux_2_28_x86_64")]
    fio = cache / "fio-3.33-3-static"
    fio.write_text(FAKE_FIO)
    monkeypatch.setattr(kit, "fetch_wheels", lambda c, p: wheels)
    monkeypatch.setattr(kit, "build_fio", lambda c: (fio, "3.33"))
    monkeypatch.setattr(kit, "check_fio", lambda f: "fio-3.33")
    out = tmp_path / "box-kit"
    (out / "wheels").mkdir(parents=True)
    (out / "wheels" / "stale-0.1-py3-none-any.whl").write_text("old")
    manifest = kit.build(out, "3.12", cache)
    assert [(i["name"], i["version"], i["path"]) for i in manifest["items"]] == [
        ("mlcommons-loadgen", "1.0", f"wheels/{wheels[0].name}"),
        ("torchao", "1.0", f"wheels/{wheels[1].name}"), ("fio", "3.33", "bin/fio")]
    for i in manifest["items"]:
        assert i["sha256"] == hashlib.sha256((out / i["path"]).read_bytes()).hexdigest()
    assert not (out / "wheels" / "stale-0.1-py3-none-any.whl").exists()
    assert os.access(out / "bin" / "fio", os.X_OK)
    assert json.loads((out / "MANIFEST.json").read_text()) == manifest
    assert manifest["python"] == "3.12" and "476 MB" in manifest["not_included"][0]
    # Once built, a second run changes nothing.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert kit.assemble(out, "3.12", wheels, fio, "3.33")[1] == []
    assert before == {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    # Over the 60 MiB the device tool leaves it: a clear stop.
    monkeypatch.setattr(kit, "KIT_LIMIT_B", 1000)
    with pytest.raises(kit.KitError, match=r"holds 0\.0 MiB, over the kit's 0\.0 MiB"):
        kit.build(out, "3.12", cache)


def test_a_static_executable_is_told_from_one_that_needs_the_loader():
    kit = script("box_kit")
    assert not kit.is_static(Path(sys.executable).resolve())  # needs ld-linux and libc
    assert not kit.is_static(Path(__file__))  # not an ELF file at all


def test_which_wheels_fit_this_python_and_machine():
    install = script("box_kit_install")
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert install.fits(f"x-1.0-{here}-{here}-manylinux_2_17_x86_64.whl") is None
    assert install.fits("x-1.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl") \
        is None
    assert install.fits("x-1.0-py3-none-any.whl") is None
    assert install.fits("x-1.0-cp399-cp399-manylinux_2_28_x86_64.whl").startswith(
        f"it is built for cp399-cp399 and this Python is {sys.version_info[0]}.")
    assert "glibc" in install.fits(f"x-1.0-{here}-{here}-manylinux_2_99_x86_64.whl")
    assert "aarch64" in install.fits(f"x-1.0-{here}-{here}-manylinux_2_17_aarch64.whl")


def test_the_install_puts_wheels_beside_torch_and_says_what_it_did(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    kit = _kit(tmp_path, [_wheel(wheels, "kitprobe", "kitprobe"),
                          _wheel(wheels, "email", "email"),
                          _wheel(wheels, "elsewhere", "elsewhere", "cp399-cp399-any")])
    target = tmp_path / "site"
    proc = _install(kit, target, "--unpack")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert out.startswith(f"box kit: {kit} (0.0 MiB), built for Python 3.x on any:")
    assert f"installed: kitprobe 1.0 into {target} (unpacked (--unpack); no dependency)" in out
    assert "not installed: email 1.0, because the box has email already" in out
    assert "not installed: elsewhere 1.0, because it is built for cp399-cp399" in out
    assert f"installed: fio 3.33 from {kit / 'bin'} (a 1 MiB read job reported in JSON)" in out
    assert "not in the kit: DALI: too big" in out
    assert "torch untouched: " in out
    assert (target / "kitprobe" / "__init__.py").is_file() and not (target / "email").exists()
    # With pip (this Python has it): pip's --target, --no-deps.
    proc = _install(kit, tmp_path / "site2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"installed: kitprobe 1.0 into {tmp_path / 'site2'} (pip install --no-deps "
            "--target; no dependency)") in proc.stdout
    # A copy that does not match its manifest is not installed, and the step fails.
    (kit / "wheels" / "kitprobe-1.0-py3-none-any.whl").write_bytes(b"broken")
    proc = _install(kit, tmp_path / "site3", "--unpack")
    assert proc.returncode == 1
    assert ("failed: kitprobe 1.0: wheels/kitprobe-1.0-py3-none-any.whl does not match its "
            "sha256 (a broken copy)") in proc.stdout


@pytest.mark.slow
def test_the_real_kit_installs_offline_in_the_box_venv_and_torch_stays_as_it_was(tmp_path):
    """The kit .ci/run built, in the box's venv (Python 3.12, torch 2.11.0), without the
    network: LoadGen imports, torchao's float8 training imports on that torch, the kit's fio
    runs a JSON job, and torch's version and files are the ones found before."""
    import box_env

    box = box_env.cached()
    if box is None:
        pytest.skip(f"the box's venv is not at {box_env.venv_dir()} (.ci/run builds it: python "
                    "tests/support/box_env.py build)")
    try:
        manifest = json.loads((KIT / "MANIFEST.json").read_text())
    except OSError:
        pytest.skip(f"no box kit at {KIT} (.ci/run builds it: python scripts/box_kit.py)")
    if manifest["python"] != box.python_version:
        pytest.skip(f"{KIT} is built for Python {manifest['python']}, the box's venv runs "
                    f"{box.python_version}")
    kit = script("box_kit")
    size = kit.folder_bytes(KIT)
    assert size <= kit.KIT_LIMIT_B
    for item in manifest["items"]:
        assert item["sha256"] == hashlib.sha256((KIT / item["path"]).read_bytes()).hexdigest()
    assert kit.is_static(KIT / "bin" / "fio")
    env = {"PATH": f"{box.bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    where = ("import importlib.metadata as md, importlib.util as u; "
             "print(md.version('torch'), u.find_spec('torch').origin)")
    before = subprocess.run([str(box.python), "-c", where], env=env, capture_output=True,
                            text=True, check=True).stdout
    target = tmp_path / "site"
    proc = subprocess.run(box_env.offline([str(box.python), str(INSTALL), str(KIT), str(target)]),
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for item in manifest["items"]:
        assert f"installed: {item['name']} {item['version']}" in proc.stdout, proc.stdout
    assert "(unpacked: this Python has no pip; no dependency)" in proc.stdout  # the venv has none
    use = ("import mlperf_loadgen, torch, torchao; "
           "from torchao.float8 import convert_to_float8_training; "
           "s = mlperf_loadgen.TestSettings(); "
           "print(torch.__version__, torch.__file__, torchao.__version__, "
           "mlperf_loadgen.__file__)")
    env_kit = {**env, "PYTHONPATH": str(target)}
    used = subprocess.run(box_env.offline([str(box.python), "-c", use]), env=env_kit,
                          capture_output=True, text=True, timeout=180)
    assert used.returncode == 0, used.stderr[-3000:]
    torch_version, torch_file, ao, loadgen = used.stdout.split()
    assert torch_version.startswith(box_env.BOX_PINS["torch"])
    assert Path(torch_file).is_relative_to(box.site_packages) and ao == "0.17.0"
    assert Path(loadgen).is_relative_to(target)
    after = subprocess.run([str(box.python), "-c", where], env=env_kit, capture_output=True,
                           text=True, check=True).stdout
    assert after == before
    version, origin = before.split()
    assert f"torch untouched: {version} at {origin}" in proc.stdout
    fio = subprocess.run([str(KIT / "bin" / "fio"), "--name=t", f"--filename={tmp_path / 'f'}",
                          "--size=1M", "--rw=randread", "--bs=4k", "--ioengine=psync",
                          "--output-format=json"], capture_output=True, text=True, timeout=60)
    assert json.loads(fio.stdout)["jobs"][0]["read"]["io_bytes"] == 2**20


def test_the_box_venv_is_reused_only_for_todays_requirements(tmp_path):
    """.ci/run builds the box's venv once; a stamp for other versions means build it again."""
    import box_env

    root = tmp_path / "venv"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3").write_text("")
    assert box_env.cached(root) is None  # no stamp: not finished
    stamp = {"python": "3.12", "requirements": box_env.requirements(), "distributions": ["x"]}
    (root / box_env.STAMP).write_text(json.dumps({**stamp, "requirements": ["torch==2.9.0"]}))
    assert box_env.cached(root) is None
    (root / box_env.STAMP).write_text(json.dumps(stamp))
    env = box_env.cached(root)
    assert env.kind == "box" and env.python_version == "3.12"
    assert env.site_packages == root / "lib" / "python3.12" / "site-packages"
    assert box_env.requirements()[:2] == ["torch==2.11.0", "torchvision==0.26.0"]
