"""``path:line:col: CODE message``: what editors, grep and humans read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo


def line(d: Diagnostic) -> str:
    return f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}"


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path) -> str:
    if not diagnostics:
        return "All checks passed.\n"
    count = len(diagnostics)
    body = "".join(line(d) + "\n" for d in diagnostics)
    return body + f"Found {count} problem{'s' if count != 1 else ''}.\n"


def statistics(diagnostics: Sequence[Diagnostic]) -> list[tuple[int, str, str]]:
    """(count, code, name) per code, most frequent first, as ``--statistics`` lists them."""
    counts = Counter((d.code, d.name) for d in diagnostics)
    return sorted(((n, code, name) for (code, name), n in counts.items()),
                  key=lambda row: (-row[0], row[1]))


def render_statistics(diagnostics: Sequence[Diagnostic]) -> str:
    rows = statistics(diagnostics)
    if not rows:
        return ""
    width = max(len(str(n)) for n, _, _ in rows)
    return "".join(f"{str(n).rjust(width)}  {code}  {name}\n" for n, code, name in rows)
