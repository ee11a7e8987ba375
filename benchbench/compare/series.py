"""The headline figures of one run, each with its values per round: what `history` follows
over a machine's runs, `fleet` holds against the other nodes, and `export` writes out.

They are compare's headline measurements (align.HEADLINE) less the two that describe the
input pipeline rather than the machine's parts (pipeline total_throughput, the dataset's cold
read rate), with storage kept to its sequential 1 MiB read. Every device keeps its own figure;
the first (cpu or cuda:0) is the one a report shows first. A figure is matched across runs by
its probe, metric and key without the incidental fields (sides.match_key), as compare does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.analysis import clocks
from benchbench.compare.align import HEADLINE, headline_name, side_value
from benchbench.compare.sides import match_key
from benchbench.core.results import Measurement, RunResult
from benchbench.core.rounds import round_values

LEFT_OUT = frozenset({("pipeline", "total_throughput"), ("storage", "dataset_read_rate")})
STORAGE_JOB = "seq1m"  # the "storage seq read": fio's sequential 1 MiB job
FIRST_DEVICES = frozenset({"cpu", "cuda:0"})

Key = tuple[Any, ...]  # sides.match_key: (probe, metric, ((field, value), ...))


@dataclass(frozen=True)
class Figure:
    """One headline figure of one run (or one node of a multi-node run)."""

    probe: str
    metric: str
    key: Key
    unit: str
    higher_is_better: bool
    rounds: tuple[float, ...]  # the value of each round (rounds.round_values)
    value: float  # the run's figure: the median of its rounds; a peak's best round
    # (the SM clock its samples ran at, the rate per GHz of it), where they carry their clock;
    # a peak's, its best size's (analysis/clocks.py)
    clock: tuple[float, float] | None = None

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.key[2])

    @property
    def device(self) -> str | None:
        d = self.fields.get("device")
        return None if d is None else str(d)

    @property
    def gpu_device(self) -> str | None:
        """The GPU it was measured on (a cuda:N): its device, or the memory a copy ran in."""
        d = self.device or str(self.fields.get("memory") or "")
        return d if d.startswith("cuda:") else None

    @property
    def first_device(self) -> bool:
        return self.device is None or self.device in FIRST_DEVICES

    @property
    def name(self) -> str:
        """'matmul peak bf16', with the device where it is not the first."""
        base = name_of(self.key)
        return base if self.first_device else f"{base} ({self.device})"


def name_of(key: Key) -> str:
    """A figure's short name from its key ('matmul peak bf16'), without its device."""
    return headline_name(key[0], key[1], dict(key[2])) or f"{key[0]} {key[1]}"


def picked(probe: str, m: Measurement) -> bool:
    if (probe, m.metric) not in HEADLINE or (probe, m.metric) in LEFT_OUT:
        return False
    return probe != "storage" or m.key.get("job") == STORAGE_JOB


def figures(run: RunResult) -> list[Figure]:
    """The run's headline figures, in the order its probes list them."""
    out = []
    for p in run.probes:
        if p.status != "ok":
            continue
        for m in p.measurements:
            if picked(p.name, m):
                out.append(Figure(p.name, m.metric, match_key(p.name, m), m.unit,
                                  m.higher_is_better, tuple(round_values(m)),
                                  side_value([m]), clocks.pooled([clocks.behind(p, m)])))
    return out


def unique_names(named: dict[Key, str]) -> dict[Key, str]:
    """The names, with the key fields that tell two apart added where two share one (a batch
    halved on one run's out-of-memory makes another resnet50 measurement)."""
    by_name: dict[str, list[Key]] = {}
    for key, name in named.items():
        by_name.setdefault(name, []).append(key)
    out = dict(named)
    for name, keys in by_name.items():
        if len(keys) < 2:
            continue
        fields = [dict(k[2]) for k in keys]
        differing = sorted({f for d in fields for f in d
                            if len({str(x.get(f)) for x in fields}) > 1})
        for key, d in zip(keys, fields, strict=True):
            out[key] = name + " " + " ".join(f"{f}={d.get(f)}" for f in differing)
    return out


def without_device(key: Key) -> Key:
    """The key with its device field dropped: one figure a GPU becomes one row for all."""
    return key[0], key[1], tuple((k, v) for k, v in key[2] if k != "device")
