"""Byte counts as people read them: budgets in GiB (2**30), everything else in binary units."""

from __future__ import annotations

GIB = 2**30
MIB = 2**20


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


def gib_to_bytes(gib: float) -> int:
    return round(gib * GIB)


def mib_to_bytes(mib: float) -> int:
    return round(mib * MIB)
