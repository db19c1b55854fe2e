"""Apply the fixes rules computed, ruff's way: safe by default, unsafe on request.

Rules compute fixes as node replacements on the libcst tree; each becomes an edit of the
file's own text where the replaced node stands, so every byte outside the fixed code stays
(libcst itself does not round-trip every file byte for byte). Each pass applies every fix
that does not overlap an earlier one and keeps the file valid (a fix that would not is
skipped alone and reported), then lints the result again; passes repeat until nothing is
left to fix (bounded), which makes a second ``--fix`` a no-op. Fixes are computed in the
workers (:mod:`memlint.filecheck`); this process writes each file atomically and only if
nobody changed it while memlint was working.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import difflib
import os
import re
import signal
import stat
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst
from libcst._nodes.internal import CodegenState  # see _SpanRecorder

from memlint.config import Settings
from memlint.context import FileContext
from memlint.diagnostics import ENGINE_CODES, Diagnostic, FixSafety
from memlint.engine import decoded_source, lint_module, lint_source, parse
from memlint.filecheck import FileResult, Task
from memlint.notebook import is_notebook
from memlint.pool import DEFAULT_FILE_TIMEOUT, Pool
from memlint.positions import render_top_down
from memlint.prefilter import applicable_rules
from memlint.rules.base import Finding, Fix, Rule
from memlint.rules.mem998_unused_noqa import resolve_unused_findings
from memlint.rules.spec import RuleSpec, as_specs
from memlint.runner import RunResult, display_path
from memlint.suppression import index_for

if TYPE_CHECKING:
    from memlint.project.view import ModuleView

# Enough for fixes that uncover further fixes; a rule whose fix keeps re-firing stops here.
MAX_PASSES = 10

Pair = tuple[Finding, Diagnostic]
# Decides which findings of a file stand; by default, what a lint run would report.
FindingFilter = Callable[[FileContext, list[Pair]], list[Pair]]


def keep_all(context: FileContext, pairs: list[Pair]) -> list[Pair]:
    return pairs


def standing_findings(context: FileContext, pairs: list[Pair]) -> list[Pair]:
    """The findings a lint run would report: suppression comments applied, MEM998 resolved.

    A suppressed finding is never fixed, and an unused-noqa fix removes only the codes that
    silenced nothing.
    """
    index = index_for(context.source)
    kept = {id(d) for d in index.apply([d for _, d in pairs], unsuppressible=ENGINE_CODES)}
    return resolve_unused_findings(context, index, [(f, d) for f, d in pairs if id(d) in kept])


class FileChangedError(Exception):
    """The file on disk is no longer the content the fixes were computed from."""


@dataclass
class FixResult:
    path: str
    original: bytes
    fixed: bytes
    applied: int = 0
    remaining: list[Diagnostic] = field(default_factory=list)
    # Why fixing stopped early (an internal error), if it did.
    problem: str | None = None
    # Diagnostics whose fix could not be made, each with the reason (``fix_problem``).
    failed: list[Diagnostic] = field(default_factory=list)
    # Each pass's edits of the text it started from: (start, end, new text), in characters.
    passes: list[list[tuple[int, int, str]]] = field(default_factory=list)
    encoding: str = "utf-8"
    # A notebook: (cell number, old source, new source) of each changed cell, for the diff.
    cells: list[tuple[int, str, str]] | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def allowed(fix: Fix, unsafe: bool) -> bool:
    return fix.safety is FixSafety.SAFE or unsafe


def non_overlapping(context: FileContext, fixes: Sequence[Fix]) -> list[Fix]:
    """Fixes whose replaced nodes neither coincide with nor nest in an earlier chosen fix's.

    The rest wait for the next pass, where they are recomputed on the updated tree.
    """
    tree = context.analysis.tree
    claimed: set[cst.CSTNode] = set()
    claimed_ancestors: set[cst.CSTNode] = set()
    chosen: list[Fix] = []
    for fix in fixes:
        nodes = list(fix.replacements)
        clash = any(
            n in claimed or n in claimed_ancestors or any(a in claimed for a in tree.ancestors(n))
            for n in nodes
        )
        if clash:
            continue
        chosen.append(fix)
        for n in nodes:
            claimed.add(n)
            claimed_ancestors.update(tree.ancestors(n))
    return chosen


def _compiles(source: bytes) -> bool:
    with warnings.catch_warnings():
        # An invalid escape in the user's code is not our business here.
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def _parses(source: bytes) -> bool:
    try:
        parse(source)
    except Exception:  # any failure means the fix broke the file
        return False
    return True


NOT_LOCATED = "the code to replace could not be located in the file"


def _not_compiling() -> str:
    return (f"the fixed code would not compile under Python "
            f"{sys.version_info.major}.{sys.version_info.minor}")


@dataclass(frozen=False)
class _SpanRecorder(CodegenState):
    """Renders a module as libcst does, noting where the wanted nodes' code starts and ends
    and the indentation in force there (what a multi-line replacement must continue with).
    libcst's renderer is private API, but no public one tells both."""

    wanted: frozenset[cst.CSTNode] = frozenset()
    position: int = 0
    spans: dict[cst.CSTNode, tuple[int, int, tuple[str, ...]]] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)

    def add_indent_tokens(self) -> None:
        super().add_indent_tokens()
        self.position += sum(len(t) for t in self.indent_tokens)

    def add_token(self, value: str) -> None:
        super().add_token(value)
        self.position += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(self.position)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node in self.wanted and node not in self.spans:
            self.spans[node] = (start, self.position, tuple(self.indent_tokens))


