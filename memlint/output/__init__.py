"""Output formats: ``text`` (default), ``json``, ``sarif`` and ``github`` annotations.

Every formatter takes the sorted diagnostics of a run and the catalogue of rule metadata,
and returns the whole report as one string, so ``--output-file`` and stdout share a path.
A run imports only the formatter it uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlint.diagnostics import Diagnostic
    from memlint.output.ruledoc import RuleInfo

Formatter = Callable[["Sequence[Diagnostic]", "Mapping[str, RuleInfo]", Path], str]

# Format name -> the module under memlint.output whose ``render`` writes it.
FORMATS: dict[str, str] = {
    "text": "text",
    "json": "json_format",
    "sarif": "sarif",
    "github": "github",
}


def formatter(fmt: str) -> Formatter:
    render_fn: Formatter = importlib.import_module(f"{__name__}.{FORMATS[fmt]}").render
    return render_fn


def render(fmt: str, diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo],
           base: Path) -> str:
    return formatter(fmt)(diagnostics, rules, base)


__all__ = ["FORMATS", "formatter", "render"]
