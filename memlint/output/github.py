"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo
from memlint.output.text import printable


def _data(text: str) -> str:
    """Escape a message as the workflow-command parser expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    """Properties additionally reserve ``:`` and ``,``."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(d: Diagnostic) -> str:
    path = printable(Path(d.path).as_posix())
    line, column, end_line, end_column = d.line, d.column, d.end_line, d.end_column
    message = f"{d.code} {d.message}"
    if d.cell is not None:
        # The annotation goes on the notebook file's own line; the message names the cell.
        from memlint.notebook import region_in_file

        line, column, end_line, end_column = region_in_file(d) or (1, 1, 1, 1)
        message = f"{d.code} (cell {d.cell}, line {d.line}, column {d.column}) {d.message}"
    props = ",".join([
        f"file={_prop(path)}",
        f"line={line}",
        f"col={column}",
        f"endLine={end_line}",
        f"endColumn={end_column}",
        f"title={_prop(f'{d.code} {d.name}')}",
    ])
    return f"::error {props}::{_data(message)}"


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    return "".join(annotation(d) + "\n" for d in diagnostics)