_NEWLINE = re.compile(r"\r\n|\r|\n")


class _LineMap:
    """Offsets in libcst's rendering of a module to offsets in the file's own text.

    libcst does not reproduce every file byte for byte (a form feed in an indentation, the
    last carriage return of a CR-only file), so edits are made on the file's text, not on a
    regenerated module: where a line differs only in its indentation, columns shift by the
    difference; anything else cannot be mapped.
    """

    def __init__(self, rendered: str, original: str) -> None:
        self.rendered, self.original = rendered, original
        self.r_starts = self._starts(rendered)
        self.o_starts = self._starts(original)

    @staticmethod
    def _starts(text: str) -> list[int]:
        return [0, *(m.end() for m in _NEWLINE.finditer(text))]

    @staticmethod
    def _content(text: str, starts: list[int], line: int) -> str:
        end = starts[line + 1] if line + 1 < len(starts) else len(text)
        return text[starts[line]:end].rstrip("\r\n")

    def map(self, offset: int) -> int | None:
        line = bisect.bisect_right(self.r_starts, offset) - 1
        if offset == len(self.rendered) and offset == self.r_starts[line]:
            # The end of a rendering that stops after a line break (the module rendered
            # only down to the fixed code): the start of the same line in the file.
            return self.o_starts[line] if line < len(self.o_starts) else len(self.original)
        if line >= len(self.o_starts):
            return len(self.original) if offset == len(self.rendered) else None
        col = offset - self.r_starts[line]
        r_line = self._content(self.rendered, self.r_starts, line)
        o_line = self._content(self.original, self.o_starts, line)
        r_lead = len(r_line) - len(r_line.lstrip(" \t\f"))
        o_lead = len(o_line) - len(o_line.lstrip(" \t\f"))
        if r_line == o_line:
            return self.o_starts[line] + col
        if r_line[r_lead:] != o_line[o_lead:]:
            return None
        if col == 0:
            return self.o_starts[line]
        if col < r_lead:
            return None
        return self.o_starts[line] + o_lead + col - r_lead


Edit = tuple[int, int, str]


def _fix_edits(module: cst.Module, text: str, fixes: Sequence[Fix]) -> list[list[Edit] | str]:
    """Each fix as text edits on the file's own text, or why it cannot be made.

    A node's replacement is rendered with the indentation in force where the node stands, and
    the node's own code must be found, unchanged, where its position says it is.
    """
    wanted = frozenset(n for fix in fixes for n in fix.replacements)
    state = _SpanRecorder(default_indent=module.default_indent,
                          default_newline=module.default_newline, wanted=wanted)
    # Rendered from the top only as far as the fixed code.
    render_top_down(module, state, lambda _statement: len(state.spans) == len(wanted))
    rendered = "".join(state.tokens)
    lines = _LineMap(rendered, text)
    out: list[list[Edit] | str] = []
    for fix in fixes:
        edits: list[Edit] = []
        for node, replacement in fix.replacements.items():
            span = state.spans.get(node)
            if span is None:
                break
            r_start, r_end, indents = span
            start, end = lines.map(r_start), lines.map(r_end)
            if start is None or end is None or text[start:end] != rendered[r_start:r_end]:
                break
            if isinstance(replacement, cst.RemovalSentinel):
                edits.append((start, end, ""))
                continue
            render = CodegenState(default_indent=module.default_indent,
                                  default_newline=module.default_newline,
                                  indent_tokens=[t.replace("\f", "") for t in indents])
            replacement._codegen(render)
            edits.append((start, end, "".join(render.tokens)))
        else:
            out.append(edits)
            continue
        out.append(NOT_LOCATED)
    return out


