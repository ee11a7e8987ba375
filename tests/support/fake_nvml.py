"""Recorded NVML answers from a 2-GPU H100 SXM node, replayed through pynvml's API shape.

The NVLink, P2P and PCIe-ancestor answers, and the other machines below (an NVLink-bridged pair,
a PCIe-only pair, an old pynvml), are modelled on NVML's documented answers, not recorded.
Every `nvml*`/`NVML_*` name looked up is kept in `looked_up`, so a test can prove that nothing
reached for a setter; `missing` names what an older pynvml lacks.

The health answers (clock-event reasons, ECC counts, retired pages, remapped rows, the default
power limit) follow NVML's documented shapes; a GPU dict without them answers as a healthy
idle H100 does: GPU-idle only, no errors, page retirement NotSupported (A100 and later remap
rows instead).
"""

from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
GPU, SWITCH = 0, 2  # NVML_NVLINK_DEVICE_TYPE_*
P2P_OK, P2P_NOT_SUPPORTED = 0, 5  # NVML_P2P_STATUS_*
HOSTBRIDGE, NODE = 30, 40  # NVML_TOPOLOGY_*


class NVMLError(Exception):
    value = 999  # pynvml's errors carry their NVML_ERROR_* code here


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801 - pynvml's own spelling
    value = 2


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    value = 3


class NVMLError_NoPermission(NVMLError):  # noqa: N801
    value = 4


class NVMLError_NotFound(NVMLError):  # noqa: N801
    value = 6  # an empty MIG slot answers this


# An HGX H100 baseboard: each GPU's 18 links go to the four NVSwitches (5 + 5 + 4 + 4).
_SWITCHES = ["00000000:C4:00.0", "00000000:C5:00.0", "00000000:C6:00.0", "00000000:C7:00.0"]
_SWITCH_LINKS = [(_SWITCHES[k], SWITCH) for k in [0] * 5 + [1] * 5 + [2] * 4 + [3] * 4]


GPUS = [
    dict(name="NVIDIA H100 80GB HBM3", uuid="GPU-11111111-2222-3333-4444-555555555555",
         bus="00000000:18:00.0", mem=85520809984, gen=(5, 5), width=(16, 16), pm=1,
         ecc=(1, 1), sm=(1980, 1980), memclk=2619, power=700000, cc=(9, 0), numa=0,
         affinity=[0x0000FFFF], procs=[], links=_SWITCH_LINKS, nvlink_version=6),
    dict(name="NVIDIA H100 80GB HBM3", uuid="GPU-66666666-2222-3333-4444-555555555555",
         bus="00000000:2A:00.0", mem=85520809984, gen=(1, 5), width=(16, 16), pm=0,
         ecc=None, sm=(345, 1980), memclk=2619, power=700000, cc=(9, 0), numa=None,
         affinity=[0xFFFF0000], procs=[SimpleNamespace(pid=4242, usedGpuMemory=1 << 30)],
         links=_SWITCH_LINKS, nvlink_version=6),
]


