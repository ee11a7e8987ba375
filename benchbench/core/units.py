"""Human units for display: SI-base values in, 'GB/s', 'TFLOP/s', 'MiB' strings out."""

from __future__ import annotations

import math
import re
from typing import Any

_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_IEC = [(1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B")]


def _sig(x: float) -> str:
    """Three significant digits, no exponent."""
    if x == 0:
        return "0"
    digits = max(0, 2 - int(f"{abs(x):e}".split("e")[1]))
    return f"{x:.{digits}f}"


def si(value: float, unit: str) -> str:
    """1.23e12 FLOP/s -> '1.23 TFLOP/s'. Bandwidth uses decimal GB (1e9), as vendors do."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_sig(value / scale)} {prefix}{unit}"
    return f"{_sig(value)} {unit}"


# A size in decimal units in text an older benchbench recorded ("the device's 150 GB"): not a
# bandwidth ("GB/s") and not a model's name ("A100 80GB", no space).
_DECIMAL_SIZE = re.compile(r"\b(\d[\d,]*(?:\.\d+)?) (kB|MB|GB|TB)\b(?!/)")
_DECIMAL = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def binary_sizes(text: str) -> str:
    """Recorded text with its decimal sizes in binary units, as the reports print sizes:
    "the device's 150 GB" -> "the device's 140 GiB"."""
    return _DECIMAL_SIZE.sub(lambda m: iec(float(m[1].replace(",", "")) * _DECIMAL[m[2]]),
                             text)


def iec(n: float) -> str:
    """Buffer and memory sizes in binary units: 268435456 -> '256 MiB'."""
    for scale, name in _IEC:
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {name}" if v == int(v) else f"{_sig(v)} {name}"
    return f"{n:.0f} B"


def seconds(s: float) -> str:
    if s >= 1:
        return f"{_sig(s)} s"
    if s >= 1e-3:
        return f"{_sig(s * 1e3)} ms"
    return f"{_sig(s * 1e6)} µs"


def value(v: float, unit: str) -> str:
    if unit == "B":
        return iec(v)
    if unit == "s":
        return seconds(v)
    if unit == "ratio":
        return f"{v * 100:.1f}%"
    if unit == "count":
        return f"{v:g}" if abs(v) < 1e4 else si(v, "").strip()
    return si(v, unit)


def figure(v: float) -> str:
    """A capacity or rate in its own unit: 2,147 above 100, else three significant digits."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def percent(x: float) -> str:
    return f"{x * 100:.1f}%"


def signed_percent(pct: float, digits: int = 1) -> str:
    """A change in percent with its sign, as every report prints one: '+3.2%', '−20.0%' (a
    true minus, U+2212, the width of the plus, so that a column of changes lines up)."""
    return f"{pct:+.{digits}f}%".replace("-", "−")


def key_value(name: str, v: Any) -> str:
    """A key's value as a table, label or legend shows it: byte counts in binary units, and a
    measured float (a rate a search found, 32.928172898271896 requests/s) to four significant
    digits, whole from 1,000 up; results.json and the CSV keep it exact."""
    if (name.endswith("size_bytes") or name == "bs") and isinstance(v, (int, float)):
        return iec(v)  # byte counts in keys: buffer sizes, block sizes
    if isinstance(v, float) and math.isfinite(v) and not v.is_integer():
        return str(round(v)) if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table (cells escaped) followed by a blank line."""

    def esc(cell: str) -> str:
        return " ".join(str(cell).replace("|", "\\|").splitlines())

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines + [""]
