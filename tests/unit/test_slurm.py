"""`benchbench slurm`: the sbatch script it prints, its validation, and the script run for real
against stub scontrol and srun (no Slurm, no GPU)."""

import os
import shutil
import subprocess

import pytest

from benchbench import cli
from benchbench.engine import launch, slurm

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="needs bash")


def sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines()
            if line.startswith("#SBATCH ")]


def main_ok(capsys, *argv: str) -> str:
    assert cli.main(["slurm", *argv]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def one_line_error(capsys, *argv: str) -> str:
    assert cli.main(["slurm", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no half-written script for someone to pipe into sbatch
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_command_prints_the_script_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = main_ok(capsys, "--nodes", "2", "--gpus-per-node", "8", "--",
                  "--quick", "--only", "allreduce")
    assert out == slurm.sbatch_script(2, 8, run_args=["--quick", "--only", "allreduce"])
    assert list(tmp_path.iterdir()) == []


def test_srun_line():
    script = slurm.sbatch_script(2, 8, run_args=["--quick", "--only", "allreduce"])
    expected = ('srun --kill-on-bad-exit=1 --cpu-bind=none --ntasks-per-node=8 python -m '
                'benchbench run --out "$OUT" --quick --only allreduce || status=$?')
    assert [line for line in script.splitlines() if line.startswith("srun ")] == [expected]
    bare = slurm.sbatch_script(1, 4)
    assert ('srun --kill-on-bad-exit=1 --cpu-bind=none --ntasks-per-node=4 python -m benchbench '
            'run --out "$OUT" || status=$?') in bare.splitlines()


def test_sbatch_lines_with_every_option():
    script = slurm.sbatch_script(3, 4, partition="gpu-h100,gpu.a100", time="1-12:00:00",
                                 account="proj_42", out="/scratch/bb")
    assert script.startswith("#!/bin/bash\n")
    assert sbatch_lines(script) == [
        "--job-name=benchbench", "--nodes=3", "--ntasks-per-node=4", "--gpus-per-node=4",
        "--time=1-12:00:00", "--partition=gpu-h100,gpu.a100", "--account=proj_42",
        "--output=benchbench-%j.out", "--exclusive"]
    assert "export OUT=/scratch/bb\n" in script


def test_optional_lines_absent_and_defaults():
    script = slurm.sbatch_script(1, 1)
    opts = sbatch_lines(script)
    assert "--time=00:30:00" in opts and "--exclusive" in opts
    assert not any(o.startswith(("--partition", "--account", "--cpus-per-task")) for o in opts)
    assert 'export OUT="runs/slurm-${SLURM_JOB_ID}"\n' in script


def test_sbatch_directives_precede_the_first_command():
    # sbatch stops reading #SBATCH at the first line that is neither a comment nor blank.
    lines = slurm.sbatch_script(2, 8, partition="p", account="a").splitlines()
    first_command = next(i for i, line in enumerate(lines)
                         if line.strip() and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command


def test_out_and_run_args_are_shell_quoted():
    script = slurm.sbatch_script(1, 2, out="my runs/it's here",
                                 run_args=["--label", "a b; rm -rf ~", "--quick"])
    assert "export OUT='my runs/it'\"'\"'s here'\n" in script
    assert "--label 'a b; rm -rf ~' --quick || status=$?" in script


@needs_bash
@pytest.mark.parametrize("kw", [{}, {"partition": "p", "account": "a", "out": "x y"},
                                {"run_args": ["--set", "matmul.sizes=64,128", "--label", "$HOME"]}])
def test_script_passes_bash_syntax_check(tmp_path, kw):
    path = tmp_path / "job.sbatch"
    path.write_text(slurm.sbatch_script(2, 8, **kw))
    proc = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _stubs(tmp_path, srun_exit: int = 0) -> dict[str, str]:
    """scontrol prints two fake hosts; srun records its argv and the rendezvous variables."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        '#!/bin/bash\n'
        '[ "$1 $2 $3" = "show hostnames gpu[07-08]" ] || { echo "bad args: $*" >&2; exit 3; }\n'
        'printf "gpu07\\ngpu08\\n"\n')
    (bin_dir / "srun").write_text(
        '#!/bin/bash\n'
        'printf "%s\\n" "$@" > "$STUB_LOG/srun.args"\n'
        'printf "%s\\n" "$MASTER_ADDR" "$MASTER_PORT" "$OUT" > "$STUB_LOG/srun.env"\n'
        f'exit {srun_exit}\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(tmp_path)}


def _run_script(tmp_path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    return subprocess.run([BASH, str(path)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=30)


@needs_bash
def test_script_exports_rendezvous_and_calls_srun(tmp_path):
    env = _stubs(tmp_path) | {"SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123457"}
    script = slurm.sbatch_script(2, 8, out="my runs/a", run_args=["--quick", "--only",
                                                                    "allreduce", "--label", "x y"])
    proc = _run_script(tmp_path, script, env)
    assert proc.returncode == 0, proc.stderr
    # 123457 % 2500 = 957, the 958th block of five ports from 20000
    assert (tmp_path / "srun.env").read_text().splitlines() == ["gpu07", "24785", "my runs/a"]
    assert launch.master_port(123457) == 24785
    assert (tmp_path / "srun.args").read_text().splitlines() == [
        "--kill-on-bad-exit=1", "--cpu-bind=none", "--ntasks-per-node=8", "python", "-m",
        "benchbench", "run",
        "--out", "my runs/a", "--quick", "--only", "allreduce", "--label", "x y"]
    assert proc.stdout == "benchbench: results folder my runs/a on gpu07 (exit status 0)\n"


@needs_bash
def test_script_default_out_and_failed_probe_still_reports_folder(tmp_path):
    env = _stubs(tmp_path, srun_exit=1) | {"SLURM_JOB_NODELIST": "gpu[07-08]",
                                           "SLURM_JOB_ID": "2999"}
    proc = _run_script(tmp_path, slurm.sbatch_script(2, 8), env)
    assert proc.returncode == 1  # srun's status is the job's
    assert (tmp_path / "srun.env").read_text().splitlines() == [
        "gpu07", str(launch.master_port(2999)), "runs/slurm-2999"]
    assert "results folder runs/slurm-2999 on gpu07 (exit status 1)" in proc.stdout


@needs_bash
def test_script_outside_a_job_stops_before_srun(tmp_path):
    proc = _run_script(tmp_path, slurm.sbatch_script(2, 8), _stubs(tmp_path))
    assert proc.returncode != 0 and "SLURM_JOB_NODELIST" in proc.stderr
    assert not (tmp_path / "srun.args").exists()


def test_master_ports_stay_below_the_ephemeral_range():
    ports = {launch.master_port(job) for job in range(launch.PORT_SLOTS)}
    assert len(ports) == launch.PORT_SLOTS  # disjoint blocks
    assert min(ports) == 20000 and max(ports) + launch.PORT_BLOCK - 1 < 32768


@pytest.mark.parametrize("argv,needle", [
    (["--nodes", "0", "--gpus-per-node", "8"], "--nodes must be at least 1"),
    (["--nodes", "-2", "--gpus-per-node", "8"], "--nodes must be at least 1"),
    (["--nodes", "2", "--gpus-per-node", "0"], "--gpus-per-node must be at least 1"),
    (["--nodes", "1", "--gpus-per-node", "1", "--time", "30:00"], "expected HH:MM:SS"),
    (["--nodes", "1", "--gpus-per-node", "1", "--time", "1-2"], "expected HH:MM:SS"),
    (["--nodes", "1", "--gpus-per-node", "1", "--time", "00:60:00"], "minutes and seconds"),
    (["--nodes", "1", "--gpus-per-node", "1", "--time", "1-24:00:00"], "hours to 23"),
    (["--nodes", "1", "--gpus-per-node", "1", "--time", "00:00:00"], "longer than zero"),
    (["--nodes", "1", "--gpus-per-node", "1", "--partition", "gpu;reboot"],
     "use letters, digits, '_', '.' and '-'"),
    (["--nodes", "1", "--gpus-per-node", "1", "--partition", "gpu h100"], "--partition"),
    (["--nodes", "1", "--gpus-per-node", "1", "--partition", "a,,b"], "--partition"),
    (["--nodes", "1", "--gpus-per-node", "1", "--account", "$(id)"],
     "--account '$(id)': use letters"),
    (["--nodes", "1", "--gpus-per-node", "1", "--account", "a,b"], "--account"),
    (["--nodes", "1", "--gpus-per-node", "1", "--account", "a\nb"], "--account 'a\\nb'"),
    (["--nodes", "1", "--gpus-per-node", "1", "--out", ""], "--out must not be empty"),
    (["--nodes", "1", "--gpus-per-node", "1", "--", "--out", "x"], "slurm --out DIR"),
])
def test_validation_errors(capsys, argv, needle):
    line = one_line_error(capsys, *argv)
    assert line.startswith("benchbench: error: ") and needle in line


@pytest.mark.parametrize("time", ["00:30:00", "48:00:00", "0-00:05:00", "7-23:59:59"])
def test_valid_times(time):
    assert f"#SBATCH --time={time}\n" in slurm.sbatch_script(1, 1, time=time)


@pytest.mark.parametrize("argv,needle", [
    (["--gpus-per-node", "8"], "--nodes"),  # required
    (["--nodes", "two", "--gpus-per-node", "8"], "invalid int value"),
    (["--nodes", "2", "--gpus-per-node", "8", "--quick"], "unrecognized arguments: --quick"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--quik"], "benchbench run --help"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--device", "tpu"], "invalid choice"),
])
def test_argument_errors_exit_2_in_one_line(capsys, argv, needle):
    # argparse's own errors leave through SystemExit, as for every other verb.
    with pytest.raises(SystemExit) as exc:
        cli.main(["slurm", *argv])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and needle in err
