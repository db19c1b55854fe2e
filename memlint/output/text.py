"""``concise`` (also ``text``): ``path:line:col: CODE [*] message``, one finding per line,
what editors and grep read; ``[*]`` marks a finding ``--fix`` can fix, as in ruff."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlint.diagnostics import Diagnostic, FixSafety
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


def fixable(d: Diagnostic, unsafe_fixes: bool) -> bool:
    """Whether ``--fix`` (with ``--unsafe-fixes`` when given) would fix this finding; not
    when a fix was tried and could not be made."""
    if d.fix_problem is not None:
        return False
    return d.fix is FixSafety.SAFE or (d.fix is FixSafety.UNSAFE and unsafe_fixes)


def line(d: Diagnostic, unsafe_fixes: bool = False) -> str:
    mark = "[*] " if fixable(d, unsafe_fixes) else ""
    measured = "" if d.measured is None else f" [{d.measured.describe()}]"
    note = "" if d.fix_problem is None else f" (fix not applied: {d.fix_problem})"
    return f"{printable(d.path)}:{d.location}: {d.code} {mark}{d.message}{measured}{note}"


def summary(diagnostics: Sequence[Diagnostic], unsafe_fixes: bool = False) -> str:
    """The closing lines: the count, then what ``--fix`` would do, in ruff's words."""
    if not diagnostics:
        return "All checks passed.\n"
    count = len(diagnostics)
    out = f"Found {count} problem{'s' if count != 1 else ''}.\n"
    can = sum(fixable(d, unsafe_fixes) for d in diagnostics)
    hidden = 0 if unsafe_fixes else sum(d.fix is FixSafety.UNSAFE for d in diagnostics)
    hint = (f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
            "`--unsafe-fixes` option)" if hidden else "")
    if can:
        out += f"[*] {can} fixable with the `--fix` option{hint}.\n"
    elif hidden:
        out += f"No fixes available{hint}.\n"
    return out


def render(diagnostics: Sequence[Diagnostic], rules: Mapping[str, RuleInfo], base: Path, *,
           unsafe_fixes: bool = False, show_summary: bool = True) -> str:
    body = "".join(line(d, unsafe_fixes) + "\n" for d in diagnostics)
    return body + (summary(diagnostics, unsafe_fixes) if show_summary else "")


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
