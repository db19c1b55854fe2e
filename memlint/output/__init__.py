"""Output formats: ``concise`` (the default, also called ``text``), ``full`` (with source
context), ``json``, ``sarif``, ``github`` annotations, ``gitlab`` Code Quality and ``junit``.

Every formatter takes the sorted diagnostics of a run and the catalogue of rule metadata,
and returns the whole report as one string, so ``--output-file`` and stdout share a path.
The two human formats also mark fixable findings and end with a summary. A run imports
only the formatter it uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlint.diagnostics import Diagnostic
    from memlint.output.ruledoc import RuleInfo

Formatter = Callable[..., str]

# Format name -> the module under memlint.output whose ``render`` writes it.
FORMATS: dict[str, str] = {
    "text": "text",
    "concise": "text",
    "full": "full",
    "json": "json_format",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
}
# Formats for people: they take ``unsafe_fixes`` and ``show_summary``.
HUMAN = frozenset({"text", "concise", "full"})


def formatter(fmt: str) -> Formatter:
    render_fn: Formatter = importlib.import_module(f"{__name__}.{FORMATS[fmt]}").render
    return render_fn


def render(fmt: str, diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo],
           base: Path, *, unsafe_fixes: bool = False, show_summary: bool = True,
           sources: Mapping[str, str] | None = None) -> str:
    """``sources``: text for paths that are not files (stdin), for ``full``."""
    options: dict[str, Any] = {}
    if fmt in HUMAN:
        options = {"unsafe_fixes": unsafe_fixes, "show_summary": show_summary}
    if fmt == "full":
        options["sources"] = sources
    return formatter(fmt)(diagnostics, rules, base, **options)


__all__ = ["FORMATS", "HUMAN", "formatter", "render"]
