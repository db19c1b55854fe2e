"""Lint many files in parallel, so that no single file can stop or crash the run.

Files are linted in worker processes (``--jobs``, default the core count). libcst's native
parser can overflow the C stack on pathologically nested code and kill its process outright,
which no ``except`` can catch; with each file handed to a worker one at a time, the parent
knows exactly which file a dead worker was on, reports it as one diagnostic and starts a
replacement. The runner only reads the linted files; the cache writes into its own folder.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import multiprocessing
import os
import signal
import time
import tokenize
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

from memlint.cache import Entry, ResultCache, content_digest
from memlint.config import ENGINE_CODES, Settings
from memlint.diagnostics import Diagnostic
from memlint.rules.base import Rule
from memlint.suppression import index_for

IO_ERROR = ("MEM996", "io-error")
PARSE_ERROR = ("MEM999", ENGINE_CODES["MEM999"])
INTERNAL_ERROR = ("MEM997", ENGINE_CODES["MEM997"])
# Generous: the slowest real file seen (a 200k-element literal) parses in a few seconds.
DEFAULT_FILE_TIMEOUT = 120.0


@dataclass(frozen=True)
class Task:
    """One file to lint: where to read it, how to show it, which codes are off for it."""

    path: str
    display: str
    ignored: frozenset[str] = frozenset()
    # The content hash of the cached result, if any: an unchanged file needs no lint.
    known_digest: str | None = None


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Why the file was not linted (binary, ...), shown as a warning; None when it was.
    skipped: str | None = None
    digest: str | None = None
    # True when the content matched known_digest, so the cached result still holds.
    unchanged: bool = False


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


def lint_bytes(display: str, source: bytes, rules: Sequence[type[Rule]],
               ignored: frozenset[str] = frozenset()) -> FileResult:
    """Everything memlint reports for one file's bytes, after suppression comments."""
    if b"\0" in source:
        return FileResult(display, skipped="binary file (contains NUL bytes)")
    try:
        text = decode(source)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return FileResult(display, [file_diagnostic(display, PARSE_ERROR,
                                                     f"cannot decode file: {reason}")])
    suppressions = index_for(text)
    if suppressions.file_blanket:
        return FileResult(display)
    from memlint.engine import lint_source  # libcst loads only when something needs linting

    active = [rule for rule in rules if rule.code not in ignored]
    found = lint_source(display, source, active)
    kept = suppressions.apply(found, unsuppressible=ENGINE_CODES)
    from memlint.rules.mem998_unused_noqa import resolve_unused

    kept = resolve_unused(suppressions, kept)  # MEM998 needs to know which comments worked
    return FileResult(display, [
        d if "\n" not in d.message else Diagnostic(
            d.path, d.line, d.column, d.end_line, d.end_column, d.code, d.name,
            _one_line(d.message), d.fix, d.statement_line)
        for d in kept
    ])


def read_source(path: str) -> bytes:
    """The one place linted files are opened: read-only, whole file."""
    with open(path, "rb") as handle:
        return handle.read()


