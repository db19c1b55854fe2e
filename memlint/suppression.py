"""Suppression comments: which findings the author silenced, and which comments did work.

Comments are read past string literals (:func:`_comments`), so ``"# noqa"`` inside one
never counts. Spellings (case-insensitive, as in ruff and flake8):

- ``# noqa`` silences every finding on its line; ``# noqa: MEM001, MEM002`` only those codes;
- ``# memlint: ignore[MEM001]`` silences the listed codes on its line;
- ``# memlint: noqa`` (optionally ``: MEM001``) on a line of its own covers the whole file.

A line comment applies to a finding reported on that line or on the first line of the
statement that contains it. :class:`SuppressionIndex` records which comment silenced which
code, so an unused-suppression check can be built on :meth:`SuppressionIndex.unused`.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from memlint.diagnostics import Diagnostic

_CODE = r"[A-Za-z]+[0-9]+"
_CODE_LIST = rf"{_CODE}(?:\s*,?\s*{_CODE})*"
NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
IGNORE = re.compile(rf"#\s*memlint:\s*ignore\[\s*(?P<codes>{_CODE_LIST})?\s*,?\s*\]", re.IGNORECASE)
FILE_NOQA = re.compile(
    rf"^#\s*memlint:\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?\s*(?:#.*)?$", re.IGNORECASE
)
# What looks like a code list but is not one (ruff warns about the same spellings): noqa
# then a code without a colon, a space before the colon, or a colon with no code after it.
# Such a comment silences nothing: read as a blanket noqa it would hide every finding.
MALFORMED_NOQA = re.compile(
    r"#\s*noqa(?:\s+:|\s+(?-i:[A-Z]+[0-9]+)\b|:(?!\s*[A-Za-z]+[0-9]+))", re.IGNORECASE)
INVALID_NOQA = ("MEM995", "invalid-noqa")
INVALID_NOQA_MESSAGE = ("invalid `# noqa` directive: expected `:` followed by a "
                        "comma-separated list of codes (e.g. `# noqa: MEM001, MEM002`); "
                        "it silences nothing")
# Any directive contains one of these words: lets files without one skip tokenizing.
MARKER = re.compile(r"noqa|memlint", re.IGNORECASE)


@dataclass(frozen=True)
class Suppression:
    """One suppression comment. ``codes`` is None for a blanket ``# noqa``."""

    line: int
    column: int  # 1-based column of the directive's ``#``
    end_column: int  # 1-based column just past the directive
    kind: str  # "noqa", "ignore" or "file"
    codes: frozenset[str] | None

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


@dataclass
class SuppressionIndex:
    """Every suppression comment of one file and, after :meth:`apply`, what each one silenced."""

    comments: list[Suppression] = field(default_factory=list)
    used: dict[Suppression, set[str]] = field(default_factory=dict)
    # (line, 1-based column) of each malformed noqa comment; it silences nothing.
    invalid: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_line: dict[int, list[Suppression]] = {}
        self._file: list[Suppression] = []
        for comment in self.comments:
            if comment.kind == "file":
                self._file.append(comment)
            else:
                self._by_line.setdefault(comment.line, []).append(comment)

    @property
    def file_blanket(self) -> bool:
        """True when the whole file is switched off: no need to lint it at all."""
        return any(c.codes is None for c in self._file)

    def matching(self, diagnostic: Diagnostic) -> Suppression | None:
        for comment in self._file:
            if comment.covers(diagnostic.code):
                return comment
        lines = [diagnostic.line]
        if diagnostic.statement_line is not None and diagnostic.statement_line != diagnostic.line:
            lines.append(diagnostic.statement_line)
        for line in lines:
            for comment in self._by_line.get(line, ()):
                if comment.covers(diagnostic.code):
                    return comment
        return None

    def apply(self, diagnostics: Iterable[Diagnostic], *,
              unsuppressible: Iterable[str] = ()) -> list[Diagnostic]:
        """The diagnostics no comment silences; records each comment's use as a side effect."""
        never = frozenset(unsuppressible)
        kept: list[Diagnostic] = []
        for diagnostic in diagnostics:
            comment = None if diagnostic.code in never else self.matching(diagnostic)
            if comment is None:
                kept.append(diagnostic)
            else:
                self.used.setdefault(comment, set()).add(diagnostic.code)
        return kept

    def unused(self) -> list[tuple[Suppression, frozenset[str] | None]]:
        """Comments (or the codes listed in them) that silenced nothing in the last apply.

        Each entry is the comment and the unused codes it lists; None means the whole comment
        silenced nothing.
        """
        out: list[tuple[Suppression, frozenset[str] | None]] = []
        for comment in self.comments:
            used = self.used.get(comment)
            if not used:
                out.append((comment, None))
            elif comment.codes is not None and comment.codes - used:
                out.append((comment, frozenset(comment.codes - used)))
        return out


def _codes(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset()
    return frozenset(c.upper() for c in re.findall(_CODE, text))


# A string literal (prefix, then a triple- or single-quoted body, escapes skipped) or a
# comment: read left to right, a `#` inside a string is part of the string.
_LEXEME = re.compile(
    r"(?P<prefix>(?<!\w)[rRbBuUfF]{1,2})?(?:'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")'
    r"|(?P<comment>#[^\n]*)",
    re.DOTALL,
)


