"""Every probe's config resolves on every device, with and without --quick, before it runs: a
field left at auto is filled from (device, quick, the machine's facts), and the run modules
read it through probes.api.resolved. The few that stay unset say why below."""

import dataclasses

import pytest

from benchbench.engine.catalog import default_registry

GPU_NODE = {"cuda_available": True, "cuda_device_count": 8, "usable_cores": 16,
            "host_llc_bytes": 64 << 20,
            "gpus": [{"index": i, "capability": "9.0", "l2_cache_bytes": 50 << 20}
                     for i in range(8)]}
CPU_BOX = {"cuda_available": False, "cuda_device_count": 0, "gpus": [], "usable_cores": 2}

# Fields that stay unset after resolving, and why.
STAY_UNSET = {
    "both": {
        ("transformer", "n_layers"), ("transformer", "d_model"),  # the preset's, whichever the
        ("transformer", "n_heads"), ("transformer", "vocab_size"),  # user names
        ("storage", "runtime"),  # planned from the budget left when it starts
        ("storage", "raw_device"),  # read only when named
        ("pipeline", "loader"), ("pipeline", "workers"),  # the dataloader probe's best, this run
        ("stability", "size"),  # where the matmul probe peaked, this run
        ("inference", "latency_bound_s"),  # MLPerf's, or 5x one image's latency, measured
    },
    "cpu": {("matmul", "devices"), ("memory_bandwidth", "devices"),  # no GPU to name
            ("host_device_copy", "devices"), ("memory_bandwidth", "gpu_size_bytes")},
    "cuda": {("ddp_scaling", "counts")},  # 1, 2, 4 … up to the world torchrun or srun gives
}


@pytest.mark.parametrize("device,facts", [("cpu", CPU_BOX), ("cuda", GPU_NODE)])
@pytest.mark.parametrize("quick", [True, False])
def test_no_field_is_left_at_auto(device, facts, quick):
    unset = set()
    for spec in default_registry():
        cfg = spec.resolve(device, quick, facts, {})
        unset |= {(spec.name, f.name) for f in dataclasses.fields(cfg)
                  if f.default is None and getattr(cfg, f.name) is None}
    assert unset == STAY_UNSET["both"] | STAY_UNSET[device]


def test_auto_from_the_user_keeps_the_default_and_a_value_wins():
    spec = default_registry().get("resnet50")
    assert spec.resolve("cuda", False, GPU_NODE, {"batch_size": None}).batch_size == 256
    assert spec.resolve("cuda", False, GPU_NODE, {"batch_size": "auto"}).batch_size == "auto"
    assert spec.resolve("cpu", True, CPU_BOX, {"batch_size": 2}).batch_size == 2


def test_the_machine_decides_what_the_machine_decides():
    reg = default_registry()
    assert reg.get("matmul").resolve("cuda", False, GPU_NODE, {}).devices == tuple(range(8))
    assert reg.get("dataloader").resolve("cpu", False, {"usable_cores": 6}, {}).workers == (
        0, 1, 2, 4, 6)
    v100 = {**GPU_NODE, "gpus": [{"index": 0, "capability": "7.0"}]}
    assert reg.get("pipeline").resolve("cuda", False, v100, {}).precisions == ("amp_fp16",)
    mb = reg.get("memory_bandwidth").resolve("cuda", True, GPU_NODE, {})
    assert mb.gpu_size_bytes == 512 << 20 and mb.host_size_bytes == 256 << 20  # ≥ 4x caches
