import json
import re
from pathlib import Path

import fake_nvml
import pytest
from fake_nvml import SWITCH, FakeNvml

from benchbench.core.peaks import pcie_rate
from benchbench.machine import environment, topology
from benchbench.machine.topology import gpu_topology, link_for

G = 1e9
SETTERS = ("nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear")


def _topo(nvml):
    return gpu_topology(nvml, nvml.gpus)


def test_nvswitch_node_reaches_its_peer_through_the_switch():
    t = _topo(fake_nvml.nvswitch_node())
    for g in t["gpus"]:
        assert g["nvlink_version"] == "4.0"  # NVML's code 6, not generation 6
        assert g["nvlinks_active"] == 18 and g["nvswitch_links"] == 18
        assert g["nvlink_peers"] == {}
        assert g["nvlink_per_direction"] == pytest.approx(450 * G)  # H100: 900 GB/s both ways
    (pair,) = t["pairs"]
    assert pair == {"a": 0, "b": 1, "nvlinks": 0, "via_nvswitch": True, "p2p_read": "ok",
                    "p2p_nvlink": "ok", "pcie_path": "NUMA node (CPU)",
                    "path": "NVLink ×18 via NVSwitch", "per_direction": pytest.approx(450 * G)}


def test_switch_links_found_by_bus_id_when_the_remote_type_query_is_missing():
    t = _topo(FakeNvml(missing=("nvmlDeviceGetNvLinkRemoteDeviceType",)))
    assert [g["nvswitch_links"] for g in t["gpus"]] == [18, 18]
    assert t["pairs"][0]["path"] == "NVLink ×18 via NVSwitch"


def test_nvswitch_partition_without_nvlink_p2p_falls_back_to_pcie():
    t = _topo(FakeNvml(p2p=(fake_nvml.P2P_OK, fake_nvml.P2P_NOT_SUPPORTED)))
    pair = t["pairs"][0]
    assert pair["via_nvswitch"] is False and pair["p2p_nvlink"] == "not supported"
    assert pair["path"] == "PCIe Gen5 x16 through the CPU (same NUMA node)"
    assert pair["per_direction"] == pcie_rate(5, 16)


def test_a100_links_stop_quietly_past_the_twelfth():
    gpus = [fake_nvml._gpu(name="NVIDIA A100-SXM4-80GB", bus=bus, nvlink_version=5,
                           links=[("00000000:C4:00.0", SWITCH)] * 12)
            for bus in ("00000000:07:00.0", "00000000:0F:00.0")]
    t = _topo(FakeNvml(gpus=gpus))  # links 12..17 answer InvalidArgument
    assert t["gpus"][0]["nvlinks_active"] == 12
    assert t["gpus"][0]["nvlink_per_direction"] == pytest.approx(300 * G)  # 600 GB/s both ways
    assert t["pairs"][0]["path"] == "NVLink ×12 via NVSwitch"


def test_bridged_pair_is_joined_directly():
    t = _topo(fake_nvml.bridged_pair())
    g0, g1 = t["gpus"]
    assert g0["nvlinks_active"] == 4  # 8 inactive slots skipped
    assert g0["nvlink_peers"] == {"1": 4} and g1["nvlink_peers"] == {"0": 4}
    assert g0["nvswitch_links"] == 0 and g0["nvlink_version"] == "3.1"
    (pair,) = t["pairs"]
    assert pair["nvlinks"] == 4 and pair["via_nvswitch"] is False
    assert pair["path"] == "NVLink ×4"
    assert pair["per_direction"] == pytest.approx(100 * G)
    assert pair["pcie_path"] == "host bridge"


def test_pcie_pair_through_the_host_bridge():
    t = _topo(fake_nvml.pcie_pair())
    for g in t["gpus"]:
        assert g["nvlinks_active"] == 0 and g["nvlink_peers"] == {}
        assert g["nvlink_version"] is None and g["nvlink_per_direction"] == 0.0
    (pair,) = t["pairs"]
    assert pair["nvlinks"] == 0 and pair["via_nvswitch"] is False
    assert pair["p2p_read"] == "not supported" and pair["p2p_nvlink"] == "not supported"
    assert pair["pcie_path"] == "host bridge"
    assert pair["path"] == "PCIe Gen4 x16 through the host bridge"
    assert pair["per_direction"] == pytest.approx(31.5e9, rel=1e-3)


def test_pcie_pair_runs_at_the_narrower_end():
    nvml = fake_nvml.pcie_pair()
    nvml.gpus[1] = {**nvml.gpus[1], "width": (8, 8)}
    pair = _topo(nvml)["pairs"][0]
    assert pair["path"] == "PCIe Gen4 x8 through the host bridge"
    assert pair["per_direction"] == pcie_rate(4, 8)


def test_old_pynvml_without_nvlink_queries():
    t = _topo(fake_nvml.old_pynvml())
    for g in t["gpus"]:
        assert all(g[k] is None for k in ("nvlink_version", "nvlinks_active", "nvlink_peers",
                                          "nvswitch_links", "nvlink_per_direction"))
    (pair,) = t["pairs"]
    assert pair["nvlinks"] is None and pair["via_nvswitch"] is None
    assert pair["p2p_nvlink"] == "ok"
    assert pair["path"] == "NVLink (link count unknown)" and pair["per_direction"] is None


