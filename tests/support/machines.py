"""File trees of machines, as {relative path: contents}, for detect() to read from tmp_path.

SANDBOX was recorded from the Firecracker microVM these modules were written on (a docker
container inside it). The others are modelled on what those machines publish in /proc and
/sys/class/dmi/id (the DMI strings are the ones systemd's virt.c and cloud documentation
list); their CPU flags lines are trimmed to the flags that matter plus a few neighbours.
"""

from pathlib import Path

# Recorded: the first `flags` line of /proc/cpuinfo, Sapphire Rapids vCPU under Firecracker.
_SANDBOX_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr "
    "sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology "
    "nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic "
    "movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm "
    "3dnowprefetch cpuid_fault ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 "
    "avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb "
    "avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 "
    "wbnoinvd arat avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq rdpid bus_lock_detect cldemote movdiri movdir64b fsrm "
    "md_clear serialize tsxldtrk ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d "
    "arch_capabilities")
_GUEST_FLAGS = "fpu vme de pse tsc msr pae sse sse2 ht syscall nx lm hypervisor lahf_lm abm"
_HOST_FLAGS = "fpu vme de pse tsc msr pae sse sse2 ht syscall nx lm vmx smx est tm2 lahf_lm"


def cpuinfo(flags: str, cpus: int = 2) -> str:
    block = ("processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n"
             "flags\t\t: {flags}\n\n")
    return "".join(block.format(i=i, flags=flags) for i in range(cpus))


ARM_CPUINFO = ("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull "
               "sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n"
               "CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n")


def dmi(sys_vendor: str, product_name: str, bios_vendor: str | None = None,
        board_vendor: str | None = None) -> dict[str, str]:
    out = {"sys/class/dmi/id/sys_vendor": sys_vendor + "\n",
           "sys/class/dmi/id/product_name": product_name + "\n"}
    if bios_vendor:
        out["sys/class/dmi/id/bios_vendor"] = bios_vendor + "\n"
    if board_vendor:
        out["sys/class/dmi/id/board_vendor"] = board_vendor + "\n"
    return out


CLOCK = "sys/devices/system/clocksource/clocksource0/available_clocksource"
HOST_CGROUP_V2 = "0::/init.scope\n"

SANDBOX = {
    "proc/cpuinfo": cpuinfo(_SANDBOX_FLAGS),
    CLOCK: "tsc kvm-clock \n",
    ".dockerenv": "",
    "proc/1/cgroup": ("9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
                      "4:memory:/\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n"),
    "proc/version": ("Linux version 6.18.44-fc-v657 (builder@sandboxing) (gcc (GCC) 15.3.0, "
                     "GNU ld (GNU Binutils) 2.46) #1 SMP PREEMPT_DYNAMIC @0\n"),
}

MACHINES: dict[str, dict[str, str]] = {
    "aws_nitro_vm": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), CLOCK: "tsc kvm-clock\n",
                     **dmi("Amazon EC2", "p4d.24xlarge", "Amazon EC2", "Amazon EC2")},
    "aws_metal": {"proc/cpuinfo": cpuinfo(_HOST_FLAGS), CLOCK: "tsc hpet acpi_pm\n",
                  **dmi("Amazon EC2", "m5.metal", "Amazon EC2", "Amazon EC2")},
    "aws_graviton_vm": {"proc/cpuinfo": ARM_CPUINFO,
                        **dmi("Amazon EC2", "c7g.xlarge", "Amazon EC2", "Amazon EC2")},
    "aws_graviton_metal": {"proc/cpuinfo": ARM_CPUINFO,
                           **dmi("Amazon EC2", "c7g.metal", "Amazon EC2", "Amazon EC2")},
    "aws_xen_era": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), "sys/hypervisor/type": "xen\n",
                    **dmi("Xen", "HVM domU", "Xen")},
    "gce": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), CLOCK: "kvm-clock tsc acpi_pm\n",
            **dmi("Google", "Google Compute Engine", "Google", "Google")},
    "azure": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS),
              CLOCK: "hyperv_clocksource_tsc_page acpi_pm\n",
              **dmi("Microsoft Corporation", "Virtual Machine", "American Megatrends Inc.",
                    "Microsoft Corporation")},
    "surface_laptop": {"proc/cpuinfo": cpuinfo(_HOST_FLAGS),
                       **dmi("Microsoft Corporation", "Surface Laptop 4", "Microsoft Corporation",
                             "Microsoft Corporation")},
    "vmware": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS),
               **dmi("VMware, Inc.", "VMware Virtual Platform", "Phoenix Technologies LTD",
                     "Intel Corporation")},
    "virtualbox": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), CLOCK: "tsc kvm-clock acpi_pm\n",
                   **dmi("innotek GmbH", "VirtualBox", "innotek GmbH", "Oracle Corporation")},
    "qemu_kvm": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), CLOCK: "kvm-clock tsc acpi_pm\n",
                 **dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "SeaBIOS")},
    "qemu_tcg": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS), CLOCK: "tsc acpi_pm\n",
                 **dmi("QEMU", "Standard PC (i440FX + PIIX, 1996)", "SeaBIOS")},
    "qemu_flag_hidden": {"proc/cpuinfo": cpuinfo(_HOST_FLAGS), CLOCK: "tsc acpi_pm\n",
                         **dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "SeaBIOS")},
    "xen_pv": {"proc/cpuinfo": cpuinfo(_HOST_FLAGS), "sys/hypervisor/type": "xen\n",
               CLOCK: "xen tsc\n"},
    "wsl2": {"proc/cpuinfo": cpuinfo(_GUEST_FLAGS),
             CLOCK: "hyperv_clocksource_tsc_page acpi_pm\n"},
    "dgx_host": {"proc/cpuinfo": cpuinfo(_HOST_FLAGS), CLOCK: "tsc hpet acpi_pm\n",
                 "proc/1/cgroup": HOST_CGROUP_V2,
                 **dmi("NVIDIA", "DGXH100", "American Megatrends International, LLC.",
                       "NVIDIA")},
    "arm_no_dmi": {"proc/cpuinfo": ARM_CPUINFO},
    "sandbox": SANDBOX,
}


def build(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
