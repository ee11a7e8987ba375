"""scripts/gpu-validate.sh, dry: the same steps on the CPU with tiny sizes, rehearsed in an
environment that holds only what a lent GPU box holds (its Python, torch and torchvision where
.ci/run built that venv, and the box kit), so that the script a box runs once cannot rot
between loans; its plan, which must fit the lent 7 minutes, and the limits the script keeps for
when the plan cannot run. The headline table's tests are in test_gpu_headline.py."""

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import warnings
from pathlib import Path

import pytest
from helpers import script

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "gpu-validate.sh"
KIT = ROOT / "box-kit"
# What the box lacks: `import` of each must fail there (nvidia.dali: DALI; mlperf_loadgen: LoadGen).
NOT_IMPORTABLE = ("benchbench", "hypothesis", "setuptools", "pip", "junitparser", "ruptures",
                  "prometheus_client", "nvidia.dali", "mlperf_loadgen", "torchao")
# The box's packages by their import names.
BOX_IMPORTS = ("torch", "torchvision", "pandas", "matplotlib", "pytest", "pynvml", "psutil",
               "rich", "scipy")
IMPORT_CHECK = """
import importlib, importlib.util, sys
bad = []
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
        bad.append(f"{name} imports")
    except ImportError:
        pass
bad += [f"{name} is missing" for name in sys.argv[2].split(",")
        if importlib.util.find_spec(name) is None]
sys.exit("; ".join(bad) or None)
"""




def _working_tree(dest: Path) -> Path:
    """The files a fresh clone would hold, as they stand in the working tree (tracked and
    untracked, none that .gitignore leaves out): so the test rehearses the change under test,
    where a clone of HEAD would rehearse the last commit. No build output, no egg-info, no
    virtual environment and no box kit comes along, as with a clone."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the rehearsal copies the files git knows")
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def box_python(tmp_path: Path):
    """The box's environment: its own versions where .ci/run built them (box_env.cached),
    else the linked one of this interpreter, with a warning that says so."""
    import box_env

    env = box_env.cached()
    if env is not None:
        return env
    warnings.warn(f"the box's venv (Python {box_env.BOX_PYTHON}, torch "
                  f"{box_env.BOX_PINS['torch']}) is not at {box_env.venv_dir()}: this rehearsal "
                  f"links this interpreter's Python {sys.version_info[0]}."
                  f"{sys.version_info[1]} and torch instead (.ci/run builds it: python "
                  "tests/support/box_env.py build)", stacklevel=2)
    try:
        return box_env.build(tmp_path / "box")
    except importlib.metadata.PackageNotFoundError as exc:
        pytest.skip(f"this Python lacks a package the box has: {exc}")


def kit_for(python_version: str) -> Path | None:
    """The repository's box kit where it was built for this Python (.ci/run builds one for
    the rehearsal's), else None with a warning."""
    try:
        built_for = json.loads((KIT / "MANIFEST.json").read_text())["python"]
    except (OSError, ValueError, KeyError):
        built_for = None
    if built_for == python_version:
        return KIT
    warnings.warn(f"no box kit for Python {python_version} at {KIT} (found: {built_for}): the "
                  "rehearsal runs without it (.ci/run builds it: python scripts/box_kit.py "
                  f"--python-version {python_version})", stacklevel=2)
    return None


