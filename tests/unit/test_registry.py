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


@pytest.mark.parametrize("name", ["allreduce", "ddp_scaling"])
def test_an_exchanging_probe_on_one_gpu_skips_before_its_worker_starts(name):
    """On one GPU an all-reduce or DDP moves nothing: the runner skips it without a worker or
    a share of the budget; on two GPUs, on the CPU's ranks or in a multi-node launch it runs."""
    s = default_registry().get(name)
    assert s.skip_reason("cuda", None, gpus=1).startswith("one GPU: there is nothing to exchange")
    assert s.skip_reason("cuda", None, gpus=2) is None
    assert s.skip_reason("cuda", None, gpus=1, launched=True) is None
    assert s.skip_reason("cpu", None, gpus=0) is None
    assert default_registry().get("resnet50").skip_reason("cuda", None, gpus=1) is None


def test_a_probe_weighs_its_gpu_weight_on_a_gpu():
    """Each precision's start-up (cuDNN's autotuning) costs seconds on a GPU, where the steps
    take milliseconds: ResNet50's share is larger there; a probe without a GPU weight has one
    weight everywhere."""
    r = default_registry()
    resnet = r.get("resnet50")
    # on a CPU it weighs more (6): 224 px in --quick too, ~1.5 s a step on 2 cores
    assert resnet.weight("cuda") == resnet.gpu_weight == 3.2 and resnet.weight("cpu") == 6.0
    pipe = r.get("pipeline")
    assert (pipe.weight("cuda"), pipe.weight("cpu")) == (pipe.gpu_weight, pipe.budget_weight)
    assert r.get("matmul").gpu_weight is None
    assert r.get("matmul").weight("cuda") == r.get("matmul").weight("cpu")
