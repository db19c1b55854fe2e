"""Byte counts as people write and read them.

One convention everywhere: binary units. ``GiB``/``MiB``/``KiB`` and the shorter ``GB``/
``MB``/``KB`` all mean powers of 1024 (as ``max_gb`` always has, and as pytest-memray reads
``"24 MB"``), so no option or marker reads ``GB`` as 10**9.
"""

from __future__ import annotations

import math
import re

GIB = 2**30
MIB = 2**20

SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "kib": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "tib": 2**40,
}
SIZE_HELP = "a size like '512 MiB', '1.5GB' or '4096' (bytes); KB/MB/GB are binary, as KiB/MiB/GiB"
_SIZE = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*$")


class SizeError(ValueError):
    """A size string we cannot read; the message is one line."""


def parse_size(text: str) -> int:
    """Bytes for ``'512 MiB'``, ``'1.5GB'``, ``'4096'``; binary units whatever their spelling."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in SIZE_UNITS:
        raise SizeError(f"cannot read size {text!r}: use {SIZE_HELP}")
    number = float(match.group(1))
    if not math.isfinite(number):
        raise SizeError(f"cannot read size {text!r}: use {SIZE_HELP}")
    return round(number * SIZE_UNITS[unit])


def format_bytes(n: int) -> str:
    """Binary units with two decimals, so a 4-byte leak and a 3 GiB peak both read naturally."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            if unit == "B":
                return f"{sign}{int(value)} B"
            return f"{sign}{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_apart(measured: int, limit: int) -> tuple[str, str]:
    """Both numbers as :func:`format_bytes` writes them, with the exact bytes added when the
    two would read the same (a 4,194,304 B peak over a 4,193,280 B budget is not
    "4.00 MiB exceeds 4.00 MiB")."""
    a, b = format_bytes(measured), format_bytes(limit)
    if a == b and measured != limit:
        return f"{a} ({measured:,} B)", f"{b}, {limit:,} B"
    return a, b


def gib_to_bytes(gib: float) -> int:
    return round(gib * GIB)


def mib_to_bytes(mib: float) -> int:
    return round(mib * MIB)
