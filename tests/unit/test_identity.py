"""The machine identity: recorded from a fake /sys tree (DMI strings, a root-only serial, no DMI
at all), stored by the environment snapshot, and read back, older runs included (#24)."""

from pathlib import Path

from fake_nvml import FakeNvml
from machines import build

from benchbench.compare import identity as ident
from benchbench.core import results
from benchbench.machine import environment
from benchbench.machine import identity as machine_identity

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
DMI = "sys/class/dmi/id/"
DGX = {DMI + "sys_vendor": "NVIDIA\n", DMI + "product_name": "DGXH100\n",
       DMI + "product_serial": "1660223000123\n", DMI + "bios_version": "1.6.7\n",
       DMI + "bios_date": "08/14/2025\n"}


def test_dmi_strings_and_serial_are_recorded_where_readable(tmp_path):
    rec = machine_identity.identity("dgx01", [{"uuid": "GPU-aa"}, {"uuid": None}],
                                    build(tmp_path, DGX))
    assert rec["hostname"] == "dgx01"
    assert rec["dmi"] == {"sys_vendor": "NVIDIA", "product_name": "DGXH100",
                          "product_serial": "1660223000123", "bios_version": "1.6.7",
                          "bios_date": "08/14/2025"}
    assert rec["dmi_unreadable"] == {}
    assert rec["gpu_uuids"] == ["GPU-aa"]


def test_a_root_only_serial_is_none_with_the_reason(tmp_path, monkeypatch):
    root = build(tmp_path, DGX)
    real = Path.read_text

    def read_text(self, *a, **kw):  # as a user reads mode 0400 (the tests may run as root)
        if self.name == "product_serial":
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", read_text)
    rec = machine_identity.identity("dgx01", [], root)
    assert rec["dmi"]["product_serial"] is None
    assert rec["dmi"]["product_name"] == "DGXH100"
    assert rec["dmi_unreadable"] == {"product_serial": "permission denied (root only)"}


def test_no_dmi_table_says_so_for_every_field(tmp_path):
    rec = machine_identity.identity("vm", [], tmp_path)
    assert set(rec["dmi"].values()) == {None}
    assert all("no DMI table" in why for why in rec["dmi_unreadable"].values())


def test_the_snapshot_records_the_identity_with_every_nvml_gpu(monkeypatch):
    real = environment.gpu_snapshot
    monkeypatch.setattr(environment, "gpu_snapshot",
                        lambda own=None: real(FakeNvml(), own=own))
    env = environment.snapshot(".", {"cuda_available": False, "gpus": []})
    rec = env["identity"]
    assert rec["hostname"] == env["host"]["hostname"]
    assert rec["gpu_uuids"] == [g["uuid"] for g in FakeNvml().gpus]
    assert env["gpus"][0]["vbios_version"] == "96.00.74.00.01"


def _env(host="a", serial=None, uuids=(), cpu="EPYC", recorded=True):
    env = {"host": {"hostname": host, "cpu_model": cpu},
           "gpus": [{"uuid": u} for u in uuids]}
    if recorded:
        env["identity"] = {"hostname": host, "gpu_uuids": list(uuids),
                           "dmi": {"sys_vendor": "V", "product_name": "P",
                                   "product_serial": serial}}
    return env


def test_the_strongest_shared_fact_decides():
    same = ident.same_machine
    # the serial outranks the host name: renamed, still the one box; same name, two boxes
    assert same(ident.of(_env("a", "S1")), ident.of(_env("b", "S1")))
    assert not same(ident.of(_env("a", "S1")), ident.of(_env("a", "S2")))
    # GPU UUIDs next: one GPU swapped keeps the machine
    assert same(ident.of(_env("a", uuids=("GPU-1", "GPU-2"))),
                ident.of(_env("b", uuids=("gpu-2", "GPU-3"))))
    assert not same(ident.of(_env("a", uuids=("GPU-1",))), ident.of(_env("a", uuids=("GPU-9",))))
    # the host name last, and only with the same CPU model
    assert same(ident.of(_env("a")), ident.of(_env("a")))
    assert not same(ident.of(_env("a", cpu="EPYC")), ident.of(_env("a", cpu="Xeon")))
    # a placeholder serial names no machine
    assert ident.of(_env("a", "To Be Filled By O.E.M.")).serial is None


def test_an_older_run_falls_back_to_host_name_and_gpu_uuids():
    run = results.load(FIXTURE)  # written before the identity was recorded
    assert "identity" not in run.environment
    old = ident.of(run.environment)
    assert not old.recorded and old.hostname == "vm" and old.basis == "host name"
    new = ident.of(_env("vm", cpu=run.environment["host"]["cpu_model"]))
    assert ident.same_machine(old, new)
    gpu_old = ident.of(_env("x", uuids=("GPU-7",), recorded=False))
    assert gpu_old.basis == "GPU UUIDs" and gpu_old.gpu_uuids == {"7"}


def test_machines_groups_runs_transitively_in_order():
    ids = [ident.of(e) for e in (_env("a", "S1"), _env("b"), _env("a2", "S1"), _env("b"),
                                 _env("c", uuids=("GPU-1",)))]
    assert ident.machines(ids) == [[0, 2], [1, 3], [4]]


def _row(env):
    from benchbench.reports.markdown import environment_section

    rows = [r for r in environment_section(env) if r.startswith("| Machine identity |")]
    return rows[0] if rows else None


def test_report_md_shows_what_history_and_fleet_know_the_machine_by(tmp_path):
    gpus = [{"uuid": f"GPU-{i}"} for i in range(8)]
    env = {"host": {"hostname": "dgx01"},
           "identity": machine_identity.identity("dgx01", gpus, build(tmp_path, DGX))}
    row = _row(env)
    assert row is not None
    assert "NVIDIA DGXH100, serial 1660223000123, 8 GPU UUIDs" in row
    env["identity"]["dmi"]["product_serial"] = "SN 42 7"  # a serial with spaces, kept whole
    assert "serial SN 42 7, 8 GPU UUIDs" in _row(env)
    assert "know it by its DMI serial" in row
    env["identity"]["dmi"]["product_serial"] = "To Be Filled By O.E.M."
    row = _row(env)
    assert 'serial a placeholder ("To Be Filled By O.E.M.")' in row and "by its GPU UUIDs" in row
    bare = tmp_path / "vm"
    bare.mkdir()
    vm = {"host": {"hostname": "vm"}, "identity": machine_identity.identity("vm", [], bare)}
    assert "serial unread: no DMI table" in _row(vm) and "by its host name" in _row(vm)
    assert _row({"host": {"hostname": "old"}}) is None  # a run from before the record
