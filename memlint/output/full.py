"""``full``: each finding with its source lines and a caret under the span, as ruff's
default output shows it, then the same summary as ``concise``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo
from memlint.output.text import line, printable, summary

# Longest span shown line by line; a longer one shows its first lines and an ellipsis.
MAX_LINES = 4


class _Sources:
    """Each file's lines, read once (decoded as Python source is, undecodable bytes kept)."""

    def __init__(self, base: Path, given: Mapping[str, str]) -> None:
        self.base = base
        self.lines: dict[str, list[str]] = {k: v.splitlines() for k, v in given.items()}

    def get(self, path: str) -> list[str]:
        if path not in self.lines:
            text = ""
            with contextlib.suppress(OSError):
                text = (self.base / path).read_bytes().decode("utf-8", "replace")
            self.lines[path] = text.splitlines()
        return self.lines[path]


def snippet(d: Diagnostic, lines: Sequence[str]) -> str:
    """The flagged lines with a gutter of line numbers, and carets under the span (none for a
    notebook finding, whose lines count within its cell, not the .ipynb file)."""
    if d.cell is not None or not 1 <= d.line <= len(lines):
        return ""
    last = min(max(d.end_line, d.line), len(lines), d.line + MAX_LINES - 1)
    width = len(str(last))
    gutter = " " * width
    out = [f"{gutter} |"]
    for number in range(d.line, last + 1):
        text = printable(lines[number - 1].expandtabs(1))
        out.append(f"{str(number).rjust(width)} | {text}".rstrip())
        start = d.column if number == d.line else 1 + len(text) - len(text.lstrip())
        end = d.end_column if number == d.end_line else len(text) + 1
        carets = "^" * max(1, end - start)
        label = f" {d.code}" if number == last else ""
        out.append(f"{gutter} | {' ' * (start - 1)}{carets}{label}")
    if last < d.end_line:
        out.append(f"{gutter} | ...")
    out.append(f"{gutter} |")
    return "\n".join(out) + "\n"


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path, *,
           unsafe_fixes: bool = False, show_summary: bool = True,
           sources: Mapping[str, str] | None = None) -> str:
    files = _Sources(base, sources or {})
    parts = [line(d, unsafe_fixes) + "\n" + snippet(d, files.get(d.path)) + "\n"
             for d in diagnostics]
    return "".join(parts) + (summary(diagnostics, unsafe_fixes) if show_summary else "")
