"""Lint many files: the cache first, then worker processes for the rest.

Files are linted in worker processes (``--jobs``, default the core count; see
:mod:`memlint.pool`), so one file can neither stop nor crash the run. The runner only reads
the linted files; the cache writes into its own folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memlint.cache import Entry, ResultCache
from memlint.diagnostics import Diagnostic
from memlint.filecheck import INTERNAL_ERROR, FileResult, Task, file_diagnostic
from memlint.pool import DEFAULT_FILE_TIMEOUT, Pool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from memlint.config import Settings
    from memlint.rules.spec import RuleSpec

def _failed(task: Task, message: str) -> FileResult:
    """A file whose worker crashed or timed out: one internal-error diagnostic."""
    return FileResult(task.display, [file_diagnostic(task.display, INTERNAL_ERROR, message)])


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


def lint_paths(files: Sequence[Path], settings: Settings, rules: Sequence[RuleSpec],
               *, jobs: int, cache: ResultCache | None = None, cwd: Path | None = None,
               file_timeout: float | None = DEFAULT_FILE_TIMEOUT,
               pool: Pool | None = None) -> RunResult:
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
    # Pool() starts workers only as run() needs them, and run() stops them when done.
    for result in (pool or Pool()).run([task for task, _ in pending], enabled, jobs,
                                       file_timeout, _failed):
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
