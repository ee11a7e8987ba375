import pytest

from benchbench.core.peaks import gpu_peak, pcie_rate


@pytest.mark.parametrize("name,model", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA A10", "A10"),
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
])
def test_names_match_the_right_row(name, model):
    assert gpu_peak(name).model == model


def test_unknown_and_missing():
    assert gpu_peak("NVIDIA A40") is None
    assert gpu_peak(None) is None
    assert gpu_peak("Tesla T4").flops("bf16") is None  # no bf16 tensor cores
    assert gpu_peak("NVIDIA H200").flops("bf16") == pytest.approx(989.5e12)


def test_pcie_rates():
    assert pcie_rate(4, 16) == pytest.approx(31.5e9, rel=1e-3)
    assert pcie_rate(5, 16) == pytest.approx(63.0e9, rel=1e-3)
    assert pcie_rate(3, 8) == pytest.approx(7.88e9, rel=1e-3)
    assert pcie_rate(None, 16) is None and pcie_rate(9, 16) is None
