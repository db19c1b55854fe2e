"""Findings with measured memory behind them, from a pytest-gpumem JSON report.

``memlint --gpumem-report report.json`` reads the allocation sites the plugin recorded for
each measured test (``--gpumem-json``): every site is a user call stack with the bytes
allocated there that were alive at the test's peak, or still alive after it (leaked). A
finding is marked with those bytes when a site's stack passes through the finding's line
(``scope: line``), or through the function around it (``scope: function``): memory is often
allocated at ``loss = model(x)`` and kept alive by ``history.append(loss)`` a few lines below.
Per finding the largest test's bytes are shown, so ``--sort=measured`` puts first what a user
should fix first.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memlint.diagnostics import Diagnostic


class ReportError(Exception):
    """The report cannot be used; the message is one line."""


@dataclass(frozen=True)
class Measured:
    """The memory measured behind one finding: the most any one test had there."""

    peak_bytes: int
    leaked_bytes: int
    tests: tuple[str, ...]
    scope: str  # "line": allocated at the finding's line; "function": in its function

    @property
    def weight(self) -> int:
        return max(self.peak_bytes, self.leaked_bytes)

    def describe(self) -> str:
        from pytest_gpumem.units import format_bytes

        parts = []
        if self.leaked_bytes:
            parts.append(f"{format_bytes(self.leaked_bytes)} leaked")
        if self.peak_bytes:
            parts.append(f"{format_bytes(self.peak_bytes)} at peak")
        where = "at this line" if self.scope == "line" else "in this function"
        count = len(self.tests)
        return f"measured {where}: {', '.join(parts)} in {count} test{'s' if count != 1 else ''}"

    def to_json(self) -> dict[str, Any]:
        return {"peak_bytes": self.peak_bytes, "leaked_bytes": self.leaked_bytes,
                "tests": list(self.tests), "scope": self.scope}


# One site of one test: (test id, "peak" or "leak", bytes, the stack's (path, line) frames).
_Site = tuple[str, str, int, tuple[tuple[str, int], ...]]


@dataclass
class Report:
    sites: list[_Site]

    def files(self) -> set[str]:
        return {file for _, _, _, frames in self.sites for file, _ in frames}


def _real(path: str, base: Path) -> str:
    given = Path(path)
    return os.path.realpath(given if given.is_absolute() else base / given)


def load_report(path: Path) -> Report:
    """Read a ``--gpumem-json`` file; ReportError for anything that is not one."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ReportError(f"cannot read gpumem report {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReportError(f"gpumem report {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise ReportError(f"{path} is not a pytest-gpumem JSON report (--gpumem-json)")
    base = path.resolve().parent
    sites: list[_Site] = []
    try:
        for test in data["tests"]:
            for kind in ("peak", "leak"):
                for site in test.get(f"{kind}_sites") or ():
                    frames = tuple((_real(str(f["file"]), base), int(f["line"]))
                                   for f in site["frames"])
                    sites.append((str(test["nodeid"]), kind, int(site["bytes"]), frames))
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path}: unexpected gpumem report content "
                          f"({type(exc).__name__}: {exc})") from None
    return Report(sites)


def function_spans(source: bytes) -> list[tuple[int, int]]:
    """(first, last) line of every function in a module; empty if it does not parse. Both
    directions of the link (here and in pytest_gpumem.linked) match findings and allocation
    sites by the function around them."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def enclosing(spans: Iterable[tuple[int, int]], line: int) -> tuple[int, int] | None:
    """The innermost function span around a line; None at module level."""
    best: tuple[int, int] | None = None
    for first, last in spans:
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, last)
    return best


def _functions(file: str) -> list[tuple[int, int]]:
    try:
        return function_spans(Path(file).read_bytes())
    except OSError:
        return []


def measured_for(report: Report, file: str, line: int,
                 functions: Sequence[tuple[int, int]]) -> Measured | None:
    """The memory behind a finding at ``file:line`` (``file`` resolved), if any."""
    span = enclosing(functions, line)
    per_test: dict[tuple[str, str], int] = {}
    scope = "function"
    for test, kind, nbytes, frames in report.sites:
        lines = [ln for f, ln in frames if f == file]
        if line in lines:
            scope = "line"
        elif span is None or not any(span[0] <= ln <= span[1] for ln in lines):
            continue
        per_test[test, kind] = per_test.get((test, kind), 0) + nbytes
    if not per_test:
        return None
    peak = max((b for (_, kind), b in per_test.items() if kind == "peak"), default=0)
    leaked = max((b for (_, kind), b in per_test.items() if kind == "leak"), default=0)
    tests = tuple(sorted({test for test, _ in per_test}))
    return Measured(peak, leaked, tests, scope)


def mark(diagnostics: Sequence[Diagnostic], report: Report, cwd: Path) -> list[Diagnostic]:
    """The diagnostics, those with measured memory behind them carrying it."""
    files = report.files()
    spans: dict[str, list[tuple[int, int]]] = {}
    out: list[Diagnostic] = []
    for d in diagnostics:
        real = _real(d.path, cwd)
        if d.cell is not None or real not in files:
            out.append(d)
            continue
        if real not in spans:
            spans[real] = _functions(real)
        found = measured_for(report, real, d.line, spans[real])
        out.append(d if found is None else replace(d, measured=found))
    return out


def by_measured(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Most measured memory first; findings without any keep their order after them."""
    return sorted(diagnostics,
                  key=lambda d: -(d.measured.weight if d.measured is not None else -1))
