"""Jupyter notebooks as memlint sees them: one Python program, and a map back to the cells.

The code cells of an nbformat 4 notebook are joined, in order, into the program they form
when run top to bottom, so facts cross cells (a list made in cell 2 and appended to in a
loop in cell 5 is one list). Each cell starts with a marker comment line, which lets a
fixed program be split back into cells. IPython syntax is masked line by line, keeping every
other line and column where it was: a statement-starting line with a line magic
(``%time``), shell escape (``!ls``), help (``?obj``, ``obj?``) or an assignment from one
(``files = !ls``) becomes ``pass`` (or ``files = None``); a cell whose cell magic runs
something other than Python (``%%bash``, ``%%html``, ...) is left out. Trailing ``;`` is
valid Python already.

Reading needs only the standard library (and no libcst): the file is parsed with
:mod:`json` and walked once more to find where each cell's ``source`` value lies in the
text, so a fix rewrites exactly those characters and every other byte of the file (its
indentation, key order, metadata, outputs, final newline) stays as it was.
"""

from __future__ import annotations

import ast
import json
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memlint.diagnostics import Diagnostic

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python that IPython runs in the kernel itself.
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "memit", "prun", "time", "timeit"})
# Ends each masked line, so a fixed program's masked lines can be found and restored.
MASK_TAG = "# ipython-escape"
_MARKER = "# <<memlint notebook cell {}>>"
_MARKER_LINE = re.compile(r"# <<memlint notebook cell (\d+)>>")

# Lines as Python counts them: ended by \n, \r\n or \r only (str.splitlines also splits at
# \f, \x1c, \u2028, ..., which Python source treats as ordinary characters).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_CELL_MAGIC = re.compile(r"[ \t]*%%(\w*)")
_ESCAPE = re.compile(r"(?P<indent>[ \t]*)(?:[%!?]|[\w.]+\?\??[ \t]*$)")
_ASSIGN_ESCAPE = re.compile(r"(?P<target>[ \t]*[\w.,\[\] \t*]+?=[ \t]*)[%!]")


class NotebookError(ValueError):
    """The file is not a notebook memlint can read; the message is one line."""


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


@dataclass(frozen=True)
class Cell:
    """One linted code cell: ``number`` is its 1-based place among all the notebook's cells
    (markdown included), as a reader counts them; ``first_line`` is where its text starts in
    the program."""

    number: int
    source: str
    first_line: int
    line_count: int
    masked: tuple[str, ...]  # the original lines that masking replaced, in order


