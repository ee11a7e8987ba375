"""Energy: RAPL on recorded powercap trees (wraps, psys, permissions), NVML counters, power
integration and the derived figures."""

import os
from pathlib import Path

import pytest
from machines import build

from benchbench.machine.energy import (
    RaplZone,
    average_watts,
    integrate_power,
    nvml_energy_joules,
    per_sample_energy,
    rapl_joules,
    rapl_unavailable_reason,
    read_rapl,
    samples_per_kwh,
)

PC = "sys/class/powercap"
WRAP = 262143328850  # max_energy_range_uj of a Xeon package: 2^32 units of ~61 uJ


def zone(name, energy, wrap=WRAP):
    out = {"name": f"{name}\n", "energy_uj": f"{energy}\n", "enabled": "1\n"}
    if wrap is not None:
        out["max_energy_range_uj"] = f"{wrap}\n"
    return out


def powercap(root: Path, zones: dict[str, dict[str, str]]) -> Path:
    """A /sys/class/powercap tree laid out as a two-socket Xeon shows it: the control type
    directory, the package zones, their core/dram subzones and the MMIO view of package 0."""
    files = {f"{PC}/intel-rapl/enabled": "1\n"}
    for zone_dir, contents in zones.items():
        files.update({f"{PC}/{zone_dir}/{k}": v for k, v in contents.items()})
    return build(root, files)


def two_sockets(e0, e1):
    return {"intel-rapl:0": zone("package-0", e0), "intel-rapl:1": zone("package-1", e1),
            "intel-rapl:0:0": zone("dram", 555), "intel-rapl:1:0": zone("dram", 777),
            "intel-rapl-mmio:0": zone("package-0", e0)}


def test_reads_top_level_package_zones_only(tmp_path):
    got = read_rapl(powercap(tmp_path, two_sockets(1_000_000, 2_000_000)))
    assert got == {"intel-rapl:0": RaplZone("package-0", 1_000_000, WRAP),
                   "intel-rapl:1": RaplZone("package-1", 2_000_000, WRAP)}
    assert rapl_unavailable_reason(tmp_path) is None


def test_joules_between_two_readings(tmp_path):
    before = read_rapl(powercap(tmp_path / "a", two_sockets(1_000_000, 2_000_000)))
    after = read_rapl(powercap(tmp_path / "b", two_sockets(151_000_000, 62_000_000)))
    assert rapl_joules(before, after) == pytest.approx(150 + 60)


def test_wrapped_counter(tmp_path):
    before = read_rapl(powercap(tmp_path / "a", two_sockets(WRAP - 4_000_000, 0)))
    after = read_rapl(powercap(tmp_path / "b", two_sockets(6_000_000, 1_000_000)))
    assert rapl_joules(before, after) == pytest.approx(10 + 1)


def test_wrapped_counter_without_its_range_gives_none(tmp_path):
    before = read_rapl(powercap(tmp_path / "a", {"intel-rapl:0": zone("package-0", 9, None)}))
    after = read_rapl(powercap(tmp_path / "b", {"intel-rapl:0": zone("package-0", 3, None)}))
    assert before["intel-rapl:0"].max_energy_range_uj is None
    assert rapl_joules(before, after) is None


def test_psys_is_not_added_to_the_packages(tmp_path):
    def laptop(e):
        return {"intel-rapl:0": zone("package-0", e), "intel-rapl:1": zone("psys", 3 * e)}

    before = read_rapl(powercap(tmp_path / "a", laptop(1_000_000)))
    after = read_rapl(powercap(tmp_path / "b", laptop(5_000_000)))
    assert set(after) == {"intel-rapl:0", "intel-rapl:1"}
    assert rapl_joules(before, after) == pytest.approx(4)


def test_only_zones_in_both_readings_count():
    a = {"intel-rapl:0": RaplZone("package-0", 0, WRAP)}
    b = {"intel-rapl:0": RaplZone("package-0", 2_000_000, WRAP),
         "intel-rapl:1": RaplZone("package-1", 9_000_000, WRAP)}
    assert rapl_joules(a, b) == pytest.approx(2)
    assert rapl_joules(a, {"intel-rapl:1": b["intel-rapl:1"]}) is None
    assert rapl_joules(None, b) is None


