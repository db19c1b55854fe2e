"""Check one file from its bytes: read, decode, prefilter, then the engine and noqa comments.

This is the work a worker process does per file. It imports neither the configuration nor
libcst up front: a file that no rule applies to costs a read, a hash and a byte scan, and
the engine (with libcst) is imported only for a file that some rule may flag.
"""

from __future__ import annotations

import ast
import io
import symtable
import tokenize
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from memlint.cache import content_digest
from memlint.diagnostics import ENGINE_CODES, Diagnostic
from memlint.notebook import Notebook, NotebookError, is_notebook, read_notebook
from memlint.prefilter import applicable_rules
from memlint.rules.spec import RuleSpec, as_specs
from memlint.suppression import index_for, invalid_noqa_diagnostics

if TYPE_CHECKING:
    from memlint.fixer import FixResult
    from memlint.project.summary import ModuleSummary
    from memlint.project.view import ModuleView
    from memlint.rules.base import Rule

IO_ERROR = ("MEM996", "io-error")
PARSE_ERROR = ("MEM999", ENGINE_CODES["MEM999"])
INTERNAL_ERROR = ("MEM997", ENGINE_CODES["MEM997"])
OUT_OF_MEMORY = ("ran out of memory on this file (MEMLINT_WORKER_MEMORY_MB); "
                 "it is too large to analyse")


@dataclass(frozen=True)
class Task:
    """One file to lint: where to read it, how to show it, which codes are off for it."""

    path: str
    display: str
    ignored: frozenset[str] = frozenset()
    # The content hash of the cached result, if any: an unchanged file needs no lint.
    known_digest: str | None = None
    # "scan": the first pass of a run. A file no rule applies to is finished there; for the
    # others it reports which rules apply and, for the project model, the module's summary.
    # "lint": the second pass, with what the project knows that this module needs.
    # "fix": compute the file's fixes (--fix, --diff); the parent writes them.
    # "check": the syntax check of each file in ``batch`` (see ``defer_check``).
    phase: Literal["scan", "lint", "fix", "check"] = "lint"
    view: ModuleView | None = None
    # The content hash whose summary the parent already holds: not summarised again.
    summary_digest: str | None = None
    # The rules to run, as the scan found them (and the project model added): the lint pass
    # does not filter again.
    active: tuple[str, ...] | None = None
    # With phase "fix": unsafe fixes too (--unsafe-fixes).
    unsafe: bool = False
    # With phase "lint": the top-level statements' lines, as the scan found them.
    statements: tuple[tuple[int, int], ...] | None = None
    # With phase "lint": function bodies left out of the parse (memlint.pruning), found by
    # the scan for exactly the rules in ``active``.
    blank: tuple[tuple[int, int], ...] = ()
    # With phase "scan": a file the scan finishes without a parse is not syntax-checked there
    # (its result says ``unchecked``); the runner checks such files in batches, while the
    # project model is built and the workers would otherwise wait.
    defer_check: bool = False
    # With phase "check": (path, display) of the files to check; the result holds the
    # diagnostics of them all.
    batch: tuple[tuple[str, str], ...] = ()
    # With phase "lint": the worker that scanned the file (FileResult.lane), which may still
    # hold the stdlib tree it parsed (ScanTrees); None: any worker.
    lane: int | None = None


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Why the file was not linted (binary, ...), shown as a warning; None when it was.
    skipped: str | None = None
    digest: str | None = None
    # True when the content matched known_digest, so the cached result still holds.
    unchanged: bool = False
    # After a scan: the rules whose prefilter passed (None: the scan finished the file; ():
    # the text admitted it but no rule's code gate did, so it is linted only for rules the
    # project model adds), and the module summary when the project model may need one.
    active: tuple[str, ...] | None = None
    summary: ModuleSummary | None = None
    # After a scan that leaves rules to run: the top-level statements' lines (the lint pass
    # places its findings with them).
    statements: tuple[tuple[int, int], ...] | None = None
    # After a scan that leaves only function-local rules to run: the bodies the lint may
    # leave out of its parse (memlint.pruning).
    blank: tuple[tuple[int, int], ...] = ()
    # After a fix task: the fixed content and what remains (the parent writes it).
    fix: FixResult | None = None
    # After a scan with ``defer_check``: finished, but its syntax is still to be checked.
    unchecked: bool = False
    # The worker that produced the result (set by memlint.pool).
    lane: int | None = None
    # After a scan that leaves rules to run: whether the code calls a device copy itself
    # (memlint.gates.copies_in_code); None when not known.
    copies: bool | None = None


