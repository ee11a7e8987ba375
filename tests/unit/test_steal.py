"""CPU steal from recorded /proc/stat pairs: kernels with 7, 8 and 10 fields, the flag."""

from pathlib import Path

import pytest

from benchbench.machine.steal import (
    STEAL_FLAG,
    CpuTimes,
    flag,
    parse_proc_stat,
    read_proc_stat,
    steal_fraction,
    unavailable_reason,
)

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures" / "proc_stat"

# Modern kernel (2.6.33+), 10 fields, on a VM that also runs a nested guest: guest time is
# already inside user, so counting it again would shrink the steal share.
MODERN = ("cpu  1000 10 500 8000 100 0 50 40 300 0\ncpu0 500 5 250 4000 50 0 25 20 150 0\n",
          "cpu  1500 10 600 8300 100 0 50 80 700 0\ncpu0 750 5 300 4150 50 0 25 40 350 0\n")
# 2.6.11 to 2.6.23: 8 fields, steal is the last one.
OLD_8 = ("cpu  2255 34 2290 22625563 6290 127 456 0\nintr 114930548 113199788 3\n",
         "cpu  2355 34 2390 22625763 6290 127 456 40\nintr 114930999 113199790 3\n")
# 2.6.0 to 2.6.10: 7 fields, no steal counter at all.
OLD_7 = ("cpu  2255 34 2290 22625563 6290 127 456\n",
         "cpu  2355 34 2390 22625763 6290 127 456\n")


def pair(texts):
    return parse_proc_stat(texts[0]), parse_proc_stat(texts[1])


def test_ten_fields_excludes_guest_from_the_total():
    before, after = pair(MODERN)
    assert after == CpuTimes(1500, 10, 600, 8300, 100, 0, 50, 80, 700, 0, fields=10)
    assert steal_fraction(before, after) == pytest.approx(40 / 940)  # not 40 / 1340
    assert unavailable_reason(before, after) is None


def test_eight_fields():
    before, after = pair(OLD_8)
    assert (after.fields, after.steal, after.guest, after.guest_nice) == (8, 40, 0, 0)
    assert steal_fraction(before, after) == pytest.approx(40 / 440)


def test_seven_fields_has_no_steal_to_report():
    before, after = pair(OLD_7)
    assert after.steal == 0 and after.fields == 7
    assert steal_fraction(before, after) is None
    assert "no steal column" in unavailable_reason(before, after)


def test_recorded_firecracker_pair(tmp_path):
    (tmp_path / "proc").mkdir()
    times = []
    for name in ("before", "after"):
        (tmp_path / "proc" / "stat").write_text(
            (FIXTURES / f"proc_stat_firecracker_{name}.txt").read_text())
        times.append(read_proc_stat(tmp_path))
    assert times[0] == CpuTimes(40002, 25, 8608, 104049, 3478, 0, 433, 122, 0, 0)
    assert steal_fraction(*times) == 0.0  # steal stayed at 122 jiffies


@pytest.mark.parametrize("before, after", [
    (CpuTimes(user=5), CpuTimes(user=5)),  # no time passed
    (CpuTimes(user=9, steal=9), CpuTimes(user=10, steal=1)),  # rebooted between the readings
])
def test_no_interval_gives_none(before, after):
    assert steal_fraction(before, after) is None
    assert unavailable_reason(before, after)


@pytest.mark.parametrize("text", ["", "intr 1 2 3\n", "cpu  1 2 x 4\n", "cpu  1 2\n"])
def test_unparseable(text):
    assert parse_proc_stat(text) is None


def test_missing_file(tmp_path):
    assert read_proc_stat(tmp_path) is None
    assert "could not be read" in unavailable_reason(None, None)


def test_flag():
    assert flag("dataloader", 0.041) == (
        "another tenant took 4.1% of this VM's CPU time while dataloader ran")
    assert flag("dataloader", STEAL_FLAG) is None
    assert flag("dataloader", 0.0) is None
    assert flag("dataloader", None) is None


def test_live_machine_types():
    before = read_proc_stat()
    after = read_proc_stat()
    assert before is None or isinstance(before, CpuTimes)
    if before and after:
        got = steal_fraction(before, after)
        assert got is None or 0.0 <= got <= 1.0
