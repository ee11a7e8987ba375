"""Hand-built runs for the verdict's tests: a GPU box whose every capacity a test sets."""

import dataclasses

from benchbench.core.results import Measurement, ProbeResult, RunResult

GiB = 2**30
ROUNDS = {"timed_rounds": 5, "steps": 80, "steps_per_round": 16, "judged_from_round": 3}


def m(metric, key, value, unit, context=None, statistic="median"):
    return Measurement(
        metric=metric,
        key=key,
        value=value,
        unit=unit,
        statistic=statistic,
        samples=[value],
        higher_is_better=True,
        context=context or {},
    )


def probe(name, *ms, status="ok", reason=None, resource="gpu_compute", params=None):
    return ProbeResult(
        name=name,
        status=status,
        resource=resource,
        reason=reason,
        measurements=list(ms),
        params=params or {},
    )


def gpu_run(compute=2500.0, loader=6000.0, cold_files=20000.0, rand_Bps=5e9, h2d=50e9,
            busbw=None, gpus=1, ram=1024 * GiB, pipeline_au=None, extra=(), overrides=None,
            skip=(), wait_s=None):
    env = {"host": {"memory_available": ram, "memory_total": ram, "cores_usable": 32},
           "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total": 80 * GiB}
                    for i in range(gpus)]}
    key = {"device": "cuda:0", "precision": "amp_bf16", "image_size": 224, "batch_size": 256}
    probes = {
        "resnet50": probe("resnet50", m("throughput", key, compute, "samples/s",
                                        {"batch": 256, "oom_backoff": []}),
                          m("peak_memory", key, 30 * GiB, "B", {"batch": 256})),
        "transformer": probe("transformer", m(
            "throughput", {"device": "cuda:0", "precision": "amp_bf16", "preset": "gpt2-124m",
                           "seq_len": 1024, "batch_size": 16}, 400000.0, "tokens/s",
            {"batch": 16, "n_params": 124_000_000})),
        "dataloader": probe("dataloader",
                            m("throughput", {"loader": "torchvision", "workers": 16}, loader,
                              "samples/s"),
                            m("throughput_per_core", {"loader": "torchvision", "workers": 16},
                              loader / 16, "samples/s"),
                            m("best_throughput", {"batch_size": 64}, loader, "samples/s",
                              {"loader": "torchvision", "workers": 16}, statistic="max"),
                            resource="cpu_dataloading"),
        "storage": probe("storage",
                         m("dataset_read_rate", {"access": "cold"}, cold_files, "files/s"),
                         m("read_bandwidth", {"job": "rand128k", "iodepth": 32, "numjobs": 4},
                           rand_Bps, "B/s"),
                         m("read_bandwidth", {"job": "seq1m", "iodepth": 32, "numjobs": 1},
                           rand_Bps * 2, "B/s"), resource="storage"),
        "host_device_copy": probe("host_device_copy", m(
            "peak_bandwidth", {"device": "cuda:0", "direction": "h2d", "memory": "pinned"},
            h2d, "B/s", statistic="max"), resource="host_device_link"),
        "memory_bandwidth": probe("memory_bandwidth", m(
            "copy_bandwidth", {"memory": "host", "size_bytes": GiB}, 100e9, "B/s")),
    }
    if busbw is not None:
        probes["allreduce"] = probe("allreduce", m(
            "peak_busbw", {"backend": "nccl", "world_size": gpus, "nodes": 1}, busbw, "B/s",
            statistic="max"), resource="interconnect", params={"world_size": gpus})
    if pipeline_au is not None:
        pk = {**key, "loader": "torchvision", "workers": 16}
        timing = [] if wait_s is None else [m("data_wait", pk, wait_s, "s"),
                                            m("compute_time", pk, 0.1, "s")]
        # Five timed rounds of the 16 workers, a sample per round, as the probe records them.
        total = dataclasses.replace(
            m("total_throughput", pk, compute * pipeline_au, "samples/s", dict(ROUNDS),
              statistic="total_over_time"),
            samples=[compute * pipeline_au] * ROUNDS["timed_rounds"])
        probes["pipeline"] = probe("pipeline", total,
                                   m("compute_throughput", pk, compute, "samples/s"),
                                   *timing, resource="cpu_dataloading")
    for name in skip:
        probes[name] = probe(name, status="skipped", reason="fio is not installed")
    run = RunResult(tool={"name": "benchbench", "version": "t"}, label="t",
                    started_at="2026-11-30T00:00:00+00:00", environment=env,
                    config={"device_resolved": "cuda", "overrides": overrides or {}},
                    argv=[], probes=[*probes.values(), *extra])
    return run
