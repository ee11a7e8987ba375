"""TF32 on and off through probes/meter.py: both of torch's records of the mode agree, so
its legacy reads (which torch.compile's backend makes) report the mode instead of raising."""

import warnings

import pytest

torch = pytest.importorskip("torch")

from benchbench.probes.meter import apply_tf32, tf32_enabled  # noqa: E402


def legacy_reads() -> tuple[str, bool, bool]:
    """The three reads that raise "mix of the legacy and new APIs" when torch's two records
    disagree (pytorch#166387)."""
    return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32)


@pytest.fixture
def restore_tf32():
    yield
    apply_tf32(False)  # the other tests expect true fp32, as a probe leaves it


@pytest.mark.usefixtures("restore_tf32")
def test_tf32_on_and_off_leaves_the_legacy_reads_working_and_right():
    for enabled in (True, False, True, False):
        # the legacy setters' deprecation warning (torch 2.9) is not a worker's to print
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            apply_tf32(enabled)
        assert tf32_enabled() is enabled
        assert legacy_reads() == (("high", True, True) if enabled else ("highest", False, False))
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch 2.9 and later
        apply_tf32(True)
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"
        apply_tf32(False)
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
        assert torch.backends.cudnn.rnn.fp32_precision == "ieee"
        # the CPU's oneDNN matmul is left as torch has it: TF32 is a CUDA mode here
        assert torch.backends.mkldnn.matmul.fp32_precision == "none"


class Tiny(torch.nn.Module):
    """One linear layer whose forward reads the legacy flags while it is traced, as
    torch.compile's own backend does for its cache keys and convolution templates (which of
    them it reads depends on the torch version and the device)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        if (torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
                and torch.backends.cudnn.allow_tf32):
            return y * 2
        return y


@pytest.mark.usefixtures("restore_tf32")
def test_torch_compile_trains_a_step_after_tf32_on_and_off():
    """The transformer's compile=true path, in small: a compiled forward and backward after
    each setting. The model is tiny because inductor compiles C++ for the CPU: about 12 s cold
    on a 2-core VM, about 5 s with its cache warm."""
    compiled = torch.compile(Tiny())
    x = torch.randn(4, 8)
    for enabled in (True, False):
        apply_tf32(enabled)
        out = compiled(x)
        out.sum().backward()
        assert torch.allclose(out, compiled._orig_mod(x))  # the branch eager takes now