def _splice(text: str, edits: Sequence[Edit]) -> str:
    pieces: list[str] = []
    cursor = 0
    for start, end, new in sorted(edits):
        pieces += [text[cursor:start], new]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _apply_verified(module: cst.Module, current: bytes, original: bytes,
                    fixes: Sequence[Fix]) -> tuple[bytes, list[Fix], dict[int, str], list[Edit]]:
    """The fixes that can be made and keep the file valid, applied together; the others,
    by index, with the reason. One fix that would break the file costs no other fix.

    A fix is kept when the result parses, and compiles under the running Python whenever
    the file did before (a fix must not turn a working file into one that cannot run).
    """
    try:
        text = current.decode(module.encoding)
    except (LookupError, UnicodeDecodeError):
        return current, [], dict.fromkeys(range(len(fixes)), NOT_LOCATED), []
    bom = ""
    if text.startswith("\ufeff") and not module.code.startswith("\ufeff"):
        bom, text = "\ufeff", text[1:]
    failed: dict[int, str] = {}
    ready: list[tuple[int, list[Edit]]] = []
    for index, edits in enumerate(_fix_edits(module, text, fixes)):
        if isinstance(edits, str):
            failed[index] = edits
            continue
        try:
            for _, _, new in edits:
                new.encode(module.encoding)
        except UnicodeEncodeError:
            failed[index] = f"the fix cannot be written in the file's encoding ({module.encoding})"
            continue
        ready.append((index, edits))
    must_compile = _compiles(original)

    def build(chosen: Sequence[tuple[int, list[Edit]]]) -> bytes:
        edits = [e for _, fix_edits in chosen for e in fix_edits]
        return (bom + _splice(text, edits)).encode(module.encoding)

    def problem(candidate: bytes) -> str | None:
        if not _parses(candidate):
            return "the fixed code would not parse"
        if must_compile and not _compiles(candidate):
            return _not_compiling()
        return None

    candidate = build(ready)
    if ready and problem(candidate) is not None:
        # Some fix breaks the file: keep the fixes one by one, each checked with the ones
        # kept before it.
        kept: list[tuple[int, list[Edit]]] = []
        for item in ready:
            reason = problem(build([*kept, item]))
            if reason is None:
                kept.append(item)
            else:
                failed[item[0]] = reason
        ready = kept
        candidate = build(ready)
    return candidate, [fixes[i] for i, _ in ready], failed, [e for _, es in ready for e in es]


def fix_source(
    path: str,
    source: bytes,
    rules: Sequence[type[Rule]],
    *,
    unsafe: bool = False,
    keep: FindingFilter = standing_findings,
    project: ModuleView | None = None,
) -> FixResult:
    """Fix ``source`` in memory; the result says what changed and which diagnostics remain.

    Every fix is an edit of the file's own text, so bytes outside the fixed code never
    change; a fix that cannot be made is reported on its diagnostic and skipped alone.
    """
    result = FixResult(path=path, original=source, fixed=source)
    current = source
    for pass_number in range(MAX_PASSES + 1):
        active = applicable_rules(current.decode("utf-8", errors="replace"), rules)
        if not active:
            return result
        try:
            module = parse(current)
            result.encoding = module.encoding
            context = FileContext(path=path, source=decoded_source(current, module),
                                  module=module, project=project)
            findings, diagnostics = lint_module(context, active)
            pairs = keep(context, list(zip(findings, diagnostics, strict=True)))
        except Exception:  # lint_source reports it as MEM999/MEM997
            result.remaining = lint_source(path, current, rules, project)
            return result
        offered = [(f.fix, d) for f, d in pairs if f.fix is not None and allowed(f.fix, unsafe)]
        if not offered or pass_number == MAX_PASSES:
            result.remaining = sorted((d for _, d in pairs), key=Diagnostic.sort_key)
            return result
        chosen = non_overlapping(context, [fix for fix, _ in offered])
        try:
            candidate, applied, failed, edits = _apply_verified(module, current, source, chosen)
        except Exception as exc:  # a broken fix must not lose the file
            candidate, applied, failed, edits = current, [], {}, []
            result.problem = f"a fix could not be applied: {type(exc).__name__}: {exc}"
        by_fix = {id(fix): d for fix, d in offered}
        problems = {id(by_fix[id(chosen[i])]): reason for i, reason in failed.items()}
        result.failed = sorted((replace(d, fix_problem=problems[id(d)])
                                for _, d in pairs if id(d) in problems),
                               key=Diagnostic.sort_key)
        if not applied or candidate == current:
            result.remaining = sorted(
                (replace(d, fix_problem=problems[id(d)]) if id(d) in problems else d
                 for _, d in pairs), key=Diagnostic.sort_key)
            return result
        current = candidate
        result.fixed = current
        result.applied += len(applied)
        result.passes.append(sorted(edits))
    return result  # pragma: no cover - the loop always returns


