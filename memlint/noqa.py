"""``--add-noqa``: silence every current finding with a ``# noqa: CODE`` comment on its line,
so a codebase adopts memlint in one command and only new code is held to it (as ruff's
``--add-noqa``).

A comment goes where Python allows one and where memlint looks for it: the end of the
finding's line, or, when that line ends inside a multi-line string or a backslash
continuation, the end of the statement line the finding belongs to. An existing
``# noqa: ...`` on that line gains the new codes; a blanket ``# noqa`` already silences
everything. Files are written the way ``--fix`` writes them.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from pathlib import Path

from memlint.diagnostics import ENGINE_CODES, Diagnostic
from memlint.suppression import MALFORMED_NOQA, NOQA

# Codes a noqa cannot or should not silence: a broken file, and the unused-noqa rule.
_NEVER = frozenset({*ENGINE_CODES, "MEM998"})


def _uncommentable(text: str) -> set[int]:
    """Lines whose end lies inside a token (a multi-line string) or continues with ``\\``."""
    out: set[int] = set()
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if line.rstrip().endswith("\\"):
            out.add(number)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.end[0] > tok.start[0] and tok.type != tokenize.NL:
                out.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _comment_line(d: Diagnostic, blocked: set[int]) -> int | None:
    for candidate in (d.line, d.statement_line):
        if candidate is not None and candidate not in blocked:
            return candidate
    return None


def _with_codes(line: str, codes: Iterable[str]) -> str | None:
    """The line with a noqa listing ``codes`` too; None when it already silences them."""
    body, ending = (line[:-2], "\r\n") if line.endswith("\r\n") else (
        (line[:-1], line[-1]) if line.endswith(("\n", "\r")) else (line, ""))
    match = None
    for found in NOQA.finditer(body):
        if "#" in body[:found.start() + 1] and not MALFORMED_NOQA.match(body, found.start()):
            match = found
    if match is not None and match.group("codes") is None:
        return None  # a blanket noqa: nothing to add
    if match is not None:
        have = re.findall(r"[A-Za-z]+[0-9]+", match.group("codes"))
        new = [c for c in sorted(set(codes)) if c.upper() not in {h.upper() for h in have}]
        if not new:
            return None
        listed = ", ".join([*have, *new])
        return f"{body[:match.start()]}# noqa: {listed}{body[match.end():]}{ending}"
    spacer = "" if not body.strip() else "  "
    return f"{body.rstrip()}{spacer}# noqa: {', '.join(sorted(set(codes)))}{ending}"


def noqa_source(text: str, diagnostics: Sequence[Diagnostic]) -> tuple[str, int]:
    """The text with noqa comments added for ``diagnostics``, and how many were added."""
    blocked = _uncommentable(text)
    wanted: dict[int, set[str]] = {}
    for d in diagnostics:
        if d.code in _NEVER:
            continue
        line = _comment_line(d, blocked)
        if line is not None:
            wanted.setdefault(line, set()).add(d.code)
    lines = text.splitlines(keepends=True)
    added = 0
    for number, codes in wanted.items():
        if number > len(lines):
            continue
        new = _with_codes(lines[number - 1], codes)
        if new is not None:
            lines[number - 1] = new
            added += 1
    return "".join(lines), added


def add_noqa(files: Sequence[Path], diagnostics: Sequence[Diagnostic],
             cwd: Path | None = None) -> tuple[int, list[str]]:
    """Add noqa comments in place; returns the number added and a warning per file left
    alone. Comments in a file with a malformed ``# noqa`` are still added on other lines."""
    from memlint.filecheck import decode
    from memlint.fixer import FileChangedError, write_if_unchanged
    from memlint.runner import display_path

    here = cwd or Path.cwd()
    by_display = {display_path(path, here): path for path in files}
    grouped: dict[str, list[Diagnostic]] = {}
    notebooks: set[str] = set()
    for d in diagnostics:
        if d.cell is not None:  # positions within a cell, not lines of the .ipynb file
            notebooks.add(d.path)
            continue
        grouped.setdefault(d.path, []).append(d)
    total, warnings = 0, []
    for display in sorted(notebooks):
        warnings.append(f"{display}: no noqa added: add `# noqa: CODE` in the notebook's "
                        "cells themselves")
    for display, found in sorted(grouped.items()):
        path = by_display.get(display)
        if path is None:
            continue
        try:
            original = path.read_bytes()
            text = decode(original)
            encoding = tokenize.detect_encoding(io.BytesIO(original).readline)[0]
            new_text, added = noqa_source(text, found)
            if added:
                write_if_unchanged(path, original, new_text.encode(encoding))
        except (OSError, UnicodeError, SyntaxError, FileChangedError) as exc:
            warnings.append(f"{display}: no noqa added: {exc}")
            continue
        total += added
    return total, warnings
