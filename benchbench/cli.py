"""Command-line parsing only: one sub-command per verb, each handed to its module in commands/,
imported when that verb runs.

Exit codes: 0 all probes ok or skipped; 1 some probe failed (results still written); 2 bad
usage or input (one line on stderr); 3 compare found a regression, history a latest segment
that regressed, fleet an outlier below its group; 130 interrupted by SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable

from benchbench import __version__
from benchbench.analysis.change_points import AT_CHANGE, DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT
from benchbench.analysis.config import WORKLOADS
from benchbench.commands.common import UsageError
from benchbench.core.interruption import FLAG
from benchbench.core.results import SaveError
from benchbench.doctor.checks import SCENARIOS
from benchbench.engine import sandbox

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
                   help="small sizes and a shared time budget: a smoke test in under a minute")
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
    r.add_argument("--rounds", type=int, metavar="N",
                   help="run each repeatable probe in N rounds spread over the run, each in a "
                        "fresh process, so that compare can tell a change from this machine's "
                        "run-to-run noise (default 3 on a GPU, 2 with --quick or on a CPU)")
    r.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="seconds per probe (default: a weighted share of 233 s on a CPU, 806 s "
                        "on a GPU; 40 s and 202 s with --quick)")
    r.add_argument("--price-per-hour", type=float, metavar="USD",
                   help="what this machine costs per hour in US dollars (its cloud price, or "
                        "your own); stored with the run so compare can cost it")
    r.add_argument("--verbose", action="store_true",
                   help="also print where the run's wall time went (start-up, checks, each "
                        "phase; results.json keeps it under \"timings\" either way)")
    r.set_defaults(command="run")

    rep = sub.add_parser("report", help="re-render report.md from a saved results.json")
    rep.add_argument("results", metavar="RESULTS.json", help="a results.json or a run folder")
    rep.add_argument("--out", metavar="DIR", help="where to write (default: beside the results)")
    rep.add_argument("--workload", choices=WORKLOADS,
                     help="the workload the verdict is for (default: the run's, else resnet50)")
    rep.set_defaults(command="report")

    ls = sub.add_parser("list", help="every probe, its resource, and whether it would run here")
    ls.add_argument("--fields", action="store_true", help="also list each probe's config fields")
    ls.set_defaults(command="env_list:list_probes")

    e = sub.add_parser("env", help="print the read-only environment snapshot")
    e.add_argument("--json", action="store_true", help="as JSON")
    e.set_defaults(command="env_list:env")

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
    doc.set_defaults(command="doctor")

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
    sl.set_defaults(command="slurm", parse_run_args=r.parse_args)

    c = sub.add_parser(
        "compare", help="runs side by side: regressions against a baseline (exit 3), verdicts, "
                        "environment differences, cost",
        description="Compare saved runs. Each RUN (a results.json or run folder) is one side; "
                    "a quoted glob matching several runs, or a folder of run folders (runs/), "
                    "is one side that pools their samples. "
                    "The baseline is the --baseline runs pooled, else the first RUN. Prints "
                    "Markdown; writes no file unless --out is given. Exit 0 no regression, 3 at "
                    "least one regression, 2 bad input.")
    c.add_argument("runs", nargs="*", metavar="RUN",
                   help="a results.json, a run folder, or a quoted glob or folder of run "
                        "folders (one pooled side)")
    c.add_argument("--baseline", action="append", metavar="RUN",
                   help="the baseline; repeatable or a glob: all of them are pooled into one side "
                        "(default: the first RUN)")
    c.add_argument("--out", metavar="DIR",
                   help="also write compare.md, compare.html and compare.csv into this new or "
                        "empty folder (default: no files, Markdown on stdout only)")
    c.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="a significant change worse than this percentage is a regression "
                        "(default 5)")
    c.add_argument("--alpha", type=float, default=0.01, metavar="A",
                   help="significance level of the test on the raw samples (default 0.01)")
    c.add_argument("--workload", choices=WORKLOADS,
                   help="the workload the verdicts are for (default: each run's, else resnet50)")
    c.add_argument("--price", action="append", metavar="LABEL=USD_PER_HOUR",
                   help="what a side costs per hour; repeatable (default: the price stored by "
                        "run --price-per-hour)")
    c.add_argument("--tokens", type=int, metavar="N",
                   help="tokens in the transformer reference job (default 10,000,000,000)")
    c.add_argument("--buy", action="append", metavar="LABEL=PURCHASE_USD",
                   help="buy vs rent: the price of buying the machine of this side")
    c.add_argument("--power-watts", type=float, metavar="W",
                   help="the bought machine's power under load (default: estimated from its GPUs' "
                        "power limits and its cores)")
    c.add_argument("--usd-per-kwh", type=float, default=0.15, metavar="P",
                   help="electricity price (default 0.15)")
    c.add_argument("--years", type=float, default=3.0, metavar="Y",
                   help="years to write the purchase off over (default 3)")
    c.add_argument("--ops-usd-per-year", type=float, default=0.0, metavar="X",
                   help="yearly running cost besides power: colocation, support (default 0)")
    c.add_argument("--utilization", type=float, default=0.7, metavar="U",
                   help="fraction of hours the bought machine does useful work (default 0.7)")
    c.add_argument("--junit", metavar="FILE",
                   help="also write JUnit XML: one test case per measurement and side, a "
                        "regression failing its case")
    _include_interrupted(c)
    c.set_defaults(command="compare")

    h = _runs_verb(
        sub, "history", "history.md, history.html and history.csv",
        "one test case per series, a series that regressed failing its case",
        help="one machine's runs in order: change points per headline figure and what changed "
             "around them (exit 3: the latest level is worse than the best, or --baseline's, "
             "by more than --threshold)",
        description="The runs of one machine (paths, run folders, folders of them such as "
                    "runs/, or quoted globs), ordered by "
                    "start time. Each headline figure becomes a series, and all of them "
                    "one more (the machine as a whole, weighted by their noise); single runs "
                    "far off "
                    "their neighbours are outlier runs; change points are found by binary "
                    "segmentation and PELT and kept when the best-split t-test holds; each "
                    "is attributed to what changed in the environment "
                    "between the runs around it. Runs of another machine are refused (or set "
                    "apart with --machine). Prints Markdown; writes no file unless --out is "
                    "given. Exit 0, 3 when the latest level is worse than the best segment "
                    "(or --baseline) by more than --threshold, 2 bad input.",
        default=" (default: runs/, where run writes them)")
    h.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                   help="the latest level worse than the reference (the best segment, or "
                        "--baseline's) by more than this percentage is a regression "
                        f"(default {DEFAULT_THRESHOLD_PCT:g})")
    h.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, metavar="A",
                   help="significance a change point needs: the p of the best split of its "
                        "segments, paid for choosing it (default "
                        f"{DEFAULT_ALPHA:g}); at a recorded environment change (a driver, a "
                        f"kernel), Student's t there, the series' changes sharing {AT_CHANGE} A")
    h.add_argument("--baseline", metavar="RUN",
                   help="hold the latest level against this run's segment instead of the "
                        "best one: its number in the history, or its results.json or folder")
    h.add_argument("--window", type=int, metavar="N",
                   help="the reference is the best segment among the last N runs (default: "
                        "all the runs given)")
    h.add_argument("--machine", metavar="NAME",
                   help="the machine (host name or DMI serial) whose history this is, when "
                        "the runs are of several; the others are set apart and listed")

    f = _runs_verb(
        sub, "fleet", "fleet.md, fleet.html and fleet.csv",
        "one test case per measurement and group, an outlier below the group failing its case",
        help="many nodes, one run each: outlier nodes and GPUs against their hardware group, "
             "with evidence (exit 3: one is below its group)",
        description="Nodes (runs, run folders, folders of them, quoted globs, or the nodes of "
                    "one multi-node "
                    "run) grouped by GPU model and count and CPU model; each headline figure "
                    "held against the rest of its group (and, with --before, each node's "
                    "change since its own earlier run against the others' changes), the bar "
                    "paid for every test the fleet makes; each outlier with what its "
                    "own run shows that the group's median node (or its earlier run) does "
                    "not. Several runs of one machine among the nodes: the latest is the "
                    "node, and the run before it its earlier run, as with --before. Prints "
                    "Markdown; "
                    "writes no file unless --out is given. Exit 0, 3 when an outlier is "
                    "below its group (or a node's change since its earlier run below the "
                    "others'), "
                    "2 bad input.")
    f.add_argument("--alpha", type=float, default=0.01, metavar="A",
                   help="the chance that a healthy fleet shows any low outlier, shared over "
                        "every node, GPU and measurement (default 0.01)")
    f.add_argument("--allow-same-machine", action="store_true",
                   help="count each run of one machine as a node (by default the latest is "
                        "the node and the one before it its earlier run; two of one start "
                        "time are refused)")
    f.add_argument("--before", action="append", default=[], metavar="RUN",
                   help="an earlier run of the nodes (a results.json, a run folder, a folder of "
                        "them, or a quoted glob; repeat for more): each node's change since its "
                        "own is held against the other nodes' changes too, which sees a node "
                        "that got slower where its level alone hides in the group's spread")

    x = sub.add_parser("export", help="write a run's headline figures for monitoring: a "
                                      "node_exporter textfile")
    x.add_argument("run", metavar="RUN", help="a results.json or a run folder")
    x.add_argument("--openmetrics", required=True, metavar="FILE",
                   help="the textfile to write (Prometheus text format; node_exporter's "
                        "textfile collector reads *.prom), replaced atomically")
    _include_interrupted(x)
    x.set_defaults(command="export")
    return p


def _runs_verb(sub: argparse._SubParsersAction,  # type: ignore[type-arg]
               verb: str, files: str, cases: str, help: str, description: str,
               default: str = "") -> argparse.ArgumentParser:
    """A verb over many runs (history, fleet): the runs, --out for its files, --junit."""
    v: argparse.ArgumentParser = sub.add_parser(verb, help=help, description=description)
    v.add_argument("runs", nargs="*", metavar="RUN",
                   help="a results.json, a run folder, a folder of run folders (runs/: those "
                        "directly inside it), or a quoted glob of them" + default)
    v.add_argument("--out", metavar="DIR",
                   help=f"also write {files} into this new or empty folder")
    v.add_argument("--junit", metavar="FILE", help=f"also write JUnit XML: {cases}")
    _include_interrupted(v)
    v.set_defaults(command=verb)
    return v


def _include_interrupted(verb: argparse.ArgumentParser) -> None:
    """The flag of the verbs over saved runs (compare, history, fleet, export) that takes a run
    a signal stopped; without it such a run is refused."""
    verb.add_argument(FLAG, action="store_true",
                      help="take runs that SIGINT or SIGTERM stopped before their plan was "
                           "done (refused by default: their missing probes would read as a "
                           "change of the machine); the report names them")


def _since_process_start() -> float | None:
    """Seconds since this process started: the interpreter and the imports before main()."""
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # no /proc, or psutil missing: not worth failing a run over
        return None


def _verb(command: str) -> Callable[[argparse.Namespace], int]:
    """'run' -> commands/run.py's main; 'env_list:env' -> commands/env_list.py's env."""
    module, _, function = command.partition(":")
    return getattr(importlib.import_module(f"benchbench.commands.{module}"), function or "main")


def main(argv: list[str] | None = None) -> int:
    started = _since_process_start()
    sandbox.contain_caches()  # first: before any verb imports matplotlib, torch or DALI
    args = build_parser().parse_args(argv)
    args.started = started
    try:
        return int(_verb(args.command)(args))
    except UsageError as exc:
        print(f"benchbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SaveError as exc:  # e.g. the disk filled up while the run went on
        print(f"benchbench: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("benchbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