def unified_diff(result: FixResult) -> bytes:
    """The fix as a unified diff, ``a/`` and ``b/`` prefixed like git's, in the file's own
    bytes (as git prints it): a latin-1 file's diff is latin-1, so that ``patch`` and
    ``git apply`` accept it. Lines end where Python's tokenizer ends them (LF, CRLF, CR)."""
    if result.cells is not None:  # a notebook (UTF-8 JSON): the changed cells, not the JSON
        from memlint.notebook_fix import cell_diff

        return cell_diff(result.path, result.cells).encode("utf-8", "surrogateescape")

    def lines(data: bytes) -> list[bytes]:
        out = data.splitlines(keepends=True)
        if out and not out[-1].endswith((b"\n", b"\r")):
            out[-1] += b"\n\\ No newline at end of file\n"
        return out

    name = os.fsencode(result.path)
    return b"".join(
        difflib.diff_bytes(
            difflib.unified_diff, lines(result.original), lines(result.fixed),
            fromfile=b"a/" + name, tofile=b"b/" + name,
        )
    )


def write_if_unchanged(path: Path, original: bytes, new: bytes) -> None:
    """Replace ``path`` with ``new``, unless it no longer holds ``original``.

    The file keeps what makes it the user's: a file without write permission is left alone
    (root can write it, but its owner asked not to), and a file with other hard links, or
    one whose owner a new file could not keep, is rewritten in place so every link and the
    ownership stay. Otherwise the new content goes to a temporary file next to the target
    (``os.replace`` is atomic only within one file system) with the target's permission
    bits and owner, and replaces it atomically. A symlink is followed, so the link stays a
    link.
    """
    with _signals_held():
        _write_if_unchanged(Path(os.path.realpath(path)), original, new)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C or SIGTERM waits until the file is written: a file is either as it was or
    fully fixed, never half-written (an in-place write truncates after writing)."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # not on this platform
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _write_if_unchanged(target: Path, original: bytes, new: bytes) -> None:
    st = target.stat()
    mode = stat.S_IMODE(st.st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise FileChangedError("not writable; left untouched")
    if st.st_nlink > 1:
        _write_in_place(target, original, new)
        return
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".memlint")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        tmp = os.stat(tmp_name)
        if (tmp.st_uid, tmp.st_gid) != (st.st_uid, st.st_gid):
            try:
                os.chown(tmp_name, st.st_uid, st.st_gid)
            except OSError:
                os.unlink(tmp_name)
                _write_in_place(target, original, new)
                return
        if target.read_bytes() != original:
            raise FileChangedError("changed on disk while fixing; left untouched")
        os.replace(tmp_name, target)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def _write_in_place(target: Path, original: bytes, new: bytes) -> None:
    """Overwrite the file itself (its inode, links and owner stay), as black and ruff do."""
    with open(target, "r+b") as handle:
        if handle.read() != original:
            raise FileChangedError("changed on disk while fixing; left untouched")
        handle.seek(0)
        handle.write(new)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def fix_bytes(path: str, data: bytes, rules: Sequence[type[Rule]], *, unsafe: bool = False,
              keep: FindingFilter = standing_findings, display: str | None = None) -> FixResult:
    """One file's fixes in memory: a notebook's code cells, or Python source. ``display``
    names the file in the result (``path`` by default)."""
    name = path if display is None else display
    if is_notebook(path):
        from memlint.notebook_fix import fix_notebook

        return fix_notebook(name, data, rules, unsafe=unsafe, keep=keep)
    return fix_source(name, data, rules, unsafe=unsafe, keep=keep)