@pytest.mark.slow
def test_gpu_validate_dry_run_rehearsed_on_a_box_like_environment(tmp_path):
    """The dry run, from a copy of the tree with the box kit beside it (as the device tool's
    carry brings it), with a Python that has only the box's packages (no benchbench, pip,
    setuptools, hypothesis, DALI, LoadGen, torchao; python3 and no `python`), offline: the
    real run's arguments over every probe at tiny sizes, the kit installed, the ground truth."""
    pytest.importorskip("torch")
    import box_env

    tree = _working_tree(tmp_path / "tree")
    box = box_python(tmp_path)
    kit = kit_for(box.python_version)
    if kit is not None:
        shutil.copytree(kit, tree / "box-kit")
    out, home = tmp_path / "out", tmp_path / "home"
    out.mkdir()
    home.mkdir()
    # A proxy that refuses: anything that tries the network without unshare fails fast.
    env = {"PATH": f"{box.bin_dir}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "OUT": str(out), "http_proxy": "http://127.0.0.1:9", "https_proxy":
           "http://127.0.0.1:9", "PIP_NO_INDEX": "1"}
    check = subprocess.run([str(box.python), "-c", IMPORT_CHECK, ",".join(NOT_IMPORTABLE),
                            ",".join(BOX_IMPORTS)], cwd=home, env=env, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stderr + check.stdout
    assert not (box.bin_dir / "python").exists()

    argv = ["bash", str(tree / "scripts" / "gpu-validate.sh"), "--dry-run"]
    proc = subprocess.run(box_env.offline(argv), cwd=home, env=env, capture_output=True, text=True,
                          timeout=500)
    log = (out / "gpu-validate.log").read_text()
    assert proc.returncode == 0, log[-4000:] + proc.stderr[-2000:]

    # 1. Every step ran and exited 0, the plan, the kit, the ground truth and the headline
    # among them.
    rows = [ln.split("\t") for ln in (out / "steps.tsv").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == ["versions", *(["box kit"] if kit else []), "plan",
                                    "df -h /dev/shm", "GPU tests",
                                    "benchbench run --device cpu", "benchbench doctor",
                                    "bare loops", "ground truth", "headline and pack"]
    assert all(r[1] == "0" for r in rows), rows
    assert f"python: {box.bin_dir / 'python3'};" in log  # python3: the box has no `python`
    assert f"benchbench 0.1.0 from {tree.resolve()}" in log  # the source tree, not installed
    assert "the plan could not run" not in log
    assert "the real run's benchbench run, estimated: " in log  # the simulator ran
    gpu_tests = log.split("=== GPU tests")[1].split("--- GPU tests")[0]
    assert re.search(r"\b\d+ skipped\b", gpu_tests) and "error" not in gpu_tests.lower()
    # 2. What comes back from a lent box: at most 8 plain files, none in a folder.
    got = sorted(os.listdir(out))
    assert len(got) <= 8 and {"run.tar.gz", "headline.md", "ground-truth.json"} <= set(got), got
    assert all((out / n).is_file() and not (out / n).is_symlink() for n in got), got
    with tarfile.open(out / "run.tar.gz") as tar:
        names = tar.getnames()
        results = json.load(tar.extractfile("run/results.json"))
    assert "run/results.json" in names and "run/report.md" in names
    headline = (out / "headline.md").read_text()
    assert "| matmul bf16 | not measured |" in headline
    assert "| matmul fp8 ÷ bf16 | not measured: fp8 on cpu skipped, because" in headline
    assert re.search(r"\| benchbench run --device cpu \| ok \| \d+ \| \d+ \|", headline)
    assert "steps in all:" in headline
    # 3. The real run's arguments over every probe, on the box's versions: each probe ran or
    # said why not, none failed.
    plan = script("gpu_plan")
    assert results["argv"][-len(plan.dry_run_args()):] == plan.dry_run_args()
    from benchbench.engine.catalog import PROBES

    probes = {p["name"]: p for p in results["probes"]}
    assert sorted(probes) == sorted(spec.name for spec in PROBES)  # every probe, 13 today
    assert all(p["status"] in ("ok", "skipped") for p in probes.values()), \
        {n: (p["status"], p.get("reason")) for n, p in probes.items()}
    versions = results["environment"]["versions"]
    assert versions["python"].startswith(f"{box.python_version}.")
    if box.kind == "box":  # the box's own versions, not this interpreter's
        assert versions["torch"] == box_env.BOX_PINS["torch"]
        assert versions["torchvision"] == box_env.BOX_PINS["torchvision"]
    # 4. The ground truth trained on the run's data and the headline held the verdict to it.
    truth = json.loads((out / "ground-truth.json").read_text())
    assert truth["status"] == "ok" and truth["rate"] > 0 and truth["windows"], truth
    assert truth["dataset"] == results["dataset"]["path"]
    assert ("| verdict against the ground truth (ResNet50, real data, steady) | trained "
            in headline)
    # 5. The kit: installed beside the box's torch, which stayed as it was; LoadGen drove the
    # inference workload and the kit's fio the storage probe.
    if kit is not None:
        manifest = json.loads((kit / "MANIFEST.json").read_text())
        for item in manifest["items"]:
            assert f"installed: {item['name']} {item['version']}" in log, log
        assert (f"torch untouched: {versions['torch']} at "
                f"{box.site_packages / 'torch' / '__init__.py'}") in log, log
        assert "mlperf_loadgen: installed, LoadGen drives" in log
        drivers = {m["context"].get("driver") for m in probes["inference"]["measurements"]}
        assert "loadgen" in drivers, drivers
        fio = next(i for i in manifest["items"] if i["name"] == "fio")
        assert versions["fio"] == fio["version"]
        assert any("engine" in m["key"] for m in probes["storage"]["measurements"])
    else:
        assert "box kit: none at" in log
        assert ("mlperf_loadgen: not installed, so the inference server part is the simulated "
                "server (LoadGen not installed)") in log
    # 6. Nothing needed the network: pip's own lines of an install or a download would be here
    # (and it runs offline where unshare works); a skip's advice may name `pip install`.
    assert not re.search(r"^(Collecting|Downloading|Looking in indexes|Successfully installed) ",
                         log, re.M)


def test_a_plan_that_cannot_run_gives_way_to_the_built_in_limits(tmp_path):
    """The script goes on measuring when its plan fails (here: benchbench not importable), with
    the limits it keeps, and says so. A stand-in Python runs the versions step for real and
    answers every other step at once."""
    fake = tmp_path / "python"
    fake.write_text(f"""#!/bin/bash
case "$1" in
    -c) exec {shlex.quote(sys.executable)} "$@" ;;
    scripts/gpu_plan.py) echo "ModuleNotFoundError: No module named 'benchbench'" >&2; exit 1 ;;
esac
echo "stand-in: $*"
""")
    fake.chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "OUT": str(out), "PYTHON": str(fake),
                                           "BOX_KIT": str(tmp_path / "no-kit")})
    log = (out / "gpu-validate.log").read_text()
    assert proc.returncode == 1, log
    assert "the plan could not run (see its step above); the built-in limits are used" in log
    assert (out / "plan.txt").read_text().startswith("# built-in limits")
    rows = {r[0]: r[1:] for r in (ln.split("\t") for ln in
                                  (out / "steps.tsv").read_text().splitlines()[1:])}
    assert rows["versions"][0] == "0" and rows["plan"][0] == "1"
    for name, limit in (("GPU tests", "80"), ("benchbench run --device cpu", "118"),
                        ("benchbench doctor", "30"), ("bare loops", "80")):
        assert rows[name][0] == "0" and rows[name][2] == limit, (name, rows[name])
    assert ("stand-in: -m pytest -q -m gpu -p no:cacheprovider tests/probes/test_probes.py "
            "tests/probes/test_dataloader.py") in log
    assert "gpu-validate: 2 step(s) failed: plan (exit 1) no results.json" in log
    assert f"box kit: none at {tmp_path / 'no-kit'}" in log
    assert "ground truth skipped, because the run wrote no results.json" in log