def lint_task(task: Task, rules: Sequence[type[Rule]]) -> FileResult:
    try:
        source = read_source(task.path)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return FileResult(task.display, [file_diagnostic(task.display, IO_ERROR,
                                                         f"cannot read file: {reason}")])
    digest = content_digest(source)
    if digest == task.known_digest:
        return FileResult(task.display, digest=digest, unchanged=True)
    try:
        result = lint_bytes(task.display, source, rules, task.ignored)
    except Exception as exc:  # one file's failure must not stop the run
        result = FileResult(task.display, [file_diagnostic(
            task.display, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")])
    result.digest = digest
    return result


def _serve(conn: Connection, rules: Sequence[type[Rule]]) -> None:
    """A worker's loop: one task in, one result out, until the parent sends None."""
    # Ctrl-C reaches the whole process group; the parent alone decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A crash is reported by the parent as one line; no C-level traceback dump on stderr.
    faulthandler.disable()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(lint_task(task, rules))


class _Worker:
    def __init__(self, ctx: multiprocessing.context.BaseContext,
                 rules: Sequence[type[Rule]]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, tuple(rules)), daemon=True)  # type: ignore[attr-defined]
        self.process.start()
        child.close()
        self.task: Task | None = None
        self.started = 0.0

    def assign(self, task: Task) -> None:
        self.task = task
        self.started = time.monotonic()
        self.conn.send(task)

    def abandon(self, seconds: float) -> FileResult:
        """Kill a worker stuck on one file (libcst is superlinear on some inputs)."""
        assert self.task is not None
        task, self.task = self.task, None
        self.process.kill()
        self.process.join()
        return FileResult(task.display, [file_diagnostic(
            task.display, INTERNAL_ERROR,
            f"gave up after {seconds:g} s (--file-timeout); the file is too complex to parse")])

    def collect(self) -> tuple[FileResult, bool]:
        """The finished task's result, and whether this worker died producing it."""
        assert self.task is not None
        task, self.task = self.task, None
        try:
            if self.conn.poll():
                result: FileResult = self.conn.recv()
                return result, False
        except (EOFError, OSError):
            pass
        self.process.join(timeout=5)
        code = self.process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return FileResult(task.display, [file_diagnostic(
            task.display, INTERNAL_ERROR,
            f"the linter process crashed on this file ({how}); "
            "the code is probably nested too deeply for the parser")]), True

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def run_tasks(tasks: Sequence[Task], rules: Sequence[type[Rule]], jobs: int,
              file_timeout: float | None = None) -> Iterator[FileResult]:
    """Results in completion order; a worker that dies or hangs is replaced, its file reported."""
    if not tasks:
        return
    ctx = multiprocessing.get_context()
    queue = deque(tasks)
    workers = [_Worker(ctx, rules) for _ in range(max(1, min(jobs, len(tasks))))]
    try:
        for worker in workers:
            if queue:
                worker.assign(queue.popleft())
        while True:
            busy = [w for w in workers if w.task is not None]
            if not busy:
                break
            timeout = None
            if file_timeout is not None:
                first_deadline = min(w.started for w in busy) + file_timeout
                timeout = max(0.0, first_deadline - time.monotonic())
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                             timeout=timeout))
            now = time.monotonic()
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    result, died = worker.collect()
                elif file_timeout is not None and now - worker.started >= file_timeout:
                    result, died = worker.abandon(file_timeout), True
                else:
                    continue
                yield result
                if died:
                    worker.stop()
                    workers[workers.index(worker)] = worker = _Worker(ctx, rules)
                if queue:
                    worker.assign(queue.popleft())
    finally:
        for worker in workers:
            worker.stop()


def display_path(path: Path, cwd: Path) -> str:
    """Relative to the working directory when inside it, as ruff prints paths."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def root_relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


@dataclass
class RunResult:
    files: list[FileResult]
    cache_warning: str | None = None

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = [d for result in self.files for d in result.diagnostics]
        return sorted(out, key=Diagnostic.sort_key)


def lint_paths(files: Sequence[Path], settings: Settings, rules: Sequence[type[Rule]],
               *, jobs: int, cache: ResultCache | None = None, cwd: Path | None = None,
               file_timeout: float | None = DEFAULT_FILE_TIMEOUT) -> RunResult:
    """Lint files with the enabled rules, reusing cached results where the file is unchanged."""
    here = cwd or Path.cwd()
    enabled = [rule for rule in rules if rule.code in settings.enabled]
    results: dict[str, FileResult] = {}
    pending: list[tuple[Task, os.stat_result | None]] = []
    for path in files:
        key = str(path)
        display = display_path(path, here)
        st: os.stat_result | None
        try:
            st = path.stat()
        except OSError:
            st = None
        if cache is not None and st is not None:
            entry = cache.fresh(key, st)
            if entry is not None:
                results[key] = FileResult(display, list(entry.for_path(display)),
                                          entry.skipped, entry.digest)
                continue
        task = Task(key, display, settings.ignored_for(root_relative(path, settings.root)),
                    cache.digest(key) if cache is not None else None)
        pending.append((task, st))
    stats = {task.path: st for task, st in pending}
    by_display = {task.display: task for task, _ in pending}
    for result in run_tasks([task for task, _ in pending], enabled, jobs,
                            file_timeout):
        task = by_display[result.path]
        st = stats[task.path]
        if result.unchanged and cache is not None:
            cached = cache.entries[task.path]
            result = FileResult(task.display, list(cached.for_path(task.display)),
                                cached.skipped, cached.digest)
        results[task.path] = result
        crashed = any(d.code == INTERNAL_ERROR[0] for d in result.diagnostics)
        if cache is not None and st is not None and result.digest is not None and not crashed:
            cache.store(task.path, Entry(st.st_mtime_ns, st.st_size, result.digest,
                                         tuple(result.diagnostics), result.skipped))
    warning = cache.save() if cache is not None else None
    return RunResult([results[str(path)] for path in files if str(path) in results], warning)
