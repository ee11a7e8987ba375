"""What a person reads for each id: resources, probes and precisions by their human names.

The ids stay in results.json, the CSV and `code` spans; prose, tables and the terminal use
these names. One home, so that the terminal, the reports and the plots say the same thing.
"""

from __future__ import annotations

import re

RESOURCE_NAMES = {
    "gpu_compute": "GPU compute", "gpu_memory": "GPU memory",
    "host_device_link": "the host-to-GPU link (PCIe)", "interconnect": "the interconnect",
    "cpu_compute": "CPU compute", "cpu_dataloading": "CPU data loading",
    "storage": "storage", "host_memory": "host memory",
}
PROBE_NAMES = {
    "matmul": "matrix multiply", "memory_bandwidth": "memory copy",
    "host_device_copy": "host-to-GPU copies", "stability": "sustained compute",
    "resnet50": "ResNet50 training", "transformer": "transformer training",
    "pipeline": "the input pipeline", "ddp_scaling": "multi-GPU scaling",
    "memory_fit": "the largest model that fits", "inference": "inference",
    "dataloader": "the data loader", "storage": "storage reads", "allreduce": "all-reduce",
}
LOADER_NAMES = {"torchvision": "torchvision", "dali_cpu": "DALI (CPU)", "dali_gpu": "DALI (GPU)"}
PRECISION_NAMES = {
    "fp32": "fp32", "tf32": "TF32", "amp_bf16": "bf16 mixed precision",
    "amp_fp16": "fp16 mixed precision", "fp8": "fp8", "bf16": "bf16", "fp16": "fp16",
}
# The ids with an underscore that recorded reasons and the analysis's sentences carry ("amp_fp16
# skipped, because …", "CPU steal during memory_bandwidth"): in prose each reads as its name.
# Ids without one ("storage", "fp32") read as words already.
_IN_PROSE = {i: n for table in (RESOURCE_NAMES, PROBE_NAMES, PRECISION_NAMES, LOADER_NAMES)
             for i, n in table.items() if "_" in i}
# An id inside a path, a config field (memory_fit.steps) or a flag's value (--only a,memory_fit)
# stays.
_FLAG = re.compile(r"--[\w-]+[ =]$")
_PROSE_ID = re.compile(
    r"(?<![\w/=.,-])(?:(?P<probe>" + "|".join(p for p in PROBE_NAMES if "_" in p) + r") probe\b"
    r"|(?P<id>" + "|".join(sorted(_IN_PROSE, key=len, reverse=True)) + r")(?![\w/=-])(?!\.\w))")


def capitalised(text: str) -> str:
    """The text with its first letter upper-case and the rest as it is (str.capitalize would
    lower "GPU" and "PCIe"), for a name that starts a sentence, a heading or a cell."""
    return text[:1].upper() + text[1:]


def listed(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c': names as a sentence lists them."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def in_words(text: str) -> str:
    """Prose with the ids it carries written as their names, `code` spans left as they are:
    'amp_fp16 skipped' → 'fp16 mixed precision skipped', 'during memory_bandwidth' → 'during
    memory copy'; 'the memory_fit probe' → 'the `memory_fit` probe' (a probe called a probe
    keeps its id, as code)."""
    def named(m: re.Match[str]) -> str:
        if _FLAG.search(m.string[max(0, m.start() - 24):m.start()]):
            return m[0]
        return f"`{m['probe']}` probe" if m["probe"] else _IN_PROSE[m["id"]]

    parts = text.split("`")
    for i in range(0, len(parts), 2):  # the even parts lie outside code spans
        parts[i] = _PROSE_ID.sub(named, parts[i])
    return "`".join(parts)


def opened(text: str) -> str:
    """'simulated server (LoadGen not installed)' → 'simulated server, LoadGen not installed':
    a name that ends in a parenthesis of its own, for a sentence that puts it inside one."""
    if text.endswith(")") and " (" in text:
        head, _, tail = text[:-1].partition(" (")
        if "(" not in tail and ")" not in tail:
            return f"{head}, {tail}"
    return text


def counted(n: int, word: str, plural: str | None = None) -> str:
    """'1 run', '3 runs', '1 capacity', '2 capacities': a count with its noun in the number it
    takes (`plural` where adding an s is wrong). Thousands are grouped: '1,024 files'."""
    if n == 1:
        return f"1 {word}"
    many = plural or (word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou"
                      else word + "s")
    return f"{n:,} {many}"


def first_of(items: list[str], first: int = 6) -> str:
    """'a, b, c and 4 more': the first items of a long list, and how many are left out."""
    left = len(items) - first
    return ", ".join(items[:first]) + (f" and {left} more" if left > 0 else "")


# what the terminal's last line of compare, history and fleet names before "and N more": a
# person reads a terminal from its end, and a CI log's last line should stay one line
TERMINAL_NAMED = 3


def first_clauses(items: list[str], first: int | None = None) -> str:
    """'a; b; c; and 4 more': first_of for items that are clauses of their own, by default
    the TERMINAL_NAMED first."""
    first = TERMINAL_NAMED if first is None else first
    left = len(items) - first
    return "; ".join(items[:first]) + (f"; and {left} more" if left > 0 else "")


def devices(names: list[str]) -> str:
    """'cuda:0–7', 'cuda:0–3, 5', 'cpu, cuda:0': devices as few words name them, consecutive
    GPUs as a range."""
    gpus = sorted(int(d[5:]) for d in names if d.startswith("cuda:") and d[5:].isdigit())
    spans: list[list[int]] = []
    for i in gpus:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    ranges = [f"{a}–{b}" if b > a + 1 else f"{a}, {b}" if b > a else str(a) for a, b in spans]
    rest = [d for d in names if not (d.startswith("cuda:") and d[5:].isdigit())]
    return ", ".join(rest + (["cuda:" + ", ".join(ranges)] if ranges else []))


def resource_name(resource: str) -> str:
    """The resource as prose names it; an unknown id comes back as it is."""
    return RESOURCE_NAMES.get(resource, resource.replace("_", " "))


def probe_name(probe: str) -> str:
    return PROBE_NAMES.get(probe, probe.replace("_", " "))


def precision_name(precision: str) -> str:
    return PRECISION_NAMES.get(precision, precision)


def loader_name(loader: str) -> str:
    return LOADER_NAMES.get(loader, loader.replace("_", " "))
