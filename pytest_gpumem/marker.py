"""The ``gpu_mem`` marker: its arguments, checked when tests are collected."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

MARKER = "gpu_mem"
MARKER_HELP = (
    "gpu_mem(max_gb=None, max_leak_mb=0.0, repeat=1): give the test a memory budget. "
    "max_gb: peak tensor memory above what was allocated before the test body, in GiB "
    "(2**30 bytes); max_leak_mb: tensor memory (MiB) the test may leave alive after its "
    "function-scoped fixtures are torn down; repeat: run the body this many times and fail "
    "only if live memory grows on every run after the first. Enforced with --gpumem."
)
_ALLOWED = ("max_gb", "max_leak_mb", "repeat")


class MarkerError(ValueError):
    """A ``gpu_mem`` marker with arguments we cannot honour; the message is one line."""


@dataclass(frozen=True)
class MarkerSpec:
    """The merged arguments of every ``gpu_mem`` marker on a test; ``None`` means unset."""

    max_gb: float | None = None
    max_leak_mb: float | None = None
    repeat: int = 1


def _number(name: str, value: Any, *, allow_zero: bool) -> float:
    # bool is an int subclass; max_gb=True is certainly a mistake.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MarkerError(f"gpu_mem({name}=...) must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "greater than zero"
        raise MarkerError(f"gpu_mem({name}={value!r}) must be {bound}")
    return float(value)


def parse_marker_kwargs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Check one marker's arguments and return the ones it sets."""
    if args:
        raise MarkerError(
            f"gpu_mem takes keyword arguments only (max_gb=..., max_leak_mb=..., repeat=...), "
            f"got positional {args!r}"
        )
    unknown = sorted(set(kwargs) - set(_ALLOWED))
    if unknown:
        raise MarkerError(
            f"gpu_mem got unknown argument(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(_ALLOWED)}"
        )
    out: dict[str, Any] = {}
    if kwargs.get("max_gb") is not None:
        out["max_gb"] = _number("max_gb", kwargs["max_gb"], allow_zero=False)
    if kwargs.get("max_leak_mb") is not None:
        out["max_leak_mb"] = _number("max_leak_mb", kwargs["max_leak_mb"], allow_zero=True)
    if "repeat" in kwargs:
        repeat = kwargs["repeat"]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise MarkerError(f"gpu_mem(repeat={repeat!r}) must be a whole number, 1 or more")
        out["repeat"] = repeat
    return out


def marker_spec(item: pytest.Item) -> MarkerSpec | None:
    """Merge markers from module to class to function, the closest one winning per argument."""
    markers = list(item.iter_markers(MARKER))
    if not markers:
        return None
    merged: dict[str, Any] = {}
    for mark in reversed(markers):  # iter_markers yields the closest first
        merged.update(parse_marker_kwargs(mark.args, dict(mark.kwargs)))
    return MarkerSpec(**merged)
