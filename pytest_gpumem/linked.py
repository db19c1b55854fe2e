"""The static linter beside the measurement: memlint's findings in the functions that
allocated the memory a failing test kept or peaked with.

Memory is allocated at one line (``loss = model(x)...``) but often kept alive by another a
few lines below (``history.append(loss)``), so a site is linked to every finding in the
function around each of its user frames, not only to its own line. Each file is linted once
per session (per xdist worker) and the result kept. memlint is imported only when a test
fails on memory, and any problem (memlint or libcst missing, a file that does not parse, a
bad configuration) becomes one line in the report instead of breaking it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpumem.backends.base import Site
from pytest_gpumem.result import LEAK, OOM, PEAK, SITES_IN_JSON, TestMeasurement

# What memlint reports about a file it could not check, rather than a finding.
_NOT_FINDINGS = frozenset({"MEM996", "MEM997", "MEM998", "MEM999"})


@dataclass(frozen=True)
class LintFinding:
    """One memlint finding, as a memory report shows it."""

    file: str
    line: int
    code: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code,
                "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LintFinding:
        return cls(str(data["file"]), int(data["line"]), str(data["code"]),
                   str(data["message"]))


@dataclass
class _Linted:
    findings: list[LintFinding] = field(default_factory=list)
    functions: list[tuple[int, int]] = field(default_factory=list)  # (first, last) lines
    problem: str | None = None


class Linker:
    """memlint's findings per file, linted once per session."""

    def __init__(self) -> None:
        self._files: dict[str, _Linted] = {}

    def findings(self, site: Site) -> tuple[list[LintFinding], list[str]]:
        """The findings in the functions of a site's user frames, and one-line problems."""
        found: list[LintFinding] = []
        problems: list[str] = []
        for file, line, _function in site.frames:
            if not file.endswith(".py"):  # <string>, a notebook's cell: no file memlint reads
                continue
            linted = self._lint(file)
            if linted.problem is not None:
                problems.append(linted.problem)
                continue
            from memlint.measured import enclosing

            first, last = enclosing(linted.functions, line) or (line, line)
            found += [f for f in linted.findings if first <= f.line <= last and f not in found]
        return found, problems

    def _lint(self, file: str) -> _Linted:
        if file not in self._files:
            try:
                self._files[file] = _lint_file(file)
            except Exception as exc:  # never let the linter break a test report
                self._files[file] = _Linted(problem=_problem(file, exc))
        return self._files[file]


def _problem(file: str, exc: BaseException) -> str:
    if isinstance(exc, ImportError):
        return f"memlint findings not linked: {exc} (memlint needs libcst: pip install libcst)"
    return f"memlint could not lint {_shown(file)}: {type(exc).__name__}: {exc}"


def _shown(file: str) -> str:
    return os.path.relpath(file) if os.path.isabs(file) else file


def _lint_file(file: str) -> _Linted:
    from memlint.config import ConfigError, Layer, build_settings
    from memlint.filecheck import lint_bytes
    from memlint.measured import function_spans
    from memlint.rules import rule_specs

    source = Path(file).read_bytes()
    specs = rule_specs()
    try:
        settings = build_settings(Layer(), [s.code for s in specs],
                                  [s.code for s in specs if s.default_enabled],
                                  start=Path(file).parent)
        enabled = [s for s in specs if s.code in settings.enabled]
        try:
            relative = Path(file).resolve().relative_to(settings.root).as_posix()
        except ValueError:
            relative = Path(file).name
        ignored = settings.ignored_for(relative)
    except ConfigError:  # the project's [tool.memlint] is broken: the default rules
        enabled, ignored = [s for s in specs if s.default_enabled], frozenset()
    result = lint_bytes(file, source, enabled, ignored)
    broken = [d for d in result.diagnostics if d.code in ("MEM999", "MEM997", "MEM996")]
    if broken:
        return _Linted(problem=f"memlint could not lint {_shown(file)}: {broken[0].message}")
    return _Linted([LintFinding(file, d.line, d.code, d.message) for d in result.diagnostics
                    if d.code not in _NOT_FINDINGS], function_spans(source))


def link_sites(linker: Linker, sites: Iterable[Site]) -> tuple[dict[int, list[LintFinding]],
                                                               list[str]]:
    """Findings per site (by index in ``sites``) and the problems met, each once."""
    links: dict[int, list[LintFinding]] = {}
    problems: list[str] = []
    for index, site in enumerate(sites):
        found, trouble = linker.findings(site)
        if found:
            links[index] = found
        problems += [p for p in trouble if p not in problems]
    return links, problems


def link_measurement(linker: Linker, m: TestMeasurement) -> None:
    """Attach memlint's findings to the sites of the limits a test broke."""
    problems: list[str] = []
    if m.peak is not None and (PEAK in m.violations or OOM in m.violations):
        m.peak_links, problems = link_sites(linker, m.peak.sites[:SITES_IN_JSON])
    if m.leak is not None and LEAK in m.violations:
        m.leak_links, more = link_sites(linker, m.leak.sites[:SITES_IN_JSON])
        problems += [p for p in more if p not in problems]
    m.lint_problems = problems