def test_no_powercap(tmp_path):
    assert read_rapl(tmp_path) is None
    assert "no RAPL zone" in rapl_unavailable_reason(tmp_path)
    build(tmp_path, {f"{PC}/intel-rapl/enabled": "0\n"})  # driver loaded, no zone
    assert read_rapl(tmp_path) is None


def test_unreadable_energy(tmp_path):
    root = powercap(tmp_path, two_sockets(1, 2))
    energy = root / PC / "intel-rapl:1" / "energy_uj"
    if os.geteuid() != 0:
        energy.chmod(0)
        expected = "readable only by root"
    else:  # root reads a mode-000 file, so make open() fail another way
        energy.unlink()
        energy.mkdir()
        expected = "could not be read"
    assert read_rapl(root) is None
    assert expected in rapl_unavailable_reason(root)
    assert "intel-rapl:1" in rapl_unavailable_reason(root)


def test_permission_denied_names_the_kernel_change(tmp_path, monkeypatch):
    root = powercap(tmp_path, two_sockets(1, 2))
    real = Path.read_text

    def read_text(self, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert read_rapl(root) is None
    assert "CVE-2020-8694" in rapl_unavailable_reason(root)


def test_garbage_energy_is_unreadable(tmp_path):
    root = powercap(tmp_path, {"intel-rapl:0": zone("package-0", "n/a")})
    assert read_rapl(root) is None
    assert "ValueError" in rapl_unavailable_reason(root)


@pytest.mark.parametrize("before, after, joules", [
    (1_000, 351_000, 350.0),
    (5, 5, 0.0),
    (None, 5, None),
    (5, None, None),
    (9_000, 1_000, None),  # the driver reloaded in between
])
def test_nvml_energy(before, after, joules):
    assert nvml_energy_joules(before, after) == joules


def test_integrate_power_trapezoid():
    joules, seconds = integrate_power([0.0, 0.1, 0.2, 0.3], [100.0, 200.0, 200.0, 0.0])
    assert joules == pytest.approx(15 + 20 + 10)
    assert seconds == pytest.approx(0.3)


def test_integrate_power_skips_gaps():
    t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    w = [100.0, 100.0, None, 300.0, 300.0, None]
    joules, seconds = integrate_power(t, w)
    assert joules == pytest.approx(100 + 300)  # 0-1 and 3-4; nothing bridges the gap
    assert seconds == pytest.approx(2.0)
    assert average_watts(joules, seconds) == pytest.approx(200)


@pytest.mark.parametrize("t, w", [([], []), ([0.0], [50.0]), ([0.0, 1.0], [None, 50.0]),
                                  ([1.0, 1.0], [50.0, 50.0])])
def test_integrate_power_without_a_pair(t, w):
    assert integrate_power(t, w) == (None, 0.0)


def test_derived():
    assert per_sample_energy(500.0, 1000) == pytest.approx(0.5)
    assert per_sample_energy(500.0, 0) is None
    assert per_sample_energy(None, 10) is None
    # 3,000 images/s at 700 W: 3000 / 700 images per J, times 3.6 MJ per kWh
    assert samples_per_kwh(3000, 700) == pytest.approx(3000 / 700 * 3.6e6)
    assert samples_per_kwh(3000, 0) is None
    assert samples_per_kwh(3000, None) is None
    assert average_watts(600.0, 2.0) == pytest.approx(300)
    assert average_watts(600.0, 0) is None
    assert average_watts(None, 2.0) is None


def test_live_machine_types():
    zones = read_rapl()
    reason = rapl_unavailable_reason()
    assert (zones is None) == isinstance(reason, str)
    for z in (zones or {}).values():
        assert isinstance(z, RaplZone) and isinstance(z.energy_uj, int)
