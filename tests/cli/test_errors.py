"""Every bad input in docs/errors.md gets exit 2, one line on stderr, and writes nothing (#8).

The cases live in docs/errors.md, one table row each: an id, the command with placeholders
(OUT, FILE, GOOD …, built below in a fresh folder), the exit code and the exact message, in
which `…` stands for text that depends on the machine. Each row runs in-process through
cli.main and must say exactly what the page says, so the page cannot drift from the code.
Nothing may be measured: the runner's execute() fails the test, and so does generating the
synthetic dataset; the device facts are faked to "no GPU" so `--device cuda` is refused on
any machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchbench import cli
from benchbench.commands import run as commands
from benchbench.commands.common import build_run_config
from benchbench.engine.runner import Runner
from benchbench.probes import dataset

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "errors.md"
FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"

# Cases that break the rule today; the message in docs/errors.md is the one the fix gives.
# strict: once fixed, the XPASS fails the suite until the entry is removed here.
KNOWN_GAPS: dict[str, str] = {}  # ids that break the rule today (none)

# A refusal takes milliseconds; the first compare imports matplotlib and scipy.
SLOW_CASE_S = 5.0


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    command: str
    exit: int
    message: str

    @property
    def config_text(self) -> str:
        """The TOML a --config CONFIG row describes, from the code span in its case cell."""
        spans = re.findall(r"`([^`]+)`", self.what)
        return spans[0] if spans else ""


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1]
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", inner)]


def _code(cell: str) -> str:
    """The text of one Markdown code span (`x`, or `` x`y `` for text holding a backtick)."""
    m = re.fullmatch(r"(`+)(.*?)\1", cell)
    if not m:
        raise ValueError(f"expected a code span, got {cell!r}")
    text = m.group(2)
    return text[1:-1] if len(m.group(1)) > 1 and text.startswith(" ") and text.endswith(" ") \
        else text


def parse_doc(text: str) -> list[Case]:
    cases = []
    for line in text.splitlines():
        if not re.match(r"^\|\s*`[a-z0-9-]+`\s*\|", line):
            continue
        cid, what, command, code, message = _cells(line)
        cases.append(Case(_code(cid), what, _code(command), int(code), _code(message)))
    return cases


CASES = parse_doc(DOC.read_text(encoding="utf-8"))


# --- the placeholders: each one a path in a fresh folder, built only when a command names it ---

def _fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def _edited(edit: Callable[[dict], object]) -> str:
    data = _fixture()
    edit(data)
    return json.dumps(data, indent=1)


def _first_measurement(data: dict) -> dict:
    return next(p for p in data["probes"] if p["measurements"])["measurements"][0]


