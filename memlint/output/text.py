"""``path:line:col: CODE message``: what editors, grep and humans read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic
from memlint.output.ruledoc import RuleInfo


def _escape(c: str) -> str:
    if "\udc80" <= c <= "\udcff":  # an undecodable byte of the name, kept by os.fsdecode
        return f"\\x{ord(c) - 0xDC00:02x}"
    return c if c.isprintable() else c.encode("unicode_escape").decode("ascii")


def printable(path: str) -> str:
    """A path as one printable line of valid Unicode, for every output format: control and
    line-separator characters (``\n``, ``\r``, U+2028, U+0085) are written as escapes, and
    so are the bytes of a name that is not valid UTF-8 (``caf\xe9.py``), so that one finding
    is always one line and any encoding (JSON, SARIF, a terminal) can carry it."""
    if path.isprintable():
        return path
    return "".join(_escape(c) for c in path)


def line(d: Diagnostic) -> str:
    measured = "" if d.measured is None else f" [{d.measured.describe()}]"
    note = "" if d.fix_problem is None else f" (fix not applied: {d.fix_problem})"
    return f"{printable(d.path)}:{d.location}: {d.code} {d.message}{measured}{note}"


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
