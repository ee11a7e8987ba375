"""The FLOPs a model needs per sample, for MFU and for the most a GPU's peak allows.

ResNet50 v1.5 at 224 px: 4.09 G multiply-adds a forward pass (torchvision's model card for
ResNet50_Weights, "GFLOPS 4.09", which counts a multiply-add as one), so 8.18 GFLOP; a
training step is about three forward passes (the backward pass computes the gradients of the
activations and of the weights, each about a forward's work: Kaplan et al. 2020, "Scaling
Laws", section 2.1); torch.utils.flop_counter counts 2.97 of them for ResNet50, whose first
convolution needs no input gradient: 24.3 GFLOP an image. Every layer but the classifier is
convolutional, so the work grows with the pixels; the classifier's 2 M multiply-adds do not.
tests/unit/test_flops.py holds these against torch.utils.flop_counter.
"""

from __future__ import annotations

RESNET50_FORWARD_MACS_224 = 4.09e9
_CLASSIFIER_MACS = 2048 * 1000
TRAINING_OVER_FORWARD = 2.97


def resnet50_flops_per_image(image_size: int = 224, training: bool = True) -> float:
    """FLOPs (a multiply-add is two) that ResNet50 needs per image at `image_size` px."""
    convs = (RESNET50_FORWARD_MACS_224 - _CLASSIFIER_MACS) * (image_size / 224) ** 2
    forward = 2 * (convs + _CLASSIFIER_MACS)
    return forward * (TRAINING_OVER_FORWARD if training else 1.0)
