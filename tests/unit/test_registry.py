import pytest

from benchbench.engine.catalog import Registry, default_registry
from benchbench.probes.api import ProbeSpec
from benchbench.probes.matmul.config import MatmulConfig


def spec(name="a", **kw):
    base = dict(name=name, description="d", config_cls=MatmulConfig, run="x",
                gpu_resource="gpu_compute", cpu_resource="cpu_compute")
    base.update(kw)
    return ProbeSpec(**base)


def test_duplicate_name_is_an_error():
    r = Registry([spec("a")])
    with pytest.raises(ValueError, match="registered twice"):
        r.register(spec("a"))


def test_unknown_resource_is_an_error():
    with pytest.raises(ValueError, match="unknown resource"):
        spec(gpu_resource="gpu")


def test_default_registry_order_and_resources():
    r = default_registry()
    assert r.names()[:3] == ["matmul", "memory_bandwidth", "host_device_copy"]
    assert r.get("matmul").resource("cuda") == "gpu_compute"
    assert r.get("matmul").resource("cpu") == "cpu_compute"
    assert r.get("memory_bandwidth").resource("cpu") == "host_memory"
    assert default_registry() is not r  # no shared singleton


def test_skip_reason_for_gpu_probe():
    s = default_registry().get("host_device_copy")
    assert s.skip_reason("cuda", None) is None
    why = s.skip_reason("cpu", "NVML unavailable: NVML Shared Library Not Found")
    assert why == "it needs a CUDA GPU and NVML unavailable: NVML Shared Library Not Found"
    assert default_registry().get("matmul").skip_reason("cpu", "x") is None
