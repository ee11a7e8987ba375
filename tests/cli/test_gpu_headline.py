"""scripts/gpu_headline.py: the GPU check's headline table. Each reference comes from the rows
of the GPU that ran (an H100 and an H200 read against their own), it says when a step was
killed, shows the newer probes' figures beside their references, and holds the verdict's
predicted training rate and limit against the ground truth (scripts/ground_truth.py)."""

import dataclasses
import json
import tarfile
from pathlib import Path

import pytest
from helpers import script

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "tests" / "support" / "fixtures" / "results_v1_cpu.json"
H200_RUNS = sorted((ROOT / "docs" / "results").glob("2026-12-04-h200*/run.tar.gz"))




def test_the_headline_says_timed_out_for_a_killed_step(tmp_path):
    headline = script("gpu_headline")
    steps = tmp_path / "steps.tsv"
    steps.write_text("step\texit\tseconds\tlimit\n"
                     "versions\t0\t4\t15\n"
                     "benchbench run --device cuda\t124\t192\t192\n"
                     "bare loops\t1\t30\t55\n")
    from benchbench.core import results

    lines = headline.table(results.load(FIXTURE), headline.read_steps(str(steps)))
    text = "\n".join(lines)
    assert "| benchbench run --device cuda | timed out at its 192 s limit | 192 | 192 |" in text
    assert "| bare loops | exit 1 | 30 | 55 |" in text and "| versions | ok | 4 | 15 |" in text
    assert "benchbench run: timed out after 192 s (its limit 192 s)" in text
    assert "yes" not in text.split("benchbench run: ")[1].splitlines()[0]
    assert "steps in all: 226 s" in text


def _newer_probes_run(server=True, fp8=True, served=6000.0, batch_s=None):
    """A GPU run of the newer probes' figures: memory_fit (both modes), inference (the server
    rate, or its note when no rate kept the bound; `batch_s` its own batch times) and fp8
    beside bf16."""
    from synthetic_runs import environment, gpu_record, measurement

    from benchbench.core.results import ProbeResult, RunResult

    def largest(mode, params, rung, peak, bound):
        return measurement("largest_model", {"mode": mode, "seq_len": 2048,
                                             "precision": "amp_bf16"}, [params], "count", "max",
                           {"rung": rung, "peak_B": peak, "bounded_by": bound})

    def ratio(mode, rung, value):
        return measurement("estimate_ratio", {"mode": mode, "rung": rung, "seq_len": 2048,
                                              "precision": "amp_bf16"}, [value], "ratio")

    memory_fit = [largest("plain", 2.7e9, "2.7b", 120e9, "memory"), ratio("plain", "2.7b", 1.08),
                  largest("checkpointing", 6.7e9, "7b", 130e9, "time"),
                  ratio("checkpointing", "7b", 1.41), ratio("plain", "1.3b", 0.5)]
    key = {"precision": "bf16", "image_size": 224, "max_batch": 64, "latency_bound_s": 0.015}
    inference = [measurement("peak_offline_throughput", {"precision": "bf16"}, [9000.0],
                             "samples/s", "max"),
                 measurement("tpot", {"preset": "gpt2-124m", "precision": "bf16", "batch": 1},
                             [0.035], "s"),
                 measurement("tpot", {"preset": "gpt2-124m", "precision": "bf16", "batch": 8},
                             [0.004], "s")]
    if server:
        inference.append(measurement("server_throughput", key, [served], "samples/s", "max",
                                     {"stopped_by": "done",
                                      **({"batch_s": batch_s} if batch_s else {})}))
    matmul = [measurement("peak_flops", {"device": "cuda:0", "dtype": "bf16"}, [7.9e14],
                          "FLOP/s", "max")]
    transformer = [measurement("throughput", {"device": "cuda:0", "precision": "amp_bf16",
                                              "preset": "gpt2-124m"}, [4.0e5], "tokens/s")]
    if fp8:
        matmul.append(measurement("peak_flops", {"device": "cuda:0", "dtype": "fp8"},
                                  [1.4e15], "FLOP/s", "max"))
        transformer.append(measurement("throughput", {"device": "cuda:0", "precision": "fp8",
                                                      "preset": "gpt2-124m"}, [3.6e5],
                                       "tokens/s"))
    # A note that holds "; " itself, and the next note after it.
    no_server = None if server else ("server: no rate tried kept p99 within 15 ms; at 100 "
                                     "requests/s the p99 was 40 ms; generation skipped, "
                                     "because the budget ran out")
    no_fp8 = None if fp8 else "fp8 skipped, because torchao is not installed"
    no_fp8_mm = None if fp8 else ("fp8 n=4096 on cuda:0 skipped, because fp8 needs compute "
                                  "capability 8.9")
    probes = [ProbeResult(name=name, status="ok", resource=resource, reason=reason,
                          measurements=ms)
              for name, resource, reason, ms in (
                  ("matmul", "gpu_compute", no_fp8_mm, matmul),
                  ("transformer", "gpu_compute", no_fp8, transformer),
                  ("memory_fit", "gpu_memory", None, memory_fit),
                  ("inference", "gpu_compute", no_server, inference))]
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"},
                     started_at="2026-12-01T00:00:00+00:00",
                     environment=environment(gpus=[gpu_record("box", 0)]),
                     config={"device_resolved": "cuda", "quick": True}, argv=[], probes=probes)