def test_nothing_readable_is_not_called_pcie():
    nvml = FakeNvml(missing=(*fake_nvml.NVLINK_FUNCTIONS, "nvmlDeviceGetP2PStatus",
                             "nvmlDeviceGetTopologyCommonAncestor"))
    pair = _topo(nvml)["pairs"][0]
    assert pair["p2p_read"] is None and pair["pcie_path"] is None
    assert pair["path"] == "unknown (NVLink not readable)" and pair["per_direction"] is None


def test_permission_denied_is_unknown_not_absent():
    nvml = fake_nvml.nvswitch_node()
    nvml.gpus = [{**g, "links": "denied"} for g in nvml.gpus]
    g0 = _topo(nvml)["gpus"][0]
    assert g0["nvlinks_active"] is None and g0["nvlink_peers"] is None


def test_nvlink_rates_per_generation():
    assert topology.nvlink_version(5) == "3.1" and topology.nvlink_version(7) == "5.0"
    assert topology.nvlink_version(0) is None and topology.nvlink_version(None) is None
    assert topology.nvlink_link_rate("2.0", "Tesla V100-SXM2-32GB") == 25 * G
    assert topology.nvlink_link_rate("3.1", "NVIDIA A100-SXM4-80GB") == 25 * G
    assert topology.nvlink_link_rate("4.0", "NVIDIA H100 80GB HBM3") == 25 * G
    assert topology.nvlink_link_rate("5.0", "NVIDIA B200") == 50 * G
    # GA102 cards share the 3.x code but run 112.5 GB/s (both ways) over 4 links
    assert topology.nvlink_link_rate("3.1", "NVIDIA GeForce RTX 3090") == 14.0625 * G
    assert topology.nvlink_link_rate("3.1", "NVIDIA RTX A6000") == 14.0625 * G
    assert topology.nvlink_link_rate("6.0", "a future GPU") is None
    assert topology.nvlink_link_rate(None) is None


@pytest.mark.parametrize("make", [fake_nvml.nvswitch_node, fake_nvml.bridged_pair,
                                  fake_nvml.pcie_pair, fake_nvml.old_pynvml])
def test_gpu_snapshot_carries_the_topology_and_never_a_setter(make):
    nvml = make()
    info, reason = environment.gpu_snapshot(nvml)
    assert reason is None
    assert info["topology"] == _topo(make())
    assert json.loads(json.dumps(info["topology"])) == info["topology"]
    assert "nvmlDeviceGetP2PStatus" in nvml.looked_up  # the recorder sees what is used
    assert not [n for n in nvml.looked_up if n.startswith(SETTERS)]


def test_recorder_would_catch_a_setter():
    nvml = FakeNvml()
    assert getattr(nvml, "nvmlDeviceSetPersistenceMode", None) is None
    assert "nvmlDeviceSetPersistenceMode" in nvml.looked_up


def test_no_setter_named_in_the_nvml_modules():
    root = Path(__file__).parents[2] / "benchbench" / "machine"
    for path in root.glob("*.py"):
        assert not re.search(r"nvmlDevice(Set|Reset|Clear)", path.read_text()), path.name


def _pair(a, b, path, bw):
    return {"a": a, "b": b, "path": path, "per_direction": bw}


def test_link_for_takes_the_slowest_pair():
    t = {"pairs": [_pair(0, 1, "NVLink ×4", 100 * G), _pair(0, 2, "PCIe Gen4 x16", 31.5 * G),
                   _pair(1, 2, "PCIe Gen4 x16", 31.5 * G)]}
    assert link_for(t, 2) == _pair(0, 1, "NVLink ×4", 100 * G)
    assert link_for(t, 3) == _pair(0, 2, "PCIe Gen4 x16", 31.5 * G)
    assert link_for(t, 1) is None
    assert link_for(t, 4) is None  # pairs with GPU 3 are missing
    assert link_for(None, 2) is None and link_for({"gpus": [], "pairs": []}, 2) is None


def test_link_for_an_unknown_pair_gives_no_rate():
    t = {"pairs": [_pair(0, 1, "NVLink ×4", 100 * G), _pair(0, 2, "NVLink (link count unknown)",
                                                           None),
                   _pair(1, 2, "PCIe Gen4 x16", 31.5 * G)]}
    assert link_for(t, 3) == _pair(0, 2, "NVLink (link count unknown)", None)


def test_link_for_replayed_nodes():
    nvml = fake_nvml.nvswitch_node()
    info, _ = environment.gpu_snapshot(nvml)
    assert link_for(info["topology"], 2) == _pair(0, 1, "NVLink ×18 via NVSwitch",
                                                  pytest.approx(450 * G))
    assert link_for(_topo(fake_nvml.pcie_pair()), 2)["path"] == (
        "PCIe Gen4 x16 through the host bridge")
