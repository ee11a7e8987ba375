"""Recorded NVML answers from a 2-GPU H100 SXM node, replayed through pynvml's API shape."""

from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


class NVMLError_NotSupported(Exception):  # noqa: N801 - pynvml's own spelling
    pass


GPUS = [
    dict(name="NVIDIA H100 80GB HBM3", uuid="GPU-11111111-2222-3333-4444-555555555555",
         bus="00000000:18:00.0", mem=85520809984, gen=(5, 5), width=(16, 16), pm=1,
         ecc=(1, 1), sm=(1980, 1980), memclk=2619, power=700000, cc=(9, 0), numa=0,
         affinity=[0x0000FFFF], procs=[]),
    dict(name="NVIDIA H100 80GB HBM3", uuid="GPU-66666666-2222-3333-4444-555555555555",
         bus="00000000:2A:00.0", mem=85520809984, gen=(1, 5), width=(16, 16), pm=0,
         ecc=None, sm=(345, 1980), memclk=2619, power=700000, cc=(9, 0), numa=None,
         affinity=[0xFFFF0000], procs=[SimpleNamespace(pid=4242, usedGpuMemory=1 << 30)]),
]


class FakeNvml:
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM

    def __init__(self, gpus=GPUS, fail_init=None):
        self.gpus = gpus
        self.fail_init = fail_init
        self.calls = []

    def __getattr__(self, name):
        raise AttributeError(name)

    def nvmlInit(self):
        if self.fail_init:
            raise self.fail_init

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=h["bus"].encode())  # older pynvml returns bytes

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return h["cc"]

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h["mem"])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return h["gen"][0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return h["gen"][1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return h["width"][0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return h["width"][1]

    def nvmlDeviceGetPersistenceMode(self, h):
        return h["pm"]

    def nvmlDeviceGetEccMode(self, h):
        if h["ecc"] is None:
            raise NVMLError_NotSupported("Not Supported")
        return h["ecc"]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return h["sm"][0]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return h["sm"][1] if kind == NVML_CLOCK_SM else h["memclk"]

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return h["power"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return h["procs"]

    def nvmlDeviceGetNumaNodeId(self, h):
        if h["numa"] is None:
            raise NVMLError_NotSupported("Not Supported")
        return h["numa"]

    def nvmlDeviceGetCpuAffinity(self, h, words):
        return h["affinity"]