def _rows(lines):
    return {ln.split(" | ")[0].lstrip("| "): ln.strip("|").split(" | ")[1:]
            for ln in lines if ln.startswith("| ")}


def test_the_headline_shows_the_newer_probes_figures_beside_their_references():
    headline = script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run()))
    measured, ref, meets = rows["memory_fit largest model (plain)"]
    assert measured == "2.70 B parameters (2.7b, peak 120 GB), bounded by memory"
    assert "bounded by memory" in ref and meets.strip() == "yes"
    # Stopped by time, not memory: a lower bound, which the reference does not accept.
    assert rows["memory_fit largest model (checkpointing)"][2].strip() == "NO"
    # The ratio of the largest model's own rung, not of another rung in the same mode.
    assert rows["memory_fit measured ÷ estimated (plain, 2.7b)"][0] == "1.08"
    assert rows["memory_fit measured ÷ estimated (plain, 2.7b)"][2].strip() == "yes"
    assert "near 1.0-1.2" in rows["memory_fit measured ÷ estimated (plain, 2.7b)"][1]
    assert rows["memory_fit measured ÷ estimated (checkpointing, 7b)"][2].strip() == "NO"
    measured, ref, meets = rows["inference server rate"]
    # A run that does not say what drove its server (one from before LoadGen): the
    # simulated server, which it was.
    assert measured == ("6,000 img/s (bf16, p99 ≤ 15 ms; search stopped by done; 0.67x the "
                        "offline peak; simulated server)")
    assert "largest batch" in ref and meets.strip() == "yes"
    # The H100's own published figures (mamf-finder's best shapes): 1402.6 ÷ 792.1-794.5.
    measured, ref, meets = rows["matmul fp8 ÷ bf16"]
    assert measured == "1.77x" and ref.startswith("1.77x published for the H100 SXM (Stas ")
    assert meets.strip() == "yes"
    measured, ref, meets = rows["transformer fp8 ÷ amp_bf16"]
    assert measured == "0.90x" and "pytorch/ao#685" in ref and meets.strip() == "yes"
    # Batch 1's time per output token, not batch 8's; 35 ms is the H200 runs' cuDNN figure.
    measured, ref, meets = rows["GPT-2 124M decode TPOT, bf16, batch 1"]
    assert measured == "35.0 ms" and ref.startswith("≤ 10 ms") and meets.strip() == "NO"


