"""scripts/gpu-validate.sh, dry: the same steps on the CPU with tiny sizes, rehearsed in an
environment that holds only what a lent GPU box holds, so that the script a box runs once cannot
rot between loans; its plan, which must fit the lent 7 minutes, and the limits the script keeps
for when the plan cannot run; and its headline table, which must say when a step was killed and
show the newer probes' figures beside their references."""

import ast
import dataclasses
import importlib.metadata
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "gpu-validate.sh"
FIXTURE = ROOT / "tests" / "support" / "fixtures" / "results_v1_cpu.json"
# What the box lacks: `import` of each must fail there (nvidia.dali: DALI; mlperf_loadgen: LoadGen).
NOT_IMPORTABLE = ("benchbench", "hypothesis", "setuptools", "pip", "junitparser", "ruptures",
                  "prometheus_client", "nvidia.dali", "mlperf_loadgen")
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


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _working_tree(dest: Path) -> Path:
    """The files a fresh clone would hold, as they stand in the working tree (tracked and
    untracked, none that .gitignore leaves out): so the test rehearses the change under test,
    where a clone of HEAD would rehearse the last commit. No build output, no egg-info, no
    virtual environment comes along, as with a clone."""
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


def _can_unshare_net() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
def test_gpu_validate_dry_run_rehearsed_on_a_box_like_environment(tmp_path):
    """The dry run, from a copy of the tree, with a Python that has only the box's packages
    (no benchbench, pip, setuptools, hypothesis, DALI; python3 and no `python`), offline."""
    pytest.importorskip("torch")
    import box_env

    tree = _working_tree(tmp_path / "tree")
    try:
        box = box_env.build(tmp_path / "box")
    except importlib.metadata.PackageNotFoundError as exc:
        pytest.skip(f"this Python lacks a package the box has: {exc}")
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

    offline = _can_unshare_net()
    argv = ["bash", str(tree / "scripts" / "gpu-validate.sh"), "--dry-run"]
    proc = subprocess.run((["unshare", "--net"] if offline else []) + argv, cwd=home, env=env,
                          capture_output=True, text=True, timeout=400)
    log = (out / "gpu-validate.log").read_text()
    assert proc.returncode == 0, log[-4000:] + proc.stderr[-2000:]

    # 1. Every step ran and exited 0, the plan and the headline among them.
    rows = [ln.split("\t") for ln in (out / "steps.tsv").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == ["versions", "plan", "df -h /dev/shm", "GPU tests",
                                    "benchbench run --device cpu", "benchbench doctor",
                                    "bare loops", "headline and pack", "loader vs pipeline"]
    assert all(r[1] == "0" for r in rows), rows
    # The loader alone and inside the pipeline, each in a probe's fresh process: forked workers.
    loaders = log.split("=== loader vs pipeline")[1]
    assert re.search(r"alone [\d,]+ img/s .*workers by fork\)", loaders), loaders
    assert re.search(r"pipeline [\d,]+ img/s over \d+ steps .*workers by fork", loaders), loaders
    assert "loader alone " in loaders and "; pipeline " in loaders
    assert f"python: {box.bin_dir / 'python3'};" in log  # python3: the box has no `python`
    assert f"benchbench 0.1.0 from {tree.resolve()}" in log  # the source tree, not installed
    assert "the plan could not run" not in log
    # The box has no LoadGen: the check says that inference's server part fell back.
    assert ("mlperf_loadgen: not installed, so the inference server part is the simulated "
            "server (LoadGen not installed)") in log
    assert "the real run's benchbench run, estimated: " in log  # the simulator ran
    gpu_tests = log.split("=== GPU tests")[1].split("--- GPU tests")[0]
    assert re.search(r"\b\d+ skipped\b", gpu_tests) and "error" not in gpu_tests.lower()
    # 2. What comes back from a lent box: at most 8 plain files, none in a folder.
    got = sorted(os.listdir(out))
    assert len(got) <= 8 and {"run.tar.gz", "headline.md"} <= set(got), got
    assert all((out / n).is_file() and not (out / n).is_symlink() for n in got), got
    with tarfile.open(out / "run.tar.gz") as tar:
        names = tar.getnames()
    assert "run/results.json" in names and "run/report.md" in names
    headline = (out / "headline.md").read_text()
    assert "| matmul bf16 peak | not measured |" in headline
    assert "| matmul fp8 ÷ bf16 | not measured: fp8 on cpu skipped, because" in headline
    assert re.search(r"\| benchbench run --device cpu \| ok \| \d+ \| \d+ \|", headline)
    assert "steps in all:" in headline
    # 3. Nothing needed the network: no install, no download (and offline where unshare works).
    assert not re.search(r"pip install|Downloading|Collecting ", log)
    assert not any("install" in r[0] for r in rows)


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
                          timeout=60, env={**os.environ, "OUT": str(out), "PYTHON": str(fake)})
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