@dataclass
class Notebook:
    """A read notebook: its text, the program of its code cells and the way back."""

    text: str
    program: str
    cells: list[Cell]
    # Per cell number: the (start, end) of its ``source`` value in ``text``, and the spans
    # of that value's list items (empty for a source written as one string).
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    items: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    skipped_cells: int = 0
    language: str | None = None
    # Code cells left out because they do not parse: (cell number, line, column, message).
    broken: list[tuple[int, int, int, str]] = field(default_factory=list)

    @property
    def program_bytes(self) -> bytes:
        return self.program.encode("utf-8")

    def locate(self, line: int) -> tuple[Cell, int] | None:
        """The cell holding a program line, and the line's 1-based number within it."""
        for cell in reversed(self.cells):
            if line >= cell.first_line:
                if line - cell.first_line < max(cell.line_count, 1):
                    return cell, line - cell.first_line + 1
                return None  # a marker line
        return None

    def to_cells(self, diagnostic: Diagnostic) -> Diagnostic:
        """A program diagnostic with cell-relative lines; one outside every cell keeps line
        1 of the file."""
        start = self.locate(diagnostic.line)
        if start is None:
            return replace(diagnostic, line=1, column=1, end_line=1, end_column=1,
                           statement_line=None)
        cell, line = start
        end = self.locate(diagnostic.end_line)
        if end is not None and end[0] is cell:
            end_line, end_column = end[1], diagnostic.end_column
        else:  # ends in a later cell (cannot for a statement): clamp to this cell's end
            end_line, end_column = line, diagnostic.column
        stmt = None if diagnostic.statement_line is None else self.locate(diagnostic.statement_line)
        return replace(diagnostic, line=line, end_line=end_line, end_column=end_column,
                       cell=cell.number,
                       statement_line=stmt[1] if stmt is not None and stmt[0] is cell else None)

    def file_position(self, cell_number: int, line: int, column: int) -> tuple[int, int]:
        """Where a cell's (line, column) lies in the notebook file itself, 1-based: inside
        the JSON string that holds that source line, escapes counted. What SARIF and GitHub
        annotations point at, so an editor opening the file lands on it (docs/notebooks.md)."""
        span = self.spans.get(cell_number)
        if span is None:
            return 1, 1
        items = self.items.get(cell_number)
        if items:
            index = min(max(line, 1), len(items)) - 1
            start, skip = items[index][0], max(line - 1 - index, 0)
        elif self.text.startswith('"', span[0]):
            start, skip = span[0], line - 1
        else:
            return self.text.count("\n", 0, span[0]) + 1, 1
        i = start + 1  # past the opening quote
        end = len(self.text)
        while skip and i < end and self.text[i] != '"':  # the line within a one-string source
            if self.text.startswith("\\n", i):
                skip -= 1
            i += 2 if self.text[i] == "\\" else 1
        remaining = column - 1
        while remaining > 0 and i < end and self.text[i] != '"':
            i += (6 if self.text[i + 1] == "u" else 2) if self.text[i] == "\\" else 1
            remaining -= 1
        line_start = self.text.rfind("\n", 0, i) + 1
        return self.text.count("\n", 0, i) + 1, i - line_start + 1

    def split(self, program: str) -> dict[int, str]:
        """Cell sources from a (fixed) program, masked lines restored; NotebookError when
        the program no longer has this notebook's cells in order, or a fix touched a masked
        line."""
        parts: dict[int, list[str]] = {}
        current: list[str] | None = None
        order: list[int] = []
        for line in lines_of(program):
            match = _MARKER_LINE.fullmatch(line.rstrip("\r\n"))
            if match is not None:
                number = int(match.group(1))
                order.append(number)
                current = parts.setdefault(number, [])
                continue
            if current is None:
                raise NotebookError("a fix moved code out of its cell")
            current.append(line)
        if order != [cell.number for cell in self.cells]:
            raise NotebookError("a fix moved code across cells")
        out: dict[int, str] = {}
        for cell in self.cells:
            lines = parts[cell.number]
            masked = iter(cell.masked)
            restored: list[str] = []
            for line in lines:
                if line.rstrip("\r\n").endswith(MASK_TAG):
                    original = next(masked, None)
                    if original is None:
                        raise NotebookError("a fix changed IPython syntax")
                    restored.append(original + line[len(line.rstrip("\r\n")):])
                else:
                    restored.append(line)
            if next(masked, None) is not None:
                raise NotebookError("a fix changed IPython syntax")
            text = "".join(restored)
            if not cell.source.endswith("\n") and text.endswith("\n"):
                text = text[:-1]  # the newline the program added after the cell's last line
            out[cell.number] = text
        return out

    def with_sources(self, sources: dict[int, str]) -> str:
        """The notebook text with the given cells' sources replaced and nothing else changed:
        each new value is written in the style of the one it replaces."""
        ascii_only = "\\u" in self.text and self.text.isascii()
        pieces: list[str] = []
        last = 0
        for number in sorted(sources, key=lambda n: self.spans[n][0]):
            old = next(c for c in self.cells if c.number == number).source
            if sources[number] == old:
                continue
            start, end = self.spans[number]
            pieces.append(self.text[last:start])
            pieces.append(self._render(number, sources[number], ascii_only))
            last = end
        pieces.append(self.text[last:])
        return "".join(pieces)

    def _render(self, number: int, source: str, ascii_only: bool) -> str:
        start, end = self.spans[number]
        old = self.text[start:end]
        if old.startswith('"'):
            return json.dumps(source, ensure_ascii=ascii_only)
        items = self.items.get(number, [])
        lines = source.splitlines(keepends=True)
        if items:
            opening = self.text[start + 1:items[0][0]]
            closing = self.text[items[-1][1]:end - 1]
            sep = (self.text[items[0][1]:items[1][0]] if len(items) > 1
                   else "," + opening if "\n" in opening else ", ")
        else:  # an empty list: indent one level deeper than the "source" key
            line_start = self.text.rfind("\n", 0, start) + 1
            key_indent = len(self.text[line_start:start]) - len(
                self.text[line_start:start].lstrip())
            unit = max(1, key_indent // 3)
            opening = "\n" + " " * (key_indent + unit)
            closing = "\n" + " " * key_indent
            sep = "," + opening
        if not lines:
            return "[]"
        body = sep.join(json.dumps(line, ensure_ascii=ascii_only) for line in lines)
        return "[" + opening + body + closing + "]"


def _statement_starts(lines: Sequence[str]) -> list[bool]:
    """For each line: does a new statement start there (not inside brackets, a string
    spanning lines or after a backslash)? Only such lines can be IPython escapes."""
    starts: list[bool] = []
    depth = 0
    quote: str | None = None  # an open triple-quoted string
    continued = False
    for line in lines:
        start = depth == 0 and quote is None and not continued
        starts.append(start)
        if start and (_ESCAPE.match(line) or _ASSIGN_ESCAPE.match(line)):
            continued = False
            continue  # a masked line: its text is not Python
        i, n = 0, len(line)
        continued = False
        while i < n:
            if quote is not None:
                if line.startswith(quote, i):
                    i += 3
                    quote = None
                    continue
                i += 2 if line[i] == "\\" else 1
                continue
            ch = line[i]
            if ch == "#":
                break
            if ch in "\"'":
                triple = line[i:i + 3]
                if triple in ('"""', "'''"):
                    quote = triple
                    i += 3
                    continue
                j = i + 1
                while j < n and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            elif ch == "\\" and line[i + 1:].strip() == "":
                continued = True
            i += 1
    return starts


def lines_of(text: str) -> list[str]:
    """The text's lines with their line endings, split where Python splits source lines."""
    return _LINE.findall(text)


def mask(source: str) -> tuple[str, tuple[str, ...]]:
    """The cell's text with IPython escapes replaced, and the replaced lines."""
    lines = lines_of(source)
    texts = [line.rstrip("\r\n") for line in lines]
    masked: list[str] = []
    out: list[str] = []
    for line, text, start in zip(lines, texts, _statement_starts(texts), strict=True):
        newline = line[len(text):]
        assign = _ASSIGN_ESCAPE.match(text) if start else None
        escape = _ESCAPE.match(text) if start else None
        if assign is not None:
            out.append(f"{assign.group('target')}None  {MASK_TAG}{newline}")
        elif escape is not None and text.strip():
            out.append(f"{escape.group('indent')}pass  {MASK_TAG}{newline}")
        else:
            out.append(line)
            continue
        masked.append(text)
    return "".join(out), tuple(masked)


def _syntax_error(text: str) -> tuple[int, int, str] | None:
    """Where and why a (masked) cell is not Python, by CPython's fast parser; top-level
    ``await`` is allowed, as IPython runs it."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape is the user's business
            compile(text, "<cell>", "exec", flags=flags, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno or 1, exc.offset or 1, f"cannot parse: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return 1, 1, f"cannot parse: {type(exc).__name__}: {exc}"
    return None


def _source_text(value: Any, number: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    raise NotebookError(f"not an nbformat 4 notebook: cell {number} has no text source")


def read_notebook(data: bytes) -> Notebook:
    """Read a notebook file's bytes; NotebookError (one line) when it is not valid JSON or
    not an nbformat 4 notebook."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"notebook is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"invalid notebook JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise NotebookError("invalid notebook JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise NotebookError("not an nbformat 4 notebook: the top level is not an object")
    version = document.get("nbformat")
    if version != 4 or isinstance(version, bool):
        raise NotebookError(f"not an nbformat 4 notebook (nbformat: {version!r})")
    cells = document.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError("not an nbformat 4 notebook: 'cells' is not a list of objects")
    metadata = document.get("metadata")
    language = None
    if isinstance(metadata, dict):
        info = metadata.get("language_info")
        kernel = metadata.get("kernelspec")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            language = info["name"]
        elif isinstance(kernel, dict) and isinstance(kernel.get("language"), str):
            language = kernel["language"]
    spans, items = _source_spans(text)
    notebook = Notebook(text=text, program="", cells=[], spans=spans, items=items,
                        language=language)
    program: list[str] = []
    line = 1
    for index, raw in enumerate(cells):
        number = index + 1
        if raw.get("cell_type") != "code":
            continue
        source = _source_text(raw.get("source", ""), number)
        magic = _CELL_MAGIC.match(source)
        if magic is not None and magic.group(1) not in PYTHON_CELL_MAGICS:
            notebook.skipped_cells += 1
            continue
        masked_text, masked = mask(source)
        error = _syntax_error(masked_text)
        if error is not None:  # a scratch cell that does not parse: the others still count
            notebook.broken.append((number, *error))
            continue
        if masked_text and not masked_text.endswith(("\n", "\r")):
            masked_text += "\n"
        count = len(lines_of(masked_text))
        program.append(_MARKER.format(number) + "\n")
        program.append(masked_text)
        notebook.cells.append(Cell(number, source, line + 1, count, masked))
        line += 1 + count
    notebook.program = "".join(program)
    if set(spans) < {c.number for c in notebook.cells}:  # pragma: no cover - json agreed
        raise NotebookError("not an nbformat 4 notebook: cell sources not found")
    return notebook


class _Walker:
    """Finds where ``cells[i].source`` (and its list items) lie in notebook text that
    :func:`json.loads` has already accepted."""

    _NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
    _SPACE = re.compile(r"[ \t\n\r]*")
    _STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: dict[int, tuple[int, int]] = {}
        self.items: dict[int, list[tuple[int, int]]] = {}

    def ws(self, i: int) -> int:
        match = self._SPACE.match(self.text, i)
        return i if match is None else match.end()

    def string(self, i: int) -> tuple[str, int]:
        """The string starting at ``i`` (decoded), and the index after it."""
        match = self._STRING.match(self.text, i)
        if match is None:  # pragma: no cover - json.loads accepted the text
            raise NotebookError("invalid notebook JSON")
        return str(json.loads(match.group())), match.end()

    def value(self, i: int, path: tuple[Any, ...]) -> int:
        """Skips the value at ``i``; returns the index after it."""
        i = self.ws(i)
        ch = self.text[i]
        if ch == '"':  # a value: only its end matters (outputs can be megabytes)
            match = self._STRING.match(self.text, i)
            if match is None:  # pragma: no cover - json.loads accepted the text
                raise NotebookError("invalid notebook JSON")
            return match.end()
        if ch == "{":
            i = self.ws(i + 1)
            if self.text[i] == "}":
                return i + 1
            while True:
                key, i = self.string(self.ws(i))
                i = self.ws(i) + 1  # the colon
                start = self.ws(i)
                end = self.value(start, (*path, key))
                if len(path) == 2 and path[0] == "cells" and key == "source":
                    self.spans[path[1] + 1] = (start, end)
                i = self.ws(end)
                if self.text[i] == "}":
                    return i + 1
                i += 1  # the comma
        if ch == "[":
            i = self.ws(i + 1)
            spans: list[tuple[int, int]] = []
            if self.text[i] == "]":
                self._items(path, spans)
                return i + 1
            index = 0
            while True:
                start = self.ws(i)
                end = self.value(start, (*path, index))
                spans.append((start, end))
                i = self.ws(end)
                index += 1
                if self.text[i] == "]":
                    self._items(path, spans)
                    return i + 1
                i += 1
        for literal in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
            if self.text.startswith(literal, i):
                return i + len(literal)
        match = self._NUMBER.match(self.text, i)
        if match is None:  # pragma: no cover - json.loads accepted the text
            raise NotebookError("invalid notebook JSON")
        return match.end()

    def _items(self, path: tuple[Any, ...], spans: list[tuple[int, int]]) -> None:
        if len(path) == 3 and path[0] == "cells" and path[2] == "source":
            self.items[path[1] + 1] = spans


def _source_spans(text: str) -> tuple[dict[int, tuple[int, int]], dict[int, list[tuple[int, int]]]]:
    """Where each cell's ``source`` value (and its list items) lies in the text."""
    walker = _Walker(text)
    try:
        walker.value(0, ())
    except (IndexError, ValueError, RecursionError) as exc:
        raise NotebookError(f"invalid notebook JSON: {exc}") from None
    return walker.spans, walker.items


_READ: dict[tuple[str, int, int], Notebook | None] = {}


def region_in_file(d: Diagnostic) -> tuple[int, int, int, int] | None:
    """A notebook diagnostic's region in the notebook file (start line and column, end line
    and column), for formats that point into files; None when it is no cell diagnostic or
    the notebook cannot be read again. Each version of a notebook is read once per process."""
    if d.cell is None:
        return None
    try:
        st = os.stat(d.path)
        key = (os.path.realpath(d.path), st.st_mtime_ns, st.st_size)
        if key not in _READ:
            with open(d.path, "rb") as handle:
                _READ[key] = read_notebook(handle.read())
    except OSError:
        return None
    except NotebookError:
        _READ[key] = None
    notebook = _READ[key]
    if notebook is None:
        return None
    start = notebook.file_position(d.cell, d.line, d.column)
    end = notebook.file_position(d.cell, d.end_line, d.end_column)
    return (*start, *end)