def test_the_script_keeps_the_plans_limits_for_when_the_plan_cannot_run(monkeypatch):
    """The script's own limits (the three steps before the plan, and the built-in plan, the
    ground truth's included) are the plan's; the real run's built-in run limit is what the
    other steps leave of the 420 s."""
    plan = script("gpu_plan")
    monkeypatch.setattr(plan, "simulated_run", lambda: (0.0, "not simulated in this test"))
    text = SCRIPT.read_text()
    fixed = {var: int(re.search(rf"^{name}=(\d+)$", text, re.M).group(1))
             for var, name in (("LIMIT_VERSIONS", "VERSIONS_LIMIT"), ("LIMIT_KIT", "KIT_LIMIT"),
                               ("LIMIT_PLAN", "PLAN_LIMIT"))}
    dry_block, real_block = re.findall(r"<<'PLAN'\n(.*?)\nPLAN\n", text, re.S)
    for dry, block, args in ((True, dry_block, plan.dry_run_args()),
                             (False, real_block, plan.run_args())):
        assert plan.FIXED_LIMITS[dry] == fixed
        lines = block.splitlines()
        builtin = {k: int(v) for k, v in (ln.split("=", 1) for ln in lines
                                          if re.match(r"[A-Z_]+=\d+$", ln))}
        assert f"RUN_ARGS=({' '.join(shlex.quote(a) for a in args)})" in lines
        steps = plan.plan(dry)
        planned = {k: v for k, v in plan.shell_vars(dry, steps).items() if k not in fixed}
        assert builtin.keys() == planned.keys()
        if dry:
            assert builtin == planned
        else:
            assert {k: v for k, v in builtin.items() if k != "LIMIT_RUN"} == \
                {k: v for k, v in planned.items() if k != "LIMIT_RUN"}
            in_total = {s.var for s in steps} - set(fixed)
            total = sum(v for k, v in builtin.items() if k in in_total) + sum(fixed.values())
            assert total == plan.TOTAL_LIMIT_S