def test_a_server_rate_over_a_short_sweeps_peak_is_held_against_its_own_largest_batch():
    """A quick run's offline sweep can stop at batch 16 (5,355 img/s on an H200) while the
    server batches up to 64, which it timed for itself: its ceiling is that batch's rate."""
    headline = script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run(served=12000.0,
                                                  batch_s={"1": 0.003, "64": 0.005})))
    assert rows["inference server rate"][2].strip() == "yes"  # 12,000 ≤ 64 / 5 ms = 12,800
    rows = _rows(headline.table(_newer_probes_run(served=12000.0,
                                                  batch_s={"1": 0.003, "64": 0.008})))
    assert rows["inference server rate"][2].strip() == "NO"  # over 8,000 and over 9,000
    rows = _rows(headline.table(_newer_probes_run(served=12000.0)))
    assert rows["inference server rate"][2].strip() == "NO"  # no batch times: the sweep's


def test_a_missing_newer_figure_reads_not_measured_with_the_probes_reason():
    headline = script("gpu_headline")
    rows = _rows(headline.table(_newer_probes_run(server=False, fp8=False)))
    assert rows["inference server rate"][0] == ("not measured: server: no rate tried kept p99 "
                                                "within 15 ms; at 100 requests/s the p99 was "
                                                "40 ms")
    assert rows["matmul fp8 ÷ bf16"][0] == ("not measured: fp8 n=4096 on cuda:0 skipped, "
                                            "because fp8 needs compute capability 8.9")
    assert rows["transformer fp8 ÷ amp_bf16"][0] == ("not measured: fp8 skipped, because "
                                                     "torchao is not installed")
    assert all(rows[f][2].strip() == "—" for f in ("inference server rate", "matmul fp8 ÷ bf16",
                                                   "transformer fp8 ÷ amp_bf16"))
    from benchbench.core import results

    rows = _rows(headline.table(results.load(FIXTURE)))
    assert rows["memory_fit largest model"][0] == ("not measured: the memory_fit probe did not "
                                                   "run")


def test_the_matmul_clock_rows_say_whether_fp16_lost_per_cycle_or_in_its_clock():
    """The third H200 read fp16 9% under bf16 at its power limit; with each sample's clock the
    headline says which: per GHz of SM clock they agree (the clock), or not (the kernels)."""
    from synthetic_runs import clocked_matmul_run as matmul_run

    headline = script("gpu_headline")
    run = matmul_run()
    run.probes[0].measurements.append(dataclasses.replace(
        run.probes[0].measurements[2], key={"device": "cuda:0", "dtype": "fp16"}))
    rows = _rows(headline.table(run))
    assert rows["matmul bf16 SM clock"][0] == "1,482 MHz (75% of 1,980), 488 TFLOP/s per GHz"
    assert rows["matmul fp16 SM clock"][0].startswith("1,350 MHz (68% of 1,980)")
    assert rows["matmul fp16 ÷ bf16 per GHz of SM clock"][0] == "1.000"
    assert rows["matmul fp16 ÷ bf16 per GHz of SM clock"][2].strip() == "yes"
    from benchbench.core import results

    rows = _rows(headline.table(results.load(FIXTURE)))  # a CPU run
    assert rows["matmul SM clock"][0] == "not measured: the matmul measured no GPU"
    for x in run.probes[0].measurements:
        x.context.pop("sm_clock_Hz", None)
    rows = _rows(headline.table(run))
    assert rows["matmul SM clock"][0].startswith("not measured: its samples carry no SM clock")


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    """The third H200's quick run of 2026-12-04, as the box packed it (run.tar.gz)."""
    from benchbench.core import results

    packed = ROOT / "docs" / "results" / "2026-12-04-h200-run3" / "run.tar.gz"
    dest = tmp_path_factory.mktemp("h200")
    with tarfile.open(packed) as tar:
        (dest / "results.json").write_bytes(tar.extractfile("run/results.json").read())
    return results.load(dest / "results.json")


