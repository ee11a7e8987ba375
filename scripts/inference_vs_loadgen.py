"""Fidelity check: the inference probe's simulated server (its fallback where LoadGen is not
installed) against MLPerf's LoadGen on the same model, image size, precision, batching and p99
bound, in interleaved pairs in one process so both see the same conditions; and the batch
sweep's offline rate against LoadGen's Offline at the same batch.

    python scripts/inference_vs_loadgen.py [--pairs 6] [--budget 20] [--image-size 32]

Each pair runs both methods, in alternating order, each with the same budget; it prints every
pair, then each ratio (fallback ÷ LoadGen) as its median and its spread (min-max). The server
bound is chosen once, from one image's latency as LoadGen's SUT serves it, and held fixed.
Needs torch and mlcommons-loadgen (pip install 'benchbench[inference]').
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchbench.core.sampling import Budget
from benchbench.core.stats import median
from benchbench.machine.environment import torch_facts
from benchbench.probes.api import ProbeContext
from benchbench.workloads.inference import fallback, scenarios
from benchbench.workloads.inference.config import SPEC
from benchbench.workloads.inference.loadgen_sut import LoadGenHarness
from benchbench.workloads.inference.models import TorchModels
from benchbench.workloads.inference.run import ENGINE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=6,
                    help="interleaved pairs, fallback and LoadGen (default 6)")
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds per server search (default 20)")
    ap.add_argument("--image-size", type=int, default=32,
                    help="ResNet50's input, pixels a side (default 32)")
    ap.add_argument("--max-batch", type=int, default=8,
                    help="the server's largest batch (default 8)")
    ap.add_argument("--offline-batch", type=int, default=8,
                    help="the batch of the offline comparison (default 8)")
    args = ap.parse_args()
    models = TorchModels("cpu", args.image_size, False, "small")
    shapes = scenarios.buckets(args.max_batch, args.offline_batch)
    harness = LoadGenHarness(models.library("fp32", scenarios.LIBRARY_SAMPLES, shapes),
                             scenarios.LIBRARY_SAMPLES, None, time.perf_counter)
    bound, source = scenarios.choose_bound(None, "cpu", harness.service_s(1))
    cfg = SPEC.resolve("cpu", False, torch_facts(), {
        "image_size": args.image_size, "max_batch": args.max_batch, "latency_bound_s": bound})
    print(f"ResNet50 fp32 at {args.image_size} px on the CPU, max batch {args.max_batch}, p99 "
          f"bound {bound * 1e3:g} ms ({source}), {args.budget:g} s a server search")
    key = {"precision": "fp32", "image_size": args.image_size, "max_batch": args.max_batch}
    # LoadGen sizes an Offline run by the rate it expects: one batch, timed, says it.
    expected = args.offline_batch / harness.service_s(args.offline_batch)
    ratios: dict[str, list[float]] = {"server": [], "offline": []}
    for i in range(args.pairs):
        got: dict[str, float | None] = {}
        for method in (("fallback", "loadgen") if i % 2 == 0 else ("loadgen", "fallback")):
            ctx = ProbeContext(device="cpu", policy=cfg.repeat_policy(3),
                               budget=Budget(args.budget), facts={})
            if method == "loadgen":
                out = scenarios.serve(ctx, harness, key, bound, "cpu", ENGINE, [])
                short = ProbeContext(device="cpu", policy=ctx.policy, budget=Budget(2.0),
                                     facts={})
                off = scenarios.offline(short, harness, {"precision": "fp32"}, expected,
                                        args.offline_batch, "cpu", ENGINE)
                got["loadgen offline"] = off.value if off.context["valid"] else None
            else:
                out = fallback.serve(ctx, cfg, models, "cpu", "fp32", [], [], "comparison",
                                     ENGINE)
                # The probe's own sweep timing at that batch (ctx.time_op), as run.py's.
                timed = ctx.time_op(models.classify("fp32", args.offline_batch), "cpu", 1,
                                    0.05)
                got["sweep"] = args.offline_batch / median(timed.per_call_s)
            rate = next((m.value for m in out if m.metric == "server_throughput"), None)
            got[f"{method} server"] = rate
        print(f"pair {i + 1}: " + ", ".join(f"{k} {v:,.1f}/s" if v else f"{k} none"
                                              for k, v in got.items()))
        for name, mine, theirs in (("server", "fallback server", "loadgen server"),
                                   ("offline", "sweep", "loadgen offline")):
            if got.get(mine) and got.get(theirs):
                ratios[name].append(got[mine] / got[theirs])  # type: ignore[operator]
    harness.close()
    for name, rs in ratios.items():
        if rs:
            print(f"{name}: fallback ÷ LoadGen median {statistics.median(rs):.2f}, spread "
                  f"{min(rs):.2f}-{max(rs):.2f} over {len(rs)} pairs")
        else:
            print(f"{name}: no pair where both measured a rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
