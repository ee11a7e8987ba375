"""Which storage reads a cache may serve: the storage probe's, where the host may cache them,
and an epoch's, where the page cache keeps part of a training set larger than free RAM.

- On a VM, posix_fadvise(DONTNEED) and O_DIRECT reach only the guest's page cache; the host
  may still answer a virtio disk's reads from its own. The guest cannot see the host's RAM, but
  the host has at least the guest's: a read set no larger than the guest's RAM may be served
  from the host's cache. So may reads where random 128 KiB blocks outrun sequential 1 MiB
  ones: a disk streams at least as fast as it seeks, a cache does not care.
- An epoch reads each file once, shuffled. Of a set larger than free RAM the page cache keeps
  about free RAM / set size, so about 1 - free RAM / set size of each epoch comes from
  storage, and storage sustains training at its read rate ÷ that share.
Pure functions over a RunResult; units B, ratio, images/s.
"""

from __future__ import annotations

import dataclasses

from benchbench.analysis.capacities import Capacity, metric, ok_probe
from benchbench.core.results import RunResult
from benchbench.core.units import iec, si

HOST_CACHE = "may be served by the host's cache"


def host_cache(run: RunResult) -> str | None:
    """Why the storage probe's figures may be served by a VM host's cache, or None (bare
    metal, where dropping the cache drops it, or no storage measurement)."""
    pr = ok_probe(run, "storage")
    virt = (run.environment.get("virtualisation") or {}).get("kind")
    if pr is None or virt != "vm":
        return None
    why = []
    seq = max(metric(pr, "read_bandwidth", job="seq1m"), key=lambda m: m.value, default=None)
    rand = max(metric(pr, "read_bandwidth", job="rand128k"), key=lambda m: m.value,
               default=None)
    if seq is not None and rand is not None and rand.value > seq.value:
        why.append(f"random 128 KiB reads ({si(rand.value, 'B/s')}) outran sequential 1 MiB "
                   f"ones ({si(seq.value, 'B/s')})")
    ram = (run.environment.get("host") or {}).get("memory_total")
    cold = next(iter(metric(pr, "dataset_read_rate")), None)
    sets = [b for b in ((cold.context.get("bytes_read") if cold else None),
                        pr.params.get("size")) if b]
    if ram and sets and max(sets) <= ram:
        why.append(f"the read set ({iec(max(sets))} at most) is smaller than this VM's "
                   f"{iec(ram)} of RAM, and its host has at least as much")
    if not why:
        return None
    return (f"{HOST_CACHE}: on a VM, dropping the cache reaches only the guest's; "
            + "; ".join(why))


def epoch_share(run: RunResult, dataset_bytes: float) -> tuple[float, float] | None:
    """(the share of each epoch read from storage, the free RAM) for a training set larger
    than free RAM; None where it fits or the RAM is not recorded."""
    host = run.environment.get("host") or {}
    ram = host.get("memory_available") or host.get("memory_total")
    if not ram or dataset_bytes <= ram:
        return None
    return 1 - ram / dataset_bytes, float(ram)


def epoch_text(described: str, share: float, ram: float, dataset_bytes: float) -> str:
    """'… does not fit in the 125 GiB of free RAM: the page cache keeps about 91% of it, so
    each epoch reads about 9% (12 GiB) from storage'."""
    return (f"{described} does not fit in the {iec(ram)} of free RAM: the page cache keeps "
            f"about {1 - share:.0%} of it, so each epoch reads about {share:.0%} "
            f"({iec(share * dataset_bytes)}) from storage")


def for_epoch(store: Capacity, share: float) -> Capacity:
    """Storage's capacity in training images/s when only `share` of each epoch reads from it:
    its read rate ÷ the share."""
    if store.value is None or share <= 0:
        return store
    value = store.value / share
    return dataclasses.replace(store, value=value, how=(
        f"{store.how}; ÷ {share:.1%}, the share of each epoch read from storage (the page "
        f"cache serves the rest) = {value:,.0f} images/s"))


def labelled(run: RunResult, store: Capacity) -> Capacity:
    """The storage capacity, its figure labelled where the host may have cached its reads."""
    why = host_cache(run)
    if why is None or store.value is None:
        return store
    return dataclasses.replace(store, how=f"{store.how} ({why})")