class FakeNvml:
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_P2P_CAPS_INDEX_READ = (0,)  # sic: pynvml writes `= 0,`, a tuple
    NVML_P2P_CAPS_INDEX_NVLINK = 2

    def __init__(self, gpus=GPUS, fail_init=None, p2p=(P2P_OK, P2P_OK), ancestor=NODE,
                 missing=()):
        self.gpus = gpus
        self.fail_init = fail_init
        self.p2p = {0: p2p[0], 2: p2p[1]}  # by NVML_P2P_CAPS_INDEX_*: read, nvlink
        self.ancestor = ancestor
        self.missing = set(missing)
        self.calls = []
        self.looked_up = []
        self.energy_reads = {}  # uuid -> how many times the energy counter was read

    def __getattribute__(self, name):
        if name.startswith(("nvml", "NVML_")):
            object.__getattribute__(self, "looked_up").append(name)
            if name in object.__getattribute__(self, "missing"):
                raise AttributeError(name)
        return object.__getattribute__(self, name)

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

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for g in self.gpus:
            if g["uuid"] == uuid:
                return g
        raise NVMLError_NotSupported("Not Found")

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=h["bus"].encode())  # older pynvml returns bytes

    def nvmlDeviceGetVbiosVersion(self, h):
        return h.get("vbios", "96.00.74.00.01")

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

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return h.get("power_default", h["power"])

    # --- health: a key set to None answers NotSupported ----------------------------------------

    @staticmethod
    def _answer(h, key, default):
        value = h.get(key, default)
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        return value

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._answer(h, "clock_events", 0x1)  # nvmlClocksEventReasonGpuIdle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):  # the pre-12.2 name, same answer
        return self._answer(h, "clock_events", 0x1)

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        assert error_type == 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED: all the doctor asks for
        return self._answer(h, "ecc_errors", (0, 0))[counter_type]  # (volatile, aggregate)

    def nvmlDeviceGetRetiredPages(self, h, cause):
        # (multiple single-bit, double-bit) lists of page addresses, by retirement cause
        return self._answer(h, "retired_pages", None)[cause]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self._answer(h, "retired_pending", None)

    def nvmlDeviceGetRemappedRows(self, h):
        # (correctable rows, uncorrectable rows, remap pending, remap failure)
        return self._answer(h, "remapped_rows", (0, 0, 0, 0))

    # --- energy and sharing: modelled on nvml.h's documented answers, not recorded --------------
    # "energy_mJ" is a tape (one answer per call, the last repeated) of
    # nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded, Volta and later; None
    # answers NotSupported. "virt_mode" is an nvmlGpuVirtualizationMode_t (0: none, bare metal
    # or passthrough; 2: a vGPU guest), "mig_mode" pynvml's [current, pending] list and
    # "mig_devices" the occupied MIG slots; a GPU without them is an H100 outside MIG.

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        tape = self._answer(h, "energy_mJ", None)
        n = self.energy_reads.get(h["uuid"], 0)
        self.energy_reads[h["uuid"]] = n + 1
        value = tape[min(n, len(tape) - 1)]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetVirtualizationMode(self, h):
        return self._answer(h, "virt_mode", 0)

    def nvmlDeviceGetMigMode(self, h):
        return list(self._answer(h, "mig_mode", (0, 0)))

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return self._answer(h, "mig_slots", 7)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, index):
        if index not in h.get("mig_devices", ()):
            raise NVMLError_NotFound("Not Found")
        return {"parent": h["uuid"], "mig_index": index}

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return h["procs"]

    def nvmlDeviceGetNumaNodeId(self, h):
        if h["numa"] is None:
            raise NVMLError_NotSupported("Not Supported")
        return h["numa"]

    def nvmlDeviceGetCpuAffinity(self, h, words):
        return h["affinity"]

    # --- NVLink: a GPU's "links" lists its link slots, None for an inactive one ---------------

    def _link(self, h, link):
        if h["links"] is None:
            raise NVMLError_NotSupported("Not Supported")
        if h["links"] == "denied":
            raise NVMLError_NoPermission("Insufficient Permissions")
        if link >= len(h["links"]):
            raise NVMLError_InvalidArgument("Invalid Argument")
        return h["links"][link]

    def _active(self, h, link):
        slot = self._link(h, link)
        if slot is None:
            raise NVMLError_NotSupported("Not Supported")  # an inactive link has no far end
        return slot

    def nvmlDeviceGetNvLinkState(self, h, link):
        return 0 if self._link(h, link) is None else 1

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        self._active(h, link)
        return h["nvlink_version"]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return self._active(h, link)[1]

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, h, link):
        return SimpleNamespace(busId=self._active(h, link)[0])

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return SimpleNamespace(busId=self._active(h, link)[0].encode())

    # --- pairs ---------------------------------------------------------------------------------

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        if not isinstance(index, int):
            raise TypeError(f"Don't know how to convert parameter 3: {index!r}")  # as ctypes
        return self.p2p[index]

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        if self.ancestor is None:
            raise NVMLError_NotSupported("Not Supported")
        return self.ancestor


NVLINK_FUNCTIONS = ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion",
                    "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                    "nvmlDeviceGetNvLinkRemotePciInfo", "NVML_NVLINK_MAX_LINKS")


def _gpu(**changes):
    return {**GPUS[0], "procs": [], **changes}


def nvswitch_node():
    """(a) The H100 SXM node above: every link goes to an NVSwitch, P2P over NVLink works."""
    return FakeNvml()


def bridged_pair():
    """(b) Two A100 PCIe cards joined by one NVLink bridge: 4 of 12 links, straight to the other
    card. This pynvml lacks the _v2 query and the remote device type, and the far end is spelt
    with a 4-digit, lower-case domain, as sysfs writes it."""
    a, b = "00000000:3B:00.0", "00000000:5E:00.0"
    return FakeNvml(gpus=[
        _gpu(name="NVIDIA A100 80GB PCIe", bus=a, gen=(4, 4), nvlink_version=5,
             links=[("0000:5e:00.0", GPU)] * 4 + [None] * 8),
        _gpu(name="NVIDIA A100 80GB PCIe", bus=b, gen=(4, 4), nvlink_version=5,
             links=[("0000:3b:00.0", GPU)] * 4 + [None] * 8),
    ], ancestor=HOSTBRIDGE, missing=("nvmlDeviceGetNvLinkRemotePciInfo_v2",
                                     "nvmlDeviceGetNvLinkRemoteDeviceType"))


def pcie_pair():
    """(c) Two L40S on PCIe Gen4 x16 under one host bridge: no NVLink, no P2P."""
    return FakeNvml(gpus=[
        _gpu(name="NVIDIA L40S", bus="00000000:17:00.0", gen=(4, 4), links=None),
        _gpu(name="NVIDIA L40S", bus="00000000:31:00.0", gen=(4, 4), links=None),
    ], p2p=(P2P_NOT_SUPPORTED, P2P_NOT_SUPPORTED), ancestor=HOSTBRIDGE)


def old_pynvml():
    """(d) The H100 node behind a pynvml without any NVLink query."""
    return FakeNvml(missing=NVLINK_FUNCTIONS)