def test_the_script_keeps_the_plans_limits_for_when_the_plan_cannot_run(monkeypatch):
    """The script's own limits (the two steps before the plan, and the built-in plan) are the
    plan's; the real run's built-in run limit is what the other steps leave of the 420 s."""
    plan = _script("gpu_plan")
    monkeypatch.setattr(plan, "simulated_run", lambda: (0.0, "not simulated in this test"))
    text = SCRIPT.read_text()
    fixed = {"LIMIT_VERSIONS": int(re.search(r"^VERSIONS_LIMIT=(\d+)$", text, re.M).group(1)),
             "LIMIT_PLAN": int(re.search(r"^PLAN_LIMIT=(\d+)$", text, re.M).group(1))}
    dry_block, real_block = re.findall(r"<<'PLAN'\n(.*?)\nPLAN\n", text, re.S)
    for dry, block, args in ((True, dry_block, plan.DRY_RUN_ARGS),
                             (False, real_block, plan.run_args())):
        assert plan.FIXED_LIMITS[dry] == fixed
        lines = block.splitlines()
        builtin = dict(ln.split("=", 1) for ln in lines if ln.startswith("LIMIT_"))
        assert f"RUN_ARGS=({' '.join(shlex.quote(a) for a in args)})" in lines
        planned = {s.var: s.limit_s for s in plan.plan(dry) if s.var not in fixed}
        assert builtin.keys() == planned.keys()
        if dry:
            assert {k: int(v) for k, v in builtin.items()} == planned
        else:
            assert {k: int(v) for k, v in builtin.items() if k != "LIMIT_RUN"} == \
                {k: v for k, v in planned.items() if k != "LIMIT_RUN"}
            total = sum(map(int, builtin.values())) + sum(fixed.values())
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
    pytest.importorskip("torch")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-validate.sh"), "--plan"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    total = re.fullmatch(r"total (\d+) s", lines[-1])
    assert total and int(total.group(1)) <= 420
    rows = [re.match(r"(.+?)\s+limit\s+(\d+) s\s+estimate\s+([\d.]+) s\s+\((.+)\)$", ln)
            for ln in lines[:-1]]
    assert all(rows) and sum(int(r.group(2)) for r in rows) == int(total.group(1))
    by = {r.group(1): r for r in rows}
    run = by["benchbench run"]
    assert run.group(4).startswith("simulated: ")
    # The run's limit is derived from the simulator's estimate of that very run.
    plan = _script("gpu_plan")
    est, _ = plan.simulated_run()
    assert float(run.group(3)) == pytest.approx(est, abs=0.05)
    assert int(run.group(2)) == plan.Step("x", "x", est, "").limit_s


def test_the_headline_says_timed_out_for_a_killed_step(tmp_path):
    headline = _script("gpu_headline")
    steps = tmp_path / "steps.tsv"
    steps.write_text("step\texit\tseconds\tlimit\n"
                     "versions\t0\t4\t15\n"
                     "benchbench run --device cuda\t124\t192\t192\n"
                     "bare loops\t1\t30\t55\n")
    from benchbench.core import results

    lines = headline.table(results.load(FIXTURE), headline.read_steps(str(steps)))
    text = "\n".join(lines)
    assert "| benchbench run --device cuda | timed out at its 192 s limit | 192 | 192 |" in text
    assert "| bare loops | exit 1 | 30 | 55 |" in text and "| versions | ok | 4 | 15 |" in text
    assert "benchbench run: timed out after 192 s (its limit 192 s)" in text
    assert "yes" not in text.split("benchbench run: ")[1].splitlines()[0]
    assert "steps in all: 226 s" in text