def test_the_gpu_tests_step_names_every_file_that_holds_a_gpu_test():
    """Named files, so that a test-only package the box lacks cannot stop the collection; and
    none of them imports such a package at module level."""
    text = SCRIPT.read_text()
    named = re.search(r"^GPU_TEST_FILES=\((.*)\)$", text, re.M).group(1).split()
    holding = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                     if re.search(r"pytest\.mark\.gpu\b", p.read_text()))
    assert sorted(named) == holding
    absent = {"hypothesis", "junitparser", "ruptures", "prometheus_client", "setuptools",
              "pip", "torchao"}
    for name in named:
        tree = ast.parse((ROOT / name).read_text())
        for node in tree.body:
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not {m.split(".")[0] for m in mods} & absent, (name, mods)


def test_the_plan_fits_the_lent_seven_minutes_and_states_each_estimate():
    """The planned steps' limits add up to at most 420 s; the ground truth runs in what they
    leave, and at their estimates they leave it its whole minute."""
    pytest.importorskip("torch")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-validate.sh"), "--plan"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("total "))
    total = re.fullmatch(r"total (\d+) s", lines[at])
    assert total and int(total.group(1)) <= 420
    row = r"(.+?)\s+limit\s+(\d+) s\s+estimate\s+([\d.]+) s\s+\((.+)\)$"
    rows = [re.match(row, ln) for ln in lines[:at]]
    assert all(rows) and sum(int(r.group(2)) for r in rows) == int(total.group(1))
    by = {r.group(1): r for r in rows}
    assert "box kit" in by
    run = by["benchbench run"]
    assert run.group(4).startswith("simulated: ")
    # The run's limit is derived from the simulator's estimate of that very run.
    plan = script("gpu_plan")
    est, _ = plan.simulated_run()
    assert float(run.group(3)) == pytest.approx(est, abs=0.05)
    assert int(run.group(2)) == plan.Step("x", "x", est, "").limit_s
    # After the total: the ground truth, in what is left, and whether it fits.
    truth = re.match(row, lines[at + 2])
    assert truth and truth.group(1) == "ground truth" and "60 s timed" in truth.group(4)
    room = re.fullmatch(r"at the estimates the steps leave it (\d+) s: (.+)", lines[at + 3])
    assert room and room.group(2) == "it runs in full", lines[at + 3]
    assert int(room.group(1)) >= int(truth.group(2))
