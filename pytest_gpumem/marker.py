"""The ``gpu_mem`` marker: its arguments, checked when tests are collected.

A budget can be given as a float with the unit in its name (``max_gb=0.5``, GiB;
``max_leak_mb=1``, MiB) or as a size string (``max="512 MiB"``, ``max_leak="1 MiB"``, the
form pytest-memray's ``limit_memory("24 MB")`` uses). Each is kept as the user wrote it,
so reports echo ``max="512 MiB"`` rather than a re-derived float.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from pytest_gpumem.units import SIZE_HELP, SizeError, gib_to_bytes, mib_to_bytes, parse_size

MARKER = "gpu_mem"
MARKER_HELP = (
    "gpu_mem(max_gb=None, max_leak_mb=0.0, repeat=1, max=None, max_leak=None): give the test "
    "a memory budget. max_gb (GiB) or max ('512 MiB'): peak tensor memory above what was "
    "allocated before the test body; max_leak_mb (MiB) or max_leak ('1 MiB'): tensor memory "
    "the test may leave alive after its function-scoped fixtures are torn down; repeat: run "
    "the body this many times and fail only if live memory grows on every run after the "
    "first. Enforced with --gpumem (marked tests) or --gpumem-all (every test)."
)
_ALLOWED = ("max", "max_gb", "max_leak", "max_leak_mb", "repeat")


class MarkerError(ValueError):
    """A ``gpu_mem`` marker with arguments we cannot honour; the message is one line."""


@dataclass(frozen=True)
class Amount:
    """A byte count and the argument it came from, as written (``max_gb=0.5``)."""

    nbytes: int
    text: str


@dataclass(frozen=True)
class MarkerSpec:
    """The merged arguments of every ``gpu_mem`` marker on a test; ``None`` means unset."""

    budget: Amount | None = None
    max_leak: Amount | None = None
    repeat: int = 1


def _number(name: str, value: Any, *, allow_zero: bool) -> float:
    # Any real number (numpy's float32 and int64, Fraction, Decimal too), or its text as
    # pytest-timeout's marker takes timeout("5"); bool is an int subclass, but max_gb=True is
    # certainly a mistake.
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            string_name = name.rsplit("_", 1)[0]
            raise MarkerError(
                f"gpu_mem({name}=...) must be a number, got {value!r}; a size string goes in "
                f"{string_name}=..., e.g. {string_name}='512 MiB'"
            ) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise MarkerError(f"gpu_mem({name}=...) must be a number, got {value!r}")
    if not math.isfinite(value):
        raise MarkerError(f"gpu_mem({name}=...) must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "greater than zero"
        raise MarkerError(f"gpu_mem({name}={value!r}) must be {bound}")
    return float(value)


def _size(name: str, value: Any, *, allow_zero: bool) -> Amount:
    if not isinstance(value, str):
        raise MarkerError(f"gpu_mem({name}=...) must be a size string ({SIZE_HELP}), got {value!r}")
    try:
        nbytes = parse_size(value)
    except SizeError as exc:
        raise MarkerError(f"gpu_mem({name}=...): {exc}") from None
    if nbytes == 0 and not allow_zero:
        raise MarkerError(f"gpu_mem({name}={value!r}) must be greater than zero")
    return Amount(nbytes, f"{name}={value!r}")


def _amount(
    kwargs: dict[str, Any], string_name: str, float_name: str, to_bytes: Any, *, allow_zero: bool
) -> Amount | None:
    text, number = kwargs.get(string_name), kwargs.get(float_name)
    if text is not None and number is not None:
        raise MarkerError(f"gpu_mem takes {string_name}=... or {float_name}=..., not both")
    if text is not None:
        return _size(string_name, text, allow_zero=allow_zero)
    if number is not None:
        value = _number(float_name, number, allow_zero=allow_zero)
        shown = number if type(number) in (int, float) else value  # max_gb=0.5, not np.float32
        return Amount(to_bytes(value), f"{float_name}={shown!r}")
    return None


def parse_marker_kwargs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Check one marker's arguments and return the ones it sets."""
    if args:
        raise MarkerError(
            f"gpu_mem takes keyword arguments only (max='512 MiB', max_gb=..., max_leak=..., "
            f"max_leak_mb=..., repeat=...), got positional {args!r}"
        )
    unknown = sorted(set(kwargs) - set(_ALLOWED))
    if unknown:
        raise MarkerError(
            f"gpu_mem got unknown argument(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(_ALLOWED)}"
        )
    out: dict[str, Any] = {}
    budget = _amount(kwargs, "max", "max_gb", gib_to_bytes, allow_zero=False)
    if budget is not None:
        out["budget"] = budget
    leak = _amount(kwargs, "max_leak", "max_leak_mb", mib_to_bytes, allow_zero=True)
    if leak is not None:
        out["max_leak"] = leak
    if "repeat" in kwargs:
        repeat = kwargs["repeat"]
        if isinstance(repeat, str) and repeat.strip().isdecimal():  # as max_gb='0.5'
            repeat = int(repeat)
        if isinstance(repeat, bool) or not isinstance(repeat, numbers.Integral) or repeat < 1:
            raise MarkerError(f"gpu_mem(repeat={repeat!r}) must be a whole number, 1 or more")
        out["repeat"] = int(repeat)
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


def marker_owner(item: pytest.Item) -> str:
    """The node id of where ``item``'s wrong marker was written, so that one bad marker is
    one collection error: the module or class it marks, the test function (once for all its
    parameter sets), or the item itself (a ``pytest.param`` mark, one a conftest added)."""
    for node, mark in reversed(list(item.iter_markers_with_node(MARKER))):
        try:
            parse_marker_kwargs(mark.args, dict(mark.kwargs))
        except MarkerError:
            name = getattr(item, "originalname", None)
            decorated = getattr(getattr(item, "function", None), "pytestmark", ())
            if node is item and name and item.parent is not None and mark in decorated:
                return f"{item.parent.nodeid}::{name}"
            return node.nodeid
    return item.nodeid
