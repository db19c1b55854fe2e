"""Output formats: ``text`` (default), ``json``, ``sarif`` and ``github`` annotations.

Every formatter takes the sorted diagnostics of a run and the catalogue of rule metadata,
and returns the whole report as one string, so ``--output-file`` and stdout share a path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output import github, json_format, sarif, text
from memlint.output.ruledoc import RuleInfo

Formatter = Callable[[Sequence[Diagnostic], Mapping[str, RuleInfo], Path], str]

FORMATS: dict[str, Formatter] = {
    "text": text.render,
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
}


def render(fmt: str, diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo],
           base: Path) -> str:
    return FORMATS[fmt](diagnostics, rules, base)


__all__ = ["FORMATS", "render"]
