"""MEM998 unused-noqa.

Whether a suppression comment silenced anything is only known once every other rule has
reported and the suppressions were applied, so this rule works in two steps:

1. the visitor reports every comment that names ``MEM`` codes in a suppression directive
   (a *candidate*);
2. after suppressions are applied, :func:`resolve_unused` keeps the candidates whose codes
   silenced nothing, narrows the message to those codes and, given the file's tree, attaches
   the fix that removes exactly them.

Run on its own (no suppression applied), every candidate stands with the fix removing all
of its codes, which is what the rule means when no other rule is enabled. Blanket
directives and codes of other linters (``E501``) are never reported: those comments may
serve another tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

import libcst as cst

from memlint.context import FileContext
from memlint.diagnostics import Diagnostic, FixSafety
from memlint.rules.base import Finding, Fix, Invalid, Rule, Valid
from memlint.suppression import _CODE, FILE_NOQA, IGNORE, NOQA, SuppressionIndex

CODE = "MEM998"
_CODE_RE = re.compile(_CODE)


def _is_ours(code: str) -> bool:
    return code.upper().startswith("MEM")


def _directives(text: str) -> list[re.Match[str]]:
    """Directive matches in one comment's text, in order (a file directive is the whole comment)."""
    whole = FILE_NOQA.match(text)
    if whole is not None:
        return [whole]
    found = list(NOQA.finditer(text)) + list(IGNORE.finditer(text))
    return sorted(found, key=lambda m: m.start())


def listed_codes(text: str) -> list[str]:
    """The MEM codes a comment's directives name, upper-cased, in order."""
    out: list[str] = []
    for match in _directives(text):
        for code in _CODE_RE.findall(match.group("codes") or ""):
            if _is_ours(code) and code.upper() not in out:
                out.append(code.upper())
    return out


def _message(codes: Iterable[str]) -> str:
    return "unused suppression for " + ", ".join(sorted(codes))


def rewrite_comment(text: str, unused: frozenset[str]) -> str | None:
    """``text`` with the ``unused`` codes taken out of its directives; None if nothing is left.

    A directive whose last code goes is removed whole: ``# noqa: MEM001`` must not become
    a bare ``# noqa``, which would silence everything.
    """
    pieces: list[str] = []
    cursor = 0
    for match in _directives(text):
        codes_text = match.group("codes") or ""
        kept = [c for c in _CODE_RE.findall(codes_text) if c.upper() not in unused]
        if not codes_text or len(kept) == len(_CODE_RE.findall(codes_text)):
            continue
        pieces.append(text[cursor:match.start()])
        if kept:
            start, end = match.span("codes")
            pieces.append(text[match.start():start] + ", ".join(kept) + text[end:match.end()])
        cursor = match.end()
    pieces.append(text[cursor:])
    rest = "".join(pieces).strip()
    # What is left of a comment like `# why`: drop the empty leading `#`.
    rest = re.sub(r"^#\s*(?=#)", "", rest).strip()
    if rest in ("", "#"):
        return None
    return rest if rest.startswith("#") else "# " + rest


def _comment_fix(context: FileContext, comment: cst.Comment, unused: frozenset[str]) -> Fix | None:
    new_text = rewrite_comment(comment.value, unused)
    if new_text is not None:
        return Fix(FixSafety.SAFE, {comment: comment.with_changes(value=new_text)})
    holder = context.analysis.tree.parent(comment)
    if isinstance(holder, cst.TrailingWhitespace):
        bare = holder.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        return Fix(FixSafety.SAFE, {holder: bare})
    if isinstance(holder, cst.EmptyLine):
        return Fix(FixSafety.SAFE, {holder: cst.RemovalSentinel.REMOVE})
    return None


def _unused_by_line(index: SuppressionIndex) -> dict[int, frozenset[str]]:
    out: dict[int, set[str]] = {}
    for suppression, codes in index.unused():
        listed = suppression.codes if codes is None else codes
        if listed is None:  # a blanket directive may serve another linter
            continue
        ours = {c for c in listed if _is_ours(c)}
        if ours:
            out.setdefault(suppression.line, set()).update(ours)
    return {line: frozenset(codes) for line, codes in out.items()}


