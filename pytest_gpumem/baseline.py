"""A committed file of per-test peaks, so a suite gets budgets without editing every test.

The file is JSON with sorted keys, two-space indentation and a trailing newline, so that
rewriting it after a run produces a small, reviewable diff::

    {
      "format": 1,
      "tests": {
        "tests/test_model.py::test_step": {
          "backend": "cuda",
          "device": "cuda:0",
          "leaked_bytes": 0,
          "peak_bytes": 104857600
        }
      }
    }
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_gpumem.atomicfile import write_text_atomically
from pytest_gpumem.units import SIZE_HELP, SizeError, format_apart, format_bytes, parse_size

FORMAT_VERSION = 1
DEFAULT_TOLERANCE = "10%,+1MiB"

_RELATIVE = re.compile(r"^\+?\s*(\d+(?:\.\d+)?)\s*%$")


class BaselineError(Exception):
    """A baseline file or tolerance the user gave cannot be used; the message is one line."""


@dataclass(frozen=True)
class BaselineEntry:
    """What one test measured when the baseline was written."""

    peak_bytes: int
    leaked_bytes: int
    backend: str
    device: str

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "leaked_bytes": self.leaked_bytes,
            "peak_bytes": self.peak_bytes,
        }


@dataclass(frozen=True)
class Tolerance:
    """Allowed growth over a baseline value: the larger of the relative and absolute slack.

    Taking the larger of the two keeps tiny tests from failing on a few allocator blocks
    (the absolute part) while large tests are judged in proportion (the relative part).
    """

    relative: float = 0.0
    absolute_bytes: int = 0

    def allowed(self, baseline_bytes: int) -> int:
        """The largest value that still counts as no regression."""
        slack = max(int(baseline_bytes * self.relative), self.absolute_bytes)
        return baseline_bytes + slack

    def describe(self) -> str:
        parts = []
        if self.relative:
            parts.append(f"{self.relative * 100:g}%")
        if self.absolute_bytes or not parts:
            parts.append(f"+{format_bytes(self.absolute_bytes).replace(' ', '')}")
        return ",".join(parts)


def parse_tolerance(text: str) -> Tolerance:
    """Parse ``10%``, ``+16MiB`` or both, comma-separated (``10%,+16MiB``)."""
    relative: float | None = None
    absolute: int | None = None
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise BaselineError(f"empty tolerance {text!r}; use e.g. '10%', '+16MiB' or '10%,+16MiB'")
    for part in parts:
        rel = _RELATIVE.match(part)
        if rel:
            if relative is not None:
                raise BaselineError(f"tolerance {text!r} gives two relative parts")
            relative = float(rel.group(1)) / 100.0
            continue
        try:
            size = parse_size(part.lstrip("+"))
        except SizeError:
            raise BaselineError(
                f"cannot read tolerance part {part!r}: use a percentage like '10%' or "
                f"{SIZE_HELP}, with an optional '+'"
            ) from None
        if absolute is not None:
            raise BaselineError(f"tolerance {text!r} gives two absolute parts")
        absolute = size
    return Tolerance(relative=relative or 0.0, absolute_bytes=absolute or 0)


def _entry_from_json(nodeid: str, raw: object) -> BaselineEntry:
    if not isinstance(raw, dict):
        raise BaselineError(f"entry for {nodeid!r} is not an object")
    try:
        peak, leaked = raw["peak_bytes"], raw.get("leaked_bytes", 0)
        backend, device = raw["backend"], raw.get("device", "")
    except KeyError as exc:
        raise BaselineError(f"entry for {nodeid!r} lacks {exc.args[0]!r}") from None
    if not (isinstance(peak, int) and isinstance(leaked, int)) or peak < 0 or leaked < 0:
        raise BaselineError(f"entry for {nodeid!r} needs non-negative integer byte counts")
    if not (isinstance(backend, str) and isinstance(device, str)):
        raise BaselineError(f"entry for {nodeid!r} needs string backend and device")
    return BaselineEntry(peak_bytes=peak, leaked_bytes=leaked, backend=backend, device=device)


def parse_baseline(text: str, *, source: str = "baseline") -> dict[str, BaselineEntry]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), dict):
        raise BaselineError(f'{source} has no "tests" object; was it written by pytest_gpumem?')
    if data.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        found = data.get("format")
        raise BaselineError(f"{source} has format {found!r}, expected {FORMAT_VERSION}")
    return {nodeid: _entry_from_json(nodeid, raw) for nodeid, raw in data["tests"].items()}


def load_baseline(path: Path) -> dict[str, BaselineEntry] | None:
    """Read the baseline at ``path``; ``None`` when the file does not exist yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
    return parse_baseline(text, source=f"baseline {path}")


