"""Command-line parsing: one sub-command per verb, each handed to commands.py. No logic here.

Exit codes: 0 all probes ok or skipped; 1 some probe failed (results still written); 2 bad
usage or input (one line on stderr); 130 interrupted by SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import sys

from benchbench import __version__, commands
from benchbench.doctor import SCENARIOS
from benchbench.probe_configs import WORKLOADS

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, no usage dump: scripts and CI logs read the last line.
        self.exit(EXIT_USAGE, f"benchbench: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="benchbench", description="Measure what limits deep-learning training on "
                                                "this machine, and write a report.")
    p.add_argument("--version", action="version", version=f"benchbench {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="measure and write a run folder (results.json, report.md)")
    r.add_argument("--out", metavar="DIR",
                   help="new or empty folder for the run (default runs/<UTC time>-<host>/)")
    r.add_argument("--quick", action="store_true",
                   help="small sizes and a shared time budget: a smoke test in about a minute")
    r.add_argument("--only", metavar="A,B", help="run only these probes")
    r.add_argument("--skip", metavar="A,B", help="do not run these probes")
    r.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                   help="where the workload probes run (default auto: cuda when present)")
    r.add_argument("--config", metavar="FILE.toml", help="a TOML file: [run] and [probe] tables")
    r.add_argument("--set", action="append", metavar="PROBE.FIELD=VALUE",
                   help="override one probe config field; repeatable; lists comma-separated; "
                        "sizes in bytes or K/M/G/T (IEC)")
    r.add_argument("--data-dir", metavar="DIR",
                   help="your ImageFolder dataset (class folders of JPEGs); default: a synthetic "
                        "ImageNet-like set generated once into the cache")
    r.add_argument("--storage-path", metavar="DIR",
                   help="folder on the filesystem the storage probe measures (default: the "
                        "data dir's, else --out's)")
    r.add_argument("--label", metavar="TEXT", help="a name for this run in reports and compare")
    r.add_argument("--workload", choices=WORKLOADS,
                   help="the workload the top-level verdict is for (default resnet50)")
    r.add_argument("--repeats", type=int, metavar="N",
                   help="fewest timed samples per measurement (default 5, 3 with --quick)")
    r.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="seconds per probe (default: a weighted share of 210 s, 60 s with "
                        "--quick)")
    r.set_defaults(func=commands.run)

    rep = sub.add_parser("report", help="re-render report.md from a saved results.json")
    rep.add_argument("results", metavar="RESULTS.json", help="a results.json or a run folder")
    rep.add_argument("--out", metavar="DIR", help="where to write (default: beside the results)")
    rep.add_argument("--workload", choices=WORKLOADS,
                     help="the workload the verdict is for (default: the run's, else resnet50)")
    rep.set_defaults(func=commands.report)

    ls = sub.add_parser("list", help="every probe, its resource, and whether it would run here")
    ls.add_argument("--fields", action="store_true", help="also list each probe's config fields")
    ls.set_defaults(func=commands.list_probes)

    e = sub.add_parser("env", help="print the read-only environment snapshot")
    e.add_argument("--json", action="store_true", help="as JSON")
    e.set_defaults(func=commands.env)

    doc = sub.add_parser("doctor", help="read-only configuration checks (RAM, cores, storage, "
                                        "driver, persistence, PCIe, throttling, ECC, network) "
                                        "with fixes to run; exit 1 when one fails")
    doc.add_argument("results", nargs="?", metavar="RESULTS",
                     help="check this saved run (a results.json or run folder) instead of "
                          "this machine now")
    doc.add_argument("--json", action="store_true", help="as JSON")
    doc.add_argument("--scenario", choices=list(SCENARIOS),
                     help="also hold the machine against the buyer's guide's recommended "
                          "configuration for this workload")
    doc.set_defaults(func=commands.doctor)

    sl = sub.add_parser("slurm", help="print an sbatch script that runs `run` on every GPU of "
                                      "N Slurm nodes; submit it with sbatch")
    sl.add_argument("--nodes", type=int, required=True, metavar="N", help="nodes to run on")
    sl.add_argument("--gpus-per-node", type=int, required=True, metavar="G",
                    help="GPUs per node; srun starts one task per GPU")
    sl.add_argument("--partition", metavar="P", help="Slurm partition (default: the site's)")
    sl.add_argument("--time", metavar="HH:MM:SS",
                    help="time limit, HH:MM:SS or D-HH:MM:SS (default 00:30:00)")
    sl.add_argument("--account", metavar="A", help="account to charge (default: the site's)")
    sl.add_argument("--out", metavar="DIR",
                    help="run folder, written by global rank 0 on the first node (default "
                         "runs/slurm-<job id> under the directory sbatch runs in)")
    sl.add_argument("run_args", nargs="*", metavar="-- RUN_ARGS",
                    help="flags for `benchbench run`, after --, e.g. -- --quick --only allreduce")
    # The run parser checks RUN_ARGS now, not after the job has waited in the queue.
    sl.set_defaults(func=commands.slurm, parse_run_args=r.parse_args)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except commands.UsageError as exc:
        print(f"benchbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("benchbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