def resolve_unused(index: SuppressionIndex, diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Keep the MEM998 candidates whose codes silenced nothing, after ``index.apply``."""
    unused = _unused_by_line(index)
    out: list[Diagnostic] = []
    for diagnostic in diagnostics:
        if diagnostic.code != CODE:
            out.append(diagnostic)
        elif diagnostic.line in unused:
            out.append(replace(diagnostic, message=_message(unused[diagnostic.line])))
    return out


def resolve_unused_findings(
    context: FileContext,
    index: SuppressionIndex,
    pairs: Sequence[tuple[Finding, Diagnostic]],
) -> list[tuple[Finding, Diagnostic]]:
    """:func:`resolve_unused` for the fixer: the kept candidates carry the fix for their codes."""
    unused = _unused_by_line(index)
    out: list[tuple[Finding, Diagnostic]] = []
    for finding, diagnostic in pairs:
        if diagnostic.code != CODE:
            out.append((finding, diagnostic))
            continue
        codes = unused.get(diagnostic.line)
        if codes is None or not isinstance(finding.node, cst.Comment):
            continue
        fix = _comment_fix(context, finding.node, codes)
        message = _message(codes)
        out.append((
            replace(finding, message=message, fix=fix),
            replace(diagnostic, message=message, fix=None if fix is None else fix.safety),
        ))
    return out


class UnusedNoqa(Rule):
    """
    ## What it does
    Flags `# noqa: MEMxxx`, `# memlint: ignore[MEMxxx]` and `# memlint: noqa: MEMxxx`
    comments whose codes silence nothing.

    ## Why is this bad?
    A suppression outlives the finding it was written for: the code gets fixed or moved,
    the comment stays, and later hides a real finding on that line. Stale comments also
    teach readers that the line has a problem it no longer has.

    Only memlint's own codes are checked: a bare `# noqa` and codes of other tools
    (`# noqa: E501`) may be used by another linter. A code of a rule that is not enabled
    counts as unused, as in ruff.

    ## Example
    ```python
    losses.append(loss.item())  # noqa: MEM001
    ```

    Use instead:
    ```python
    losses.append(loss.item())
    ```

    ## How to fix
    Delete the unused codes, or the whole comment when none is left.

    ## Fix safety
    The fix is safe: it removes only the unused codes (a directive whose last code goes is
    removed whole, never left as a bare `# noqa`), and keeps other codes and any other
    comment text.

    This rule is off by default; enable it with `select`.
    """

    reads_comments = True

    code = CODE
    name = "unused-noqa"
    message = "unused suppression"
    default_enabled = False
    # Only memlint codes can be unused here, and every such comment names one after its
    # directive on the same line (codes are read case-insensitively: mem001 counts).
    triggers = ("MEM", "mem", "Mem")
    requires = (("noqa", "NOQA", "Noqa", "NoQA", "memlint:"),)
    trigger_pattern = rb"(?i)(?:noqa|memlint:)[^\n]*mem[0-9]"
    fix_safety = FixSafety.SAFE
    valid = (
        Valid(
            """
            x = compute()  # noqa
            y = compute()  # noqa: E501
            s = "# noqa: MEM001"
            """
        ),
    )
    invalid = (
        Invalid(
            """
            total = 0.0  # noqa: MEM001
            z = 1  # memlint: ignore[MEM013]
            w = 2  # noqa: E501, MEM005  (legacy)
            """,
            lines=(2, 3, 4),
            fixed="""
            total = 0.0
            z = 1
            w = 2  # noqa: E501  (legacy)
            """,
        ),
        Invalid(
            """
            # memlint: noqa: MEM002
            import torch
            """,
            lines=(2,),
            fixed="""
            import torch
            """,
        ),
    )

    def visit_Comment(self, node: cst.Comment) -> None:
        codes = listed_codes(node.value)
        if codes:
            fix = _comment_fix(self.context, node, frozenset(codes))
            self.report(node, _message(codes), fix=fix)