def file_diagnostic(path: str, code_name: tuple[str, str], message: str,
                    line: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic(path=path, line=line, column=column, end_line=line, end_column=column,
                      code=code_name[0], name=code_name[1], message=_one_line(message))


def _one_line(message: str) -> str:
    return " ".join(message.split())


def decode(source: bytes) -> str:
    """Source text per PEP 263 (BOM, coding cookie, else UTF-8); raises on failure."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    return source.decode(encoding)


class ScanTrees:
    """The stdlib trees a worker's scan parsed of files it left rules to run on, kept until
    their lint, which the runner sends to the same worker (``Task.lane``): the lint builds
    its tree (memlint.fastcst) without parsing the file again. A tree takes about thirty
    times its source in memory, so they are bounded by their sources' bytes, the oldest
    dropped first; the lint of a dropped one parses again."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: OrderedDict[tuple[str, str], tuple[ast.Module, int]] = OrderedDict()
        self._size = 0

    def keep(self, display: str, digest: str, tree: ast.Module, size: int) -> None:
        if size > self.budget:
            return
        while self._kept and self._size + size > self.budget:
            _, (_, dropped) = self._kept.popitem(last=False)
            self._size -= dropped
        previous = self._kept.pop((display, digest), None)
        if previous is not None:
            self._size -= previous[1]
        self._kept[(display, digest)] = (tree, size)
        self._size += size

    def take(self, display: str, digest: str) -> ast.Module | None:
        found = self._kept.pop((display, digest), None)
        if found is None:
            return None
        self._size -= found[1]
        return found[0]


# Sources of 4 MB: about 120 MB of stdlib trees per worker.
SCAN_TREES = ScanTrees(4_000_000)


def lint_bytes(display: str, source: bytes, rules: Sequence[RuleSpec | type[Rule]],
               ignored: frozenset[str] = frozenset(), *,
               imports_ready: Callable[[], None] | None = None,
               view: ModuleView | None = None,
               active_codes: tuple[str, ...] | None = None,
               statements: tuple[tuple[int, int], ...] | None = None,
               blank: tuple[tuple[int, int], ...] = (),
               tree: ast.Module | None = None) -> FileResult:
    """Everything memlint reports for one file's bytes, after suppression comments.
    ``tree``: the stdlib tree of ``source`` (not blanked) the scan parsed, if still held.

    Rule classes, and libcst with them, are imported only when the prefilter lets a rule
    through, so a file that no rule applies to costs a read, a byte scan and a syntax check.
    """
    if b"\0" in source:
        return FileResult(display, skipped="binary file (contains NUL bytes)")
    from memlint.gates import for_path

    candidates = [s for s in for_path(as_specs(rules), display, source)
                  if s.code not in ignored]
    active = (applicable_rules(source, candidates) if active_codes is None
              else [s for s in candidates if s.code in active_codes])
    if not active:
        return FileResult(display, syntax_errors(display, source, imports_ready))
    text = _decode_or_report(display, source)
    if isinstance(text, Diagnostic):
        return FileResult(display, [text])
    suppressions = index_for(text)
    if suppressions.file_blanket:
        return FileResult(display)
    if imports_ready is not None:
        imports_ready()  # a worker warming up in the background: let it finish importing
    from memlint.engine import lint_source
    from memlint.pruning import blanked

    classes = [spec.load() for spec in active]
    found = lint_source(display, blanked(source, blank), classes, project=view,
                        prefiltered=True, statements=statements,
                        tree=None if blank else tree)
    if blank and any(d.code == PARSE_ERROR[0] for d in found):
        # The whole file is the judge of its syntax (a body libcst cannot read, left out).
        found = lint_source(display, source, classes, project=view, prefiltered=True,
                            statements=statements)
    kept = suppressions.apply(found, unsuppressible=ENGINE_CODES)
    from memlint.rules.mem998_unused_noqa import resolve_unused

    kept = resolve_unused(suppressions, kept)  # MEM998 needs to know which comments worked
    kept += invalid_noqa_diagnostics(display, suppressions)  # warnings, split off by the CLI
    return FileResult(display, [
        d if "\n" not in d.message else Diagnostic(
            d.path, d.line, d.column, d.end_line, d.end_column, d.code, d.name,
            _one_line(d.message), d.fix, d.statement_line)
        for d in kept
    ])


def syntax_errors(display: str, source: bytes,
                  imports_ready: Callable[[], None] | None = None) -> list[Diagnostic]:
    """MEM999 for a file that no rule applies to, without paying for a libcst parse.

    CPython's own parser checks the file (it decodes the bytes itself, per PEP 263), about
    ten times faster than libcst builds a tree, and so does its symbol table (names declared
    ``global`` after use): ``symtable`` runs both without building the Python ``ast`` objects
    or generating bytecode (a quarter cheaper than ``compile`` on transformers). Only when it
    refuses does libcst get the final word, since it also accepts syntax newer than the
    running Python; the errors only code generation finds (``return`` outside a function, a
    starred assignment target) are left out because libcst accepts them too. Its message is
    the one a parsed file would get. The parser's warnings (invalid escapes) are the user's
    business.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            symtable.symtable(source, display, "exec")  # type: ignore[arg-type]  # bytes too
        return []
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    text = _decode_or_report(display, source)
    if isinstance(text, Diagnostic):
        return [text]
    if index_for(text).file_blanket:
        return []
    if imports_ready is not None:
        imports_ready()
    from memlint.engine import parse_or_report

    parsed = parse_or_report(display, source)
    return [parsed] if isinstance(parsed, Diagnostic) else []


def _decode_or_report(display: str, source: bytes) -> str | Diagnostic:
    try:
        return decode(source)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return file_diagnostic(display, PARSE_ERROR, f"cannot decode file: {reason}")


def read_source(path: str) -> bytes:
    """The one place linted files are opened: read-only, whole file."""
    with open(path, "rb") as handle:
        return handle.read()


def scan_bytes(display: str, source: bytes, rules: Sequence[RuleSpec],
               ignored: frozenset[str], summary_known: bool,
               imports_ready: Callable[[], None] | None = None, *,
               defer_check: bool = False, digest: str | None = None) -> FileResult:
    """The first pass over a file: finished at once when no rule applies, else the rules that
    do; the module summary of a file left with rules, and of one that may hold facts other
    modules need (:func:`~memlint.project.summary.needs_summary`, a package's ``__init__``).
    A file whose rules' words sit only in its text, not its code, is one no rule applies to:
    summarised in the parent if the project model asks (a module calls into it), so that a
    word in a docstring costs no summary (a third of a cold run's worker time on
    transformers went to such files).

    The stdlib tree parsed here serves three purposes: the summary, the rules' code gates
    (:mod:`memlint.gates`: a rule whose trigger words only sit in docstrings or comments is
    dropped before libcst parses the file) and, for a file left with no rule, its syntax check.
    """
    from memlint.astwalk import statement_lines
    from memlint.gates import code_facts, copies_in_code, for_path, gated
    from memlint.project.summary import needs_summary, parse_source, summary_of

    if b"\0" in source:
        return FileResult(display, skipped="binary file (contains NUL bytes)")
    active = applicable_rules(source, [s for s in for_path(rules, display, source)
                                       if s.code not in ignored])
    # A package's __init__ re-exports names its siblings import: always worth its summary.
    wanted = not summary_known and (needs_summary(source) or display.endswith("__init__.py"))
    tree = parse_source(source, display) if active or wanted else None
    copies = None
    if active and tree is not None:
        facts = code_facts(tree, source)
        active = gated(active, facts)
        copies = copies_in_code(facts)
        if not active:
            # Parsed, so no syntax error; the project model may still add a rule (active=()).
            # A rule's words in its text, and no code for the rule: summarised like a file
            # no rule applies to (the project model asks for it when a module calls into it).
            return FileResult(display, active=(),
                              summary=summary_of(tree) if wanted else None,
                              statements=statement_lines(tree.body))
    wanted = wanted or (bool(active) and not summary_known)  # linted: the model needs it
    summary = summary_of(tree) if wanted and tree is not None else None
    if not active:
        if tree is None and defer_check and not wanted:
            return FileResult(display, unchecked=True)
        errors = [] if tree is not None else syntax_errors(display, source, imports_ready)
        return FileResult(display, errors, summary=summary)
    blank: tuple[tuple[int, int], ...] = ()
    if tree is not None and all(s.function_local for s in active):
        from memlint.pruning import blank_ranges

        blank = blank_ranges(tree, source, active)
    if tree is not None and digest is not None and not blank:
        SCAN_TREES.keep(display, digest, tree, len(source))
    return FileResult(display, active=tuple(s.code for s in active), summary=summary,
                      statements=None if tree is None else statement_lines(tree.body),
                      blank=blank, copies=copies)


def lint_task(task: Task, rules: Sequence[RuleSpec], *,
              imports_ready: Callable[[], None] | None = None) -> FileResult:
    if task.phase == "check":
        return check_batch(task, imports_ready)
    try:
        source = read_source(task.path)
    except OSError as exc:
        return FileResult(task.display, [unreadable(task.display, exc)])
    if task.phase == "fix":
        return fix_task(task, source, rules, imports_ready)
    digest = content_digest(source)
    if task.phase == "lint" and digest == task.known_digest:
        return FileResult(task.display, digest=digest, unchanged=True)
    notebook: Notebook | None = None
    try:
        if is_notebook(task.path):
            # A notebook is linted as the program of its code cells, then mapped back.
            read = notebook_program(task.display, source)
            if isinstance(read, FileResult):
                read.digest = digest
                return read
            notebook = read
            source = notebook.program_bytes
        if task.phase == "scan":
            # A notebook is no importable module: the project model needs no summary of it.
            result = scan_bytes(task.display, source, rules, task.ignored,
                                digest == task.summary_digest or notebook is not None,
                                imports_ready,
                                defer_check=task.defer_check and notebook is None,
                                digest=None if notebook is not None else digest)
        else:
            tree = None if task.blank or notebook is not None else SCAN_TREES.take(
                task.display, digest)
            result = lint_bytes(task.display, source, rules, task.ignored,
                                imports_ready=imports_ready, view=task.view,
                                active_codes=task.active, statements=task.statements,
                                blank=task.blank, tree=tree)
        if notebook is not None:
            result.diagnostics = [notebook.to_cells(d) for d in result.diagnostics] + [
                replace(file_diagnostic(task.display, PARSE_ERROR,
                                        f"{message} (cell left out, the others linted)",
                                        line, column), cell=cell)
                for cell, line, column, message in notebook.broken]
    except Exception as exc:  # one file's failure must not stop the run (MemoryError too)
        result = FileResult(task.display, [failed_on(task.display, exc)])
    result.digest = digest
    return result


def unreadable(display: str, exc: OSError) -> Diagnostic:
    """MEM996 for a file that could not be read."""
    return file_diagnostic(display, IO_ERROR,
                           f"cannot read file: {exc.strerror or type(exc).__name__}")


def failed_on(display: str, exc: Exception) -> Diagnostic:
    """MEM997 for a file whose check raised: out of memory, or a bug of ours."""
    message = (OUT_OF_MEMORY if isinstance(exc, MemoryError)
               else f"internal error: {type(exc).__name__}: {exc}")
    return file_diagnostic(display, INTERNAL_ERROR, message)


def check_batch(task: Task, imports_ready: Callable[[], None] | None = None) -> FileResult:
    """The syntax checks a scan deferred (``Task.defer_check``), for many files in one task:
    one round trip to the parent for the lot, so that the whole batch can be sent while the
    parent is busy with the project model."""
    found: list[Diagnostic] = []
    for path, display in task.batch:
        found += check_file(path, display, imports_ready)
    return FileResult(task.display, found)


def check_file(path: str, display: str,
               imports_ready: Callable[[], None] | None = None) -> list[Diagnostic]:
    """One deferred syntax check: the file's syntax errors, or why it could not be read."""
    try:
        source = read_source(path)
    except OSError as exc:
        return [unreadable(display, exc)]
    try:
        return syntax_errors(display, source, imports_ready)
    except Exception as exc:  # one file's failure must not stop the run
        return [failed_on(display, exc)]


def fix_task(task: Task, source: bytes, rules: Sequence[RuleSpec],
             imports_ready: Callable[[], None] | None = None) -> FileResult:
    """A file's fixes, computed in the worker (under ``--file-timeout``, where a crash of the
    parser costs only this file); the parent only writes the bytes."""
    if imports_ready is not None:
        imports_ready()
    from memlint.fixer import fix_bytes

    enabled = [spec.load() for spec in rules if spec.code not in task.ignored]
    try:
        result = fix_bytes(task.path, source, enabled, unsafe=task.unsafe, display=task.display)
    except MemoryError:
        return FileResult(task.display, skipped=OUT_OF_MEMORY)
    except Exception as exc:  # one file's failure must not stop the run
        return FileResult(task.display, skipped=f"internal error: {type(exc).__name__}: {exc}")
    return FileResult(task.display, fix=result)


def notebook_program(display: str, source: bytes) -> Notebook | FileResult:
    """The notebook read from its bytes, or the result that says why it is not linted: a
    MEM999 for a file that is not an nbformat 4 notebook, a skip for another language."""
    try:
        notebook = read_notebook(source)
    except NotebookError as exc:
        return FileResult(display, [file_diagnostic(display, PARSE_ERROR, str(exc))])
    if notebook.language is not None and not notebook.language.lower().lstrip("i").startswith(
            "python"):  # python, python3, ipython3 ...
        return FileResult(display, skipped=f"a {notebook.language} notebook, not Python")
    return notebook