def _newer_probes_run(server=True, fp8=True, served=6000.0, batch_s=None):
    """A GPU run of the newer probes' figures: memory_fit (both modes), inference (the server
    rate, or its note when no rate kept the bound; `batch_s` its own batch times) and fp8
    beside bf16."""
    from synthetic_runs import environment, measurement

    from benchbench.core.results import ProbeResult, RunResult

    def largest(mode, params, rung, peak, bound):
        return measurement("largest_model", {"mode": mode, "seq_len": 2048,
                                             "precision": "amp_bf16"}, [params], "count", "max",
                           {"rung": rung, "peak_B": peak, "bounded_by": bound})

    def ratio(mode, rung, value):
        return measurement("estimate_ratio", {"mode": mode, "rung": rung, "seq_len": 2048,
                                              "precision": "amp_bf16"}, [value], "ratio")

    memory_fit = [largest("plain", 2.7e9, "2.7b", 120e9, "memory"), ratio("plain", "2.7b", 1.08),
                  largest("checkpointing", 6.7e9, "7b", 130e9, "time"),
                  ratio("checkpointing", "7b", 1.41), ratio("plain", "1.3b", 0.5)]
    key = {"precision": "bf16", "image_size": 224, "max_batch": 64, "latency_bound_s": 0.015}
    inference = [measurement("peak_offline_throughput", {"precision": "bf16"}, [9000.0],
                             "samples/s", "max"),
                 measurement("tpot", {"preset": "gpt2-124m", "precision": "bf16", "batch": 1},
                             [0.035], "s"),
                 measurement("tpot", {"preset": "gpt2-124m", "precision": "bf16", "batch": 8},
                             [0.004], "s")]
    if server:
        inference.append(measurement("server_throughput", key, [served], "samples/s", "max",
                                     {"stopped_by": "done",
                                      **({"batch_s": batch_s} if batch_s else {})}))
    matmul = [measurement("peak_flops", {"device": "cuda:0", "dtype": "bf16"}, [7.9e14],
                          "FLOP/s", "max")]
    transformer = [measurement("throughput", {"device": "cuda:0", "precision": "amp_bf16",
                                              "preset": "gpt2-124m"}, [4.0e5], "tokens/s")]
    if fp8:
        matmul.append(measurement("peak_flops", {"device": "cuda:0", "dtype": "fp8"},
                                  [1.4e15], "FLOP/s", "max"))
        transformer.append(measurement("throughput", {"device": "cuda:0", "precision": "fp8",
                                                      "preset": "gpt2-124m"}, [3.6e5],
                                       "tokens/s"))
    # A note that holds "; " itself, and the next note after it.
    no_server = None if server else ("server: no rate tried kept p99 within 15 ms; at 100 "
                                     "requests/s the p99 was 40 ms; generation skipped, "
                                     "because the budget ran out")
    no_fp8 = None if fp8 else "fp8 skipped, because torchao is not installed"
    no_fp8_mm = None if fp8 else ("fp8 n=4096 on cuda:0 skipped, because fp8 needs compute "
                                  "capability 8.9")
    probes = [ProbeResult(name=name, status="ok", resource=resource, reason=reason,
                          measurements=ms)
              for name, resource, reason, ms in (
                  ("matmul", "gpu_compute", no_fp8_mm, matmul),
                  ("transformer", "gpu_compute", no_fp8, transformer),
                  ("memory_fit", "gpu_memory", None, memory_fit),
                  ("inference", "gpu_compute", no_server, inference))]
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"},
                     started_at="2026-12-01T00:00:00+00:00", environment=environment(),
                     config={"device_resolved": "cuda", "quick": True}, argv=[], probes=probes)


def _rows(lines):
    return {ln.split(" | ")[0].lstrip("| "): ln.strip("|").split(" | ")[1:]
            for ln in lines if ln.startswith("| ")}


def test_the_headline_shows_the_newer_probes_figures_beside_their_references():
    headline = _script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run()))
    measured, ref, meets = rows["memory_fit largest model (plain)"]
    assert measured == "2.70 B parameters (2.7b, peak 120 GB), bounded by memory"
    assert "bounded by memory" in ref and meets.strip() == "yes"
    # Stopped by time, not memory: a lower bound, which the reference does not accept.
    assert rows["memory_fit largest model (checkpointing)"][2].strip() == "NO"
    # The ratio of the largest model's own rung, not of another rung in the same mode.
    assert rows["memory_fit measured ÷ estimated (plain, 2.7b)"][0] == "1.08"
    assert rows["memory_fit measured ÷ estimated (plain, 2.7b)"][2].strip() == "yes"
    assert "near 1.0-1.2" in rows["memory_fit measured ÷ estimated (plain, 2.7b)"][1]
    assert rows["memory_fit measured ÷ estimated (checkpointing, 7b)"][2].strip() == "NO"
    measured, ref, meets = rows["inference server rate"]
    # A run that does not say what drove its server (one from before LoadGen): the
    # simulated server, which it was.
    assert measured == ("6,000 img/s (bf16, p99 ≤ 15 ms; search stopped by done; 0.67x the "
                        "offline peak; simulated server)")
    assert "largest batch" in ref and meets.strip() == "yes"
    measured, ref, meets = rows["matmul fp8 ÷ bf16"]
    assert measured == "1.77x" and "1.5-1.9x" in ref and meets.strip() == "yes"
    measured, ref, meets = rows["transformer fp8 ÷ amp_bf16"]
    assert measured == "0.90x" and "pytorch/ao#685" in ref and meets.strip() == "yes"
    # Batch 1's time per output token, not batch 8's; 35 ms is the H200 runs' cuDNN figure.
    measured, ref, meets = rows["GPT-2 124M decode TPOT, bf16, batch 1"]
    assert measured == "35.0 ms" and ref.startswith("≤ 10 ms") and meets.strip() == "NO"