TEXT_FILES = {
    "GOOD": lambda: FIXTURE.read_text(encoding="utf-8"),
    "GOOD2": lambda: _edited(lambda d: d.update(label="other")),
    "TRUNCATED": lambda: FIXTURE.read_text(encoding="utf-8")[:FIXTURE.stat().st_size // 2],
    "NOTJSON": lambda: "this is not JSON\n",
    "LIST": lambda: "[]\n",
    "EMPTYOBJ": lambda: "{}\n",
    "NOKEYS": lambda: '{"schema_version": 1}\n',
    "FUTURE": lambda: _edited(lambda d: d.update(schema_version=999)),
    "BADUNIT": lambda: _edited(lambda d: _first_measurement(d).update(unit="MB/s")),
    "ENVLIST": lambda: _edited(lambda d: d.update(environment=[])),
    "KEYLIST": lambda: _edited(lambda d: _first_measurement(d).update(key=[])),
    "LABELNUM": lambda: _edited(lambda d: d.update(label=5)),
    # another machine (history, fleet): another host name; and one with another CPU as well
    "OTHERHOST": lambda: _edited(lambda d: d["environment"]["host"].update(hostname="box-b")),
    "OTHERCPU": lambda: _edited(lambda d: d["environment"]["host"].update(
        hostname="box-c", cpu_model="Other CPU")),
    "THIRDHOST": lambda: _edited(lambda d: d["environment"]["host"].update(hostname="box-d")),
    "BADDATE": lambda: _edited(lambda d: d.update(started_at="yesterday")),
    "EARLIER": lambda: _edited(lambda d: d.update(started_at="2026-11-29T01:54:15+00:00")),
    # a run SIGTERM stopped (core/interruption.py), of a third machine so fleet counts it too
    "INTERRUPTED": lambda: _edited(lambda d: (
        d["environment"]["host"].update(hostname="box-e"),
        d.update(interrupted={"signal": "SIGTERM", "at": "2026-11-30T01:55:00+00:00",
                              "probes_planned": ["matmul", "memory_bandwidth", "stability"],
                              "probes_finished": ["matmul"],
                              "cut_short": {"probe": "memory_bandwidth", "round": 1},
                              "probes_not_run": ["stability"], "rounds_not_run": 0}))),
}


class World:
    """The paths the placeholders stand for, under one folder that is checked afterwards."""

    def __init__(self, root: Path, case: Case) -> None:
        self.root = root
        self.case = case
        self.paths: dict[str, str] = {}
        self.cleanups: list[Callable[[], object]] = []

    def path(self, name: str) -> str:
        if name not in self.paths:
            self.paths[name] = str(self._build(name))
        return self.paths[name]

    def _build(self, name: str) -> Path:
        r = self.root
        if name in TEXT_FILES:
            p = r / f"{name.lower()}.json"
            p.write_text(TEXT_FILES[name](), encoding="utf-8")
            return p
        if name == "OUT":
            return r / "out"  # must still not exist afterwards
        if name == "MISSING":
            return r / "missing"
        if name == "EMPTY":
            (r / "empty").mkdir()
            return r / "empty"
        if name == "USED":  # a previous run: never overwritten
            (r / "used").mkdir()
            (r / "used" / "results.json").write_text("a previous run\n")
            return r / "used"
        if name == "FILE":
            (r / "notes.txt").write_text("keep me\n")
            return r / "notes.txt"
        if name == "BINARY":
            (r / "binary.json").write_bytes(b"\xff\xfe\xfa not UTF-8\n")
            return r / "binary.json"
        if name == "CONFIG":
            (r / "config.toml").write_text(self.case.config_text + "\n")
            return r / "config.toml"
        if name == "LOOSE":  # JPEGs, but not in class folders
            (r / "loose").mkdir()
            for n in ("a.jpg", "b.jpg"):
                (r / "loose" / n).write_bytes(b"\xff\xd8\xff\xe0 not much of a JPEG")
            return r / "loose"
        if name == "NIGHTLY":  # history --keep's layout: runs/ one level down, its JUnit beside
            (r / "nightly" / "runs" / "run-0001").mkdir(parents=True)
            (r / "nightly" / "runs" / "run-0001" / "results.json").write_text(
                FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
            (r / "nightly" / "history.xml").write_text("<testsuites/>\n")
            return r / "nightly"
        if name == "NOIMAGES":  # class folders, but no image in them
            for cls in ("cat", "dog"):
                (r / "noimages" / cls).mkdir(parents=True)
            (r / "noimages" / "cat" / "readme.txt").write_text("no pictures here\n")
            return r / "noimages"
        if name == "HOMELIKE":  # a home folder: its only images in a hidden cache folder
            (r / "home" / ".cache" / "thumbnails").mkdir(parents=True)
            (r / "home" / ".cache" / "thumbnails" / "a.png").write_bytes(b"\x89PNG not much")
            for folder in ("Documents", "Downloads"):
                (r / "home" / folder).mkdir()
            (r / "home" / "Documents" / "notes.txt").write_text("no pictures here\n")
            return r / "home"
        if name == "UNREADABLE":
            if os.geteuid() == 0:
                pytest.skip("root ignores permission bits")
            (r / "unreadable" / "cat").mkdir(parents=True)
            (r / "unreadable").chmod(0)
            self.cleanups.append(lambda: (r / "unreadable").chmod(0o755))
            return r / "unreadable"
        if name == "BLOCKDEV":
            p = r / "blockdev"
            try:  # the loop0 device's numbers; nothing ever opens it
                os.mknod(p, stat.S_IFBLK | 0o600, os.makedev(7, 0))
            except OSError as exc:
                pytest.skip(f"cannot create a block device node here ({exc.strerror})")
            return p
        if name in ("FULLFS", "ROFS"):
            p = r / name.lower()
            p.mkdir()
            opts = "size=1M" + (",ro" if name == "ROFS" else "")
            try:
                proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(p)],
                                      capture_output=True, text=True, timeout=30)
            except OSError as exc:
                pytest.skip(f"cannot mount a tmpfs here ({exc.strerror})")
            if proc.returncode:
                pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()})")
            self.cleanups.append(
                lambda: subprocess.run(["umount", str(p)], capture_output=True, timeout=30))
            return p
        raise KeyError(name)

    def clean_up(self) -> None:
        """Unmount the tmpfs folders and make the unreadable one readable again."""
        for undo in reversed(self.cleanups):
            undo()

    def argv(self) -> list[str]:
        words = shlex.split(self.case.command)
        assert words[0] == "benchbench", self.case.command
        return [PLACEHOLDER.sub(lambda m: self.path(m.group(0)), w) for w in words[1:]]

    def normalise(self, line: str) -> str:
        """The message with this run's paths written as their placeholders again."""
        for name, p in sorted(self.paths.items(), key=lambda kv: -len(kv[1])):
            line = line.replace(p, name)
        return line