H100 = "NVIDIA H100 80GB HBM3"


def _as_h100(run, copy_Bps=3.0e12):
    """The H200 run as a healthy H100 SXM would read it: the GPU's name everywhere the run
    records it, and its memory copy at about 3.0 TB/s read+write (3.35 datasheet)."""
    from benchbench.core.results import RunResult

    data = json.loads(json.dumps(run.to_dict()).replace("NVIDIA H200", H100))
    out = RunResult.from_dict(data)
    ms = out.probe("memory_bandwidth").measurements
    i = next(i for i, m in enumerate(ms)
             if m.metric == "copy_bandwidth" and m.key.get("memory") == "cuda:0")
    ms[i] = dataclasses.replace(ms[i], value=copy_Bps)
    return out


def test_each_reference_comes_from_the_rows_of_the_gpu_that_ran(h200):
    """An H200 and an H100 each against their own datasheet and published rows: a healthy H100
    SXM's 3.0 TB/s memory copy meets its reference (it read NO against the H200's 4.1 TB/s),
    and no unsourced bar (ResNet50's "~2,800 img/s") stands anywhere."""
    headline = script("gpu_headline")
    lines = headline.table(h200)
    assert lines[0].startswith("GPU: NVIDIA H200; references from its own rows: the H200 SXM")
    rows = _rows(lines)
    measured, ref, meets = rows["GPU memory copy"]
    assert measured == "4.15 TB/s" and meets.strip() == "—"
    assert ref == ("no published reference for this GPU (NVIDIA H200); ceiling: H200 SXM memory, "
                   "4.80 TB/s, 87% of it")
    measured, ref, meets = rows["matmul bf16"]
    assert "of the published 790 TFLOP/s" in ref and "H200 SXM, bf16" in ref
    # 674 sustained (5 s, the stability probe) is 85.3% of the H200's published figure: at the
    # line, not plainly healthy; its burst peak of 724 stands beside it, named so
    assert meets.strip() == "borderline" and measured.startswith("674 TFLOP/s (sustained")
    assert "burst peak 724 TFLOP/s" in measured
    assert rows["ResNet50 amp_bf16"][1:] == ["no published reference for this GPU (NVIDIA H200, "
                                             "amp_bf16)", "— "]
    assert rows["matmul fp32 peak (TF32 off)"][1].startswith("≤ 67.0 TFLOP/s (H200 SXM dense")
    assert "H200 SXM's dense bf16 peak" in rows["GPT MFU amp_bf16"][1]
    text = "\n".join(lines)
    assert "2,800" not in text and "4.1 TB/s" not in text and "H100/H200" not in text

    lines = headline.table(_as_h100(h200))
    assert lines[0].startswith(f"GPU: {H100}; references from its own rows: the H100 SXM")
    rows = _rows(lines)
    measured, ref, meets = rows["GPU memory copy"]
    assert measured == "3.00 TB/s" and meets.strip() == "yes"
    assert "of the published 2.47–2.51 TB/s" in ref and "H100 SXM" in ref
    assert ref.endswith("ceiling: H100 SXM memory, 3.35 TB/s, 90% of it")
    assert rows["matmul fp8 ÷ bf16"][1].startswith("1.77x published for the H100 SXM")
    assert "H100 SXM's dense bf16 peak" in rows["GPT MFU amp_bf16"][1]
    # amp_bf16 has no published H100 figure; the amp_fp16 one is another precision.
    assert rows["ResNet50 amp_bf16"][1].startswith(
        "not compared: amp_bf16 here, amp_fp16 in the closest published figure (2,616–2,791 "
        "img/s: Lambda, H100 SXM")
    references = [r[1] for r in rows.values()]
    assert not any("H200" in r for r in references), references
    # A slow H100 reads NO against its own published copy (under 85% of 2.47 TB/s).
    rows = _rows(headline.table(_as_h100(h200, copy_Bps=1.9e12)))
    assert rows["GPU memory copy"][2].strip() == "NO"
    # Over the datasheet's bandwidth: a timing error, NO with or without a published figure.
    rows = _rows(headline.table(_as_h100(h200, copy_Bps=3.6e12)))
    assert rows["GPU memory copy"][2].strip() == "NO"