def test_a_server_rate_over_a_short_sweeps_peak_is_held_against_its_own_largest_batch():
    """A quick run's offline sweep can stop at batch 16 (5,355 img/s on an H200) while the
    server batches up to 64, which it timed for itself: its ceiling is that batch's rate."""
    headline = _script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run(served=12000.0,
                                                  batch_s={"1": 0.003, "64": 0.005})))
    assert rows["inference server rate"][2].strip() == "yes"  # 12,000 ≤ 64 / 5 ms = 12,800
    rows = _rows(headline.table(_newer_probes_run(served=12000.0,
                                                  batch_s={"1": 0.003, "64": 0.008})))
    assert rows["inference server rate"][2].strip() == "NO"  # over 8,000 and over 9,000
    rows = _rows(headline.table(_newer_probes_run(served=12000.0)))
    assert rows["inference server rate"][2].strip() == "NO"  # no batch times: the sweep's


def test_a_missing_newer_figure_reads_not_measured_with_the_probes_reason():
    headline = _script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run(server=False, fp8=False)))
    assert rows["inference server rate"][0] == ("not measured: server: no rate tried kept p99 "
                                                "within 15 ms; at 100 requests/s the p99 was "
                                                "40 ms")
    assert rows["matmul fp8 ÷ bf16"][0] == ("not measured: fp8 n=4096 on cuda:0 skipped, "
                                            "because fp8 needs compute capability 8.9")
    assert rows["transformer fp8 ÷ amp_bf16"][0] == ("not measured: fp8 skipped, because "
                                                     "torchao is not installed")
    assert all(rows[f][2].strip() == "—" for f in ("inference server rate", "matmul fp8 ÷ bf16",
                                                   "transformer fp8 ÷ amp_bf16"))
    from benchbench.core import results

    rows = _rows(headline.table(results.load(FIXTURE)))
    assert rows["memory_fit largest model"][0] == ("not measured: the memory_fit probe did not "
                                                   "run")


def test_the_matmul_clock_rows_say_whether_fp16_lost_per_cycle_or_in_its_clock():
    """The third H200 read fp16 9% under bf16 at its power limit; with each sample's clock the
    headline says which: per GHz of SM clock they agree (the clock), or not (the kernels)."""
    from synthetic_runs import clocked_matmul_run as matmul_run

    headline = _script("gpu_headline")
    run = matmul_run()
    run.probes[0].measurements.append(dataclasses.replace(
        run.probes[0].measurements[2], key={"device": "cuda:0", "dtype": "fp16"}))
    rows = _rows(headline.table(run))
    assert rows["matmul bf16 SM clock"][0] == "1,482 MHz (75% of 1,980), 488 TFLOP/s per GHz"
    assert rows["matmul fp16 SM clock"][0].startswith("1,350 MHz (68% of 1,980)")
    assert rows["matmul fp16 ÷ bf16 per GHz of SM clock"][0] == "1.000"
    assert rows["matmul fp16 ÷ bf16 per GHz of SM clock"][2].strip() == "yes"
    from benchbench.core import results

    rows = _rows(headline.table(results.load(FIXTURE)))  # a CPU run
    assert rows["matmul SM clock"][0] == "not measured: the matmul measured no GPU"
    for x in run.probes[0].measurements:
        x.context.pop("sm_clock_Hz", None)
    rows = _rows(headline.table(run))
    assert rows["matmul SM clock"][0].startswith("not measured: its samples carry no SM clock")
