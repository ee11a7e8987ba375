"""ResNet50's FLOPs per image (core/flops.py) against torch's own FLOP counter."""

import pytest

from benchbench.core.flops import resnet50_flops_per_image

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")


@pytest.mark.parametrize("size", [64, 160, 224])
def test_resnet50_flops_match_torch_flop_counter(size):
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):  # shapes only
        model = torchvision.models.resnet50()
        x = torch.randn(1, 3, size, size)
    with FlopCounterMode(display=False) as fwd:
        model(x)
    with FlopCounterMode(display=False) as train:
        model(x).sum().backward()
    assert resnet50_flops_per_image(size, training=False) == pytest.approx(
        fwd.get_total_flops(), rel=0.005)
    assert resnet50_flops_per_image(size) == pytest.approx(train.get_total_flops(), rel=0.01)