def _truth(rate, **extra):
    return {"ground_truth": 1, "status": "ok", "device": "cuda:0", "precision": "amp_bf16",
            "batch": 256, "image_size": 224, "workers": 16, "rate": rate, "seconds": 60.2,
            "window_rates": [rate * 0.98, rate * 1.02], **extra}


def test_the_headline_holds_the_verdicts_rate_and_limit_against_the_ground_truth(h200):
    """The verdict (computed again from the run) predicts a rate and a limit; a minute of real
    training measures them: within 10% and the same limit reads yes, else NO."""
    from benchbench.analysis import verdict

    headline, truths = script("gpu_headline"), script("_headline_truth")
    wv = verdict.verdict(h200, "resnet50").per_workload["resnet50"]
    predicted = wv.capacity(wv.limiting_resource)
    name = "verdict against the ground truth (ResNet50, real data, steady)"
    rows = _rows(headline.table(h200, truth=_truth(predicted * 0.95)))
    measured, ref, meets = rows[name]
    assert meets.strip() == "yes", measured
    assert measured.startswith(f"trained {predicted * 0.95:,.0f} img/s over 60 s (2 windows")
    assert "the 4,694 img/s of resnet50 throughput on synthetic data" in measured
    assert f"the verdict: {predicted:,.0f} img/s (+5%)" in measured
    assert ref == "the verdict's ResNet50 rate within 10% of the measured one, and the same limit"
    assert rows_meets(headline, h200, _truth(predicted * 0.8)) == "NO"  # 25% off
    # The limits: under 0.9x the synthetic-data rate the loader held the GPU back.
    assert truths.judge(3300, 4694, "gpu_compute", 3318, True) == ("cpu_dataloading",
                                                                    3318 / 3300 - 1, False)
    assert truths.judge(3300, 4694, "cpu_dataloading", 3318, True)[2]
    assert truths.judge(4500, 4694, "gpu_compute", 4694, True)[::2] == ("gpu_compute", True)
    assert truths.judge(40, 42, "cpu_compute", 42, False)[::2] == ("cpu_compute", True)
    # Not measured: what the ground truth said, or that it did not run.
    skipped = {"status": "skipped", "reason": "skipped, because after the warm-up 10 s of its "
                                              "100 s budget were left"}
    assert _rows(headline.table(h200, truth=skipped))[name][0] == \
        f"not measured: {skipped['reason']}"
    missing = truths.read_truth("/nonexistent/ground-truth.json")
    assert _rows(headline.table(h200, truth=missing))[name][0].startswith(
        "not measured: /nonexistent/ground-truth.json was not written: the ground truth did "
        "not run")
    assert name not in _rows(headline.table(h200))  # no --ground-truth: no row


def rows_meets(headline, run, truth):
    rows = _rows(headline.table(run, truth=truth))
    return rows["verdict against the ground truth (ResNet50, real data, steady)"][2].strip()


def test_the_headline_reads_the_ground_truth_file_it_is_given(tmp_path, capsys):
    headline = script("gpu_headline")
    path = tmp_path / "ground-truth.json"
    path.write_text(json.dumps(_truth(3300.0)))
    packed = ROOT / "docs" / "results" / "2026-12-04-h200-run3" / "run.tar.gz"
    with tarfile.open(packed) as tar:
        (tmp_path / "results.json").write_bytes(tar.extractfile("run/results.json").read())
    assert headline.main([str(tmp_path), "--ground-truth", str(path)]) == 0
    out = capsys.readouterr().out
    assert "| verdict against the ground truth (ResNet50, real data, steady) | trained 3,300 " \
           "img/s over 60 s" in out