def _comments(text: str) -> Iterator[tuple[int, int, str, bool]]:
    """(line, 0-based column, comment text, alone on its line) for each comment.

    Read with one regular expression over string literals and comments, about ten times
    faster than :mod:`tokenize`, whose comments it gives on real code (the tests compare the
    two). The one place they part is an f-string that reuses its quotes inside (``f"{d["#"]}"``,
    valid since Python 3.12): a directive on a line with an f-string is read with
    :mod:`tokenize` (:func:`_tokenized_comments`).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines
    found: list[tuple[int, int, str, bool]] = []
    f_string_lines: set[int] = set()
    line, last = 1, 0
    for match in _LEXEME.finditer(text):
        start = match.start()
        line += text.count("\n", last, start)
        last = start
        comment = match.group("comment")
        if comment is None:
            prefix = match.group("prefix")
            if prefix is not None and prefix in _F_PREFIXES:
                f_string_lines.update(range(line, line + match.group().count("\n") + 1))
            continue
        line_start = text.rfind("\n", 0, start) + 1
        found.append((line, start - line_start, comment, not text[line_start:start].strip()))
    if f_string_lines and any(line in f_string_lines and MARKER.search(comment)
                              for line, _, comment, _ in found):
        yield from _tokenized_comments(text)
        return
    yield from found


# f, rf, fr in any case.
_F_PREFIXES = frozenset(p for f in "fF"
                        for p in (f, *(f + r for r in "rR"), *(r + f for r in "rR")))


def _tokenized_comments(text: str) -> Iterator[tuple[int, int, str, bool]]:
    """:func:`_comments` as :mod:`tokenize` finds them.

    A file that tokenize rejects part way yields the comments before the error: the linter
    reports that file as a parse error anyway.
    """
    lines_with_code: set[int] = set()
    f_string_lines: set[int] = set()
    found: list[tuple[int, int, str]] = []
    # Universal newlines: a CR-only file has lines, as Python reads it, not one long comment.
    tokens = tokenize.generate_tokens(io.StringIO(text, newline=None).readline)
    try:
        for tok in tokens:
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.start[1], tok.string))
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                  tokenize.DEDENT, tokenize.ENDMARKER):
                lines_with_code.update(range(tok.start[0], tok.end[0] + 1))
                if tok.type == tokenize.STRING and "f" in _prefix(tok.string):
                    f_string_lines.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    if _OLD_TOKENIZER and any(line in f_string_lines for line, _, _ in found) and (
            not _compiles(text)):
        # Before 3.12, tokenize splits an f-string that reuses its quotes inside
        # (``f"{d["#..."]}"``, valid since 3.12) and takes its rest for a comment.
        yield from _tree_comments(text)
        return
    for line, col, comment in found:
        yield line, col, comment, line not in lines_with_code


_OLD_TOKENIZER = sys.version_info < (3, 12)


def _prefix(token: str) -> str:
    return token[: len(token) - len(token.lstrip("rRbBfFuU"))].lower()


def _compiles(text: str) -> bool:
    try:
        compile(text, "<memlint>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError:
        return False
    except (ValueError, RecursionError, MemoryError):
        return True  # not a question of syntax: tokenize's comments stand
    return True


def _tree_comments(text: str) -> Iterator[tuple[int, int, str, bool]]:
    """The comments libcst finds (it parses the newest syntax): only real ones."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, WhitespaceInclusivePositionProvider

    try:
        module = cst.parse_module(text)
    except Exception:  # not Python at all: reported as a parse error, nothing to suppress
        return
    holders: list[tuple[cst.Comment, bool]] = []

    class Collect(cst.CSTVisitor):
        def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
            if node.comment is not None:
                holders.append((node.comment, True))

        def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
            if node.comment is not None:
                holders.append((node.comment, False))

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(WhitespaceInclusivePositionProvider)
    wrapper.module.visit(Collect())
    for comment, alone in sorted(holders, key=lambda h: (positions[h[0]].start.line,
                                                          positions[h[0]].start.column)):
        start = positions[comment].start
        yield start.line, start.column, comment.value, alone


def parse_suppressions(text: str,
                       invalid: list[tuple[int, int]] | None = None) -> list[Suppression]:
    """Every suppression directive in a file's comments, in source order; the position of
    each malformed ``# noqa`` goes to ``invalid``."""
    out: list[Suppression] = []
    for line, col, comment, alone in _comments(text):
        file_match = FILE_NOQA.match(comment) if alone else None
        if file_match is not None:
            codes = _codes(file_match.group("codes"))
            out.append(Suppression(line, col + 1, col + 1 + file_match.end(), "file",
                                   codes or None))
            continue
        for match in NOQA.finditer(comment):
            if MALFORMED_NOQA.match(comment, match.start()):
                if invalid is not None:
                    invalid.append((line, col + 1 + match.start()))
                continue
            codes = _codes(match.group("codes"))
            out.append(Suppression(line, col + 1 + match.start(), col + 1 + match.end(),
                                   "noqa", codes or None))
        for match in IGNORE.finditer(comment):
            out.append(Suppression(line, col + 1 + match.start(), col + 1 + match.end(),
                                   "ignore", _codes(match.group("codes"))))
    return out


def index_for(text: str) -> SuppressionIndex:
    """The suppression index of a file; cheap when the file mentions no directive at all."""
    if MARKER.search(text) is None:
        return SuppressionIndex()
    invalid: list[tuple[int, int]] = []
    return SuppressionIndex(parse_suppressions(text, invalid), invalid=invalid)


def invalid_noqa_diagnostics(path: str, index: SuppressionIndex) -> list[Diagnostic]:
    """Malformed ``# noqa`` comments as MEM995 records: the command line prints them as
    warnings (they never fail a run), as ruff warns about the same spellings."""
    return [Diagnostic(path, line, col, line, col, INVALID_NOQA[0], INVALID_NOQA[1],
                       INVALID_NOQA_MESSAGE) for line, col in index.invalid]
