"""The report answers the buyer's guide's three LLM-era claims beside the measured figures, on
a run whose probes the simulated H200 planned (so the figures are a GPU's, not this CPU's)."""

import pytest
from helpers import render_md

pytest.importorskip("torch")

from benchbench.core.results import ProbeResult, RunResult  # noqa: E402
from benchbench.engine import simulate  # noqa: E402


def _run(names=("matmul", "transformer", "memory_fit", "inference")):
    env = {"gpus": [{"index": 0, "name": "NVIDIA H200", "memory_total": 141 * 2**30,
                     "torch_index": 0}], "host": {}, "torch": {"cuda_device_count": 1}}
    probes = []
    for name in names:
        budget = {"transformer": 75.0, "matmul": 37.5}.get(name, 60.0)
        sim = simulate.simulate_probe(simulate.H200, name, False, budget)
        probes.append(ProbeResult(name=name, status="ok", resource="gpu_compute",
                                  measurements=sim.measurements,
                                  reason="; ".join(sim.notes) or None))
    return RunResult(tool={"version": "t"}, started_at="", environment=env,
                     config={"device_resolved": "cuda"}, argv=[], probes=probes)


def test_the_report_shows_the_three_claims_beside_the_measurements():
    text = render_md(_run())
    i = text.index("## Fine-tuning, fp8 and serving: the buyer's guide's claims")
    section = text[i:text.index("\n## ", i + 5)]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")][1:4]
    assert [r.split(" | ")[0] for r in rows] == [
        "| LLM fine-tuning needs at least an A100 80GB",
        "| H100's Transformer Engine cuts large-model training time by over 40%",
        "| batch inference is fine on 1-2 T4, L4 or RTX 4090"]
    assert "largest full fine-tune here: 6.7B parameters (7b" in rows[0]
    assert "holds: a 7B model's full fine-tune needs more than 80 GB" in rows[0]
    assert "fp8 (torchao float8 training) saves 13% of the step time" in rows[1]
    assert "this machine serves ResNet50 at" in rows[2] and "T4s at MLPerf's" in rows[2]
    assert "- a 7B model (6.7B) needs" in section and "(derived" in section
    assert "### Memory fit" in section and "measured ÷ estimated" in section
    assert "### Inference" in section and "time to first token" in section


def test_a_run_without_the_workloads_says_why_each_claim_is_unchecked():
    text = render_md(_run(("matmul",)))
    i = text.index("## Fine-tuning, fp8 and serving")
    section = text[i:text.index("\n## ", i + 5)]
    assert section.count("not checked, because") == 3