def dump_baseline(entries: Mapping[str, BaselineEntry]) -> str:
    tests = {nodeid: entries[nodeid].to_json() for nodeid in sorted(entries)}
    return json.dumps({"format": FORMAT_VERSION, "tests": tests}, indent=2, sort_keys=True) + "\n"


def write_baseline(path: Path, entries: Mapping[str, BaselineEntry]) -> None:
    write_text_atomically(path, dump_baseline(entries))


class VerdictKind(Enum):
    OK = "ok"
    NEW = "new"  # no entry for this test yet
    REGRESSION = "regression"
    MISMATCH = "mismatch"  # measured on another backend/device than the baseline


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    message: str = ""

    @property
    def fails(self) -> bool:
        return self.kind is VerdictKind.REGRESSION


def _peak_regression(measured: int, tolerance: Tolerance, entry: BaselineEntry) -> str | None:
    base = entry.peak_bytes
    allowed = tolerance.allowed(base)
    if measured <= allowed:
        return None
    growth = f"{(measured - base) / base * 100:+.1f}%" if base else "from nothing"
    shown, allowed_text = format_apart(measured, allowed)
    return (
        f"peak {shown} grew {growth} over the baseline {format_bytes(base)} "
        f"(allowed up to {allowed_text} with tolerance {tolerance.describe()}; "
        f"baseline from {entry.backend} {entry.device})"
    )


def compare(
    entry: BaselineEntry | None,
    *,
    peak_bytes: int,
    backend: str,
    device: str,
    tolerance: Tolerance,
    strict_backend: bool = False,
) -> Verdict:
    """Judge one test's peak against its baseline entry.

    Only the peak is judged: leaks already have their own tolerance on the marker; the
    entry's ``leaked_bytes`` is kept in the file for reviewers of the diff.

    A baseline taken on another backend (a CPU estimate against a CUDA measurement) is not
    comparable, so by default it only yields a warning. Devices are compared by kind
    (``cuda:0`` and ``cuda:1`` are equivalent for a pinned xdist worker).
    """
    if entry is None:
        return Verdict(VerdictKind.NEW, "no baseline entry yet")
    if entry.backend != backend or _device_kind(entry.device) != _device_kind(device):
        message = (
            f"baseline was measured on {entry.backend} {entry.device}, this run on "
            f"{backend} {device}"
        )
        if strict_backend:
            return Verdict(VerdictKind.REGRESSION, message)
        return Verdict(VerdictKind.MISMATCH, message + "; not compared")
    problem = _peak_regression(peak_bytes, tolerance, entry)
    if problem is not None:
        return Verdict(VerdictKind.REGRESSION, "memory regression: " + problem)
    return Verdict(VerdictKind.OK)


def _device_kind(device: str) -> str:
    return device.split(":", 1)[0]


def updated_baseline(
    old: Mapping[str, BaselineEntry],
    measured: Mapping[str, BaselineEntry],
    *,
    existing_ids: Iterable[str] | None,
) -> dict[str, BaselineEntry]:
    """The baseline after a run: measured entries replace old ones, others are kept.

    ``existing_ids`` is the full set of test ids that exist now, known only when the run was
    not filtered (no ``-k``/``-m``/paths/ids and no collection errors). When it is given,
    entries for tests that no longer exist are dropped; when it is ``None`` nothing is
    dropped, because a test that was not collected may simply have been filtered out.
    """
    result = dict(old)
    if existing_ids is not None:
        keep = set(existing_ids)
        result = {nodeid: entry for nodeid, entry in result.items() if nodeid in keep}
    result.update(measured)
    return result