PLACEHOLDERS = [*TEXT_FILES, "OUT", "MISSING", "EMPTY", "USED", "FILE", "BINARY", "CONFIG",
                "LOOSE", "NIGHTLY", "NOIMAGES", "HOMELIKE", "UNREADABLE", "BLOCKDEV", "FULLFS",
                "ROFS"]
PLACEHOLDER = re.compile(r"\b(" + "|".join(sorted(PLACEHOLDERS, key=len, reverse=True)) + r")\b")


def snapshot(root: Path) -> dict[str, object]:
    """Every path under root with its bytes (files) or None (folders)."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.join(dirpath, d)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[p] = Path(p).read_bytes()
    return out


def matches(expected: str, actual: str) -> bool:
    """`…` in the documented message stands for any text."""
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


# --- the guards: a case that gets this far has not been refused ------------------------------

NO_GPU_FACTS = {"cuda_available": False, "cuda_device_count": 0, "gpus": [],
                "no_gpu_reason": "torch.cuda.is_available() is False (faked by the test)"}


class StartedWork(AssertionError):
    pass


@pytest.fixture
def guarded(monkeypatch):
    def no_measuring(self):
        raise StartedWork("the runner started measuring instead of refusing the input")

    def no_generating(*a, **kw):
        raise StartedWork("the synthetic dataset was generated before the input was refused")

    monkeypatch.setattr(Runner, "execute", no_measuring)
    monkeypatch.setattr(dataset, "ensure_synthetic", no_generating)
    monkeypatch.setattr(commands, "_facts", lambda isolator, stop: dict(NO_GPU_FACTS))
    saved = dict(os.environ)  # cli.main points the libraries' caches into benchbench's
    yield
    os.environ.clear()
    os.environ.update(saved)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's errors
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the tests ---------------------------------------------------------------------------------

def _param(case: Case):
    marks = []
    if case.id in KNOWN_GAPS:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[case.id]))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input_is_refused_in_one_line(case, tmp_path, capsys, monkeypatch, guarded):
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.chdir(root)  # a default runs/<time> folder would land here, and be seen
    world = World(root, case)
    try:
        argv = world.argv()
        before = snapshot(root)
        started = time.perf_counter()
        code, out, err = run_main(argv, capsys)
        elapsed = time.perf_counter() - started
        after = snapshot(root)
    finally:
        world.clean_up()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    line = world.normalise(lines[0])
    assert code == case.exit, f"exit {code}: {line}"
    assert matches(case.message, line), f"\n  docs: {case.message}\n  said: {line}"
    assert out == "", f"printed before refusing:\n{out[:500]}"
    assert after == before, "wrote or changed files: " + ", ".join(
        sorted(set(after) ^ set(before) | {p for p in before if after.get(p) != before[p]}))
    for word in argv:  # /proc and /sys paths, outside the checked folder
        if word.startswith(("/proc/", "/sys/")):
            assert not os.path.exists(word)
    assert elapsed < SLOW_CASE_S, f"took {elapsed:.1f} s to refuse"


def test_the_page_is_well_formed():
    """Every row parses, ids are unique, every message is one benchbench error line, and the
    page has its groups; so a row mistyped in docs/errors.md fails here, not silently."""
    text = DOC.read_text(encoding="utf-8")
    legend, cases_part = text.split("## Placeholders")[1].split("\n## ", 1)
    rows = [ln for ln in cases_part.splitlines() if re.match(r"^\|\s*`", ln)]
    assert len(rows) == len(CASES) >= 100
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]
    assert set(KNOWN_GAPS) <= set(ids), set(KNOWN_GAPS) - set(ids)
    for c in CASES:
        assert c.message.startswith("benchbench: error: ") and "\n" not in c.message, c.id
        assert c.exit == 2, c.id
        if "CONFIG" in c.command:
            assert c.config_text, f"{c.id}: say the TOML in the case cell"
    for verb in ("run", "report", "compare", "history", "fleet", "export", "slurm", "doctor"):
        assert f"\n## {verb}\n" in text
    assert all(f"`{i}`" in text.split("## Known gaps")[-1] for i in KNOWN_GAPS)
    assert {c.id for c in CASES if "(known gap)" in c.what} == set(KNOWN_GAPS)
    assert all(f"`{name}`" in legend for name in PLACEHOLDERS)


def test_raw_device_opt_in_is_accepted(tmp_path):
    from benchbench.engine.catalog import default_registry

    world = World(tmp_path, Case("opt-in", "", "benchbench", 0, ""))
    dev = world.path("BLOCKDEV")
    args = cli.build_parser().parse_args(
        ["run", "--only", "storage", "--storage-path", dev, "--set",
         f"storage.raw_device={dev}", "--out", str(tmp_path / "out")])
    cfg = build_run_config(args, default_registry())
    commands._check_storage_path(cfg)  # the documented opt-in: no UsageError