def fix_file(
    path: Path,
    rules: Sequence[type[Rule]],
    *,
    unsafe: bool = False,
    keep: FindingFilter = standing_findings,
    write: bool = True,
    source: bytes | None = None,
) -> FixResult:
    """Fix one file on disk; ``write=False`` computes the result only (``--diff``).

    ``source`` is the content the caller already read, if any; the file is left alone
    should it differ from that by the time the fix is ready.
    """
    data = path.read_bytes() if source is None else source
    result = fix_bytes(str(path), data, rules, unsafe=unsafe, keep=keep)
    if write and result.changed:
        write_if_unchanged(path, data, result.fixed)
    return result


@dataclass
class FixRun:
    """What ``--fix`` / ``--diff`` did across a run."""

    results: list[FixResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Files that offered fixes but were left as they were (unwritable, changed meanwhile,
    # a crashed worker): the run asked for a fix it did not get, which is an error.
    errors: list[str] = field(default_factory=list)

    @property
    def applied(self) -> int:
        return sum(r.applied for r in self.results if r.changed)

    @property
    def changed(self) -> list[FixResult]:
        return [r for r in self.results if r.changed]

    def diff(self) -> bytes:
        return b"".join(unified_diff(r) for r in self.changed)

    def mark(self, diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics, those whose fix could not be made saying why."""
        problems = {(d.path, d.cell, d.line, d.column, d.code): d.fix_problem
                    for r in self.results for d in r.failed}
        return [replace(d, fix_problem=problems[key])
                if (key := (d.path, d.cell, d.line, d.column, d.code)) in problems else d
                for d in diagnostics]


def apply_fixes(
    files: Sequence[Path],
    lint: RunResult,
    settings: Settings,
    rules: Sequence[RuleSpec | type[Rule]],
    *,
    unsafe: bool,
    write: bool,
    cwd: Path | None = None,
    pool: Pool | None = None,
    jobs: int = 1,
    file_timeout: float | None = DEFAULT_FILE_TIMEOUT,
) -> FixRun:
    """Fix the files whose lint results offer an applicable fix.

    The fixes are computed in worker processes, in parallel and under ``--file-timeout``,
    as linting is: a file that crashes the parser costs that file, never the run. This
    process only writes the results, each file atomically and only if it is unchanged.
    Each file gets the rules enabled for it, per-file ignores included.
    """
    here = cwd or Path.cwd()
    by_display = {display_path(path, here): path for path in files}
    specs = [spec for spec in as_specs(rules) if spec.code in settings.enabled]
    tasks: dict[str, Task] = {}
    for file in lint.files:
        if not any(d.fix is not None and (d.fix is FixSafety.SAFE or unsafe)
                   for d in file.diagnostics):
            continue
        path = by_display.get(file.path)
        if path is None:
            continue
        ignored = settings.ignored_for(path)
        tasks[file.path] = Task(str(path), file.path, ignored, phase="fix", unsafe=unsafe)
    run = FixRun()
    work = pool or Pool()
    try:
        # Each file is written as soon as its fixes arrive: an interrupted run keeps them.
        for outcome in work.run(list(tasks.values()), specs, jobs, file_timeout,
                                lambda task, why: FileResult(task.display, skipped=why),
                                keep=pool is not None):
            _take(run, outcome, Path(tasks[outcome.path].path), write)
    finally:
        if pool is None:
            work.close()
    order = {display: i for i, display in enumerate(tasks)}
    run.results.sort(key=lambda r: order[r.path])
    run.errors.sort(key=lambda e: order.get(e.partition(": not fixed: ")[0], len(order)))
    return run


def _take(run: FixRun, outcome: FileResult, path: Path, write: bool) -> None:
    """Record one file's fix outcome, writing the fixed content unless ``--diff``."""
    result = outcome.fix
    if result is None:
        reason = outcome.skipped or (outcome.diagnostics[0].message
                                     if outcome.diagnostics else "unknown failure")
        run.errors.append(f"{outcome.path}: not fixed: {reason}")
        return
    if write and result.changed:
        try:
            write_if_unchanged(path, result.original, result.fixed)
        except (OSError, FileChangedError) as exc:
            reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            run.errors.append(f"{outcome.path}: not fixed: {reason}")
            return
    if result.problem is not None:
        run.warnings.append(f"{outcome.path}: {result.problem}")
    if not write:
        run.warnings += [f"{d.path}:{d.line}:{d.column}: {d.code} fix not applied: "
                         f"{d.fix_problem}" for d in result.failed]
    run.results.append(result)
