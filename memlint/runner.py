"""Lint many files: the cache first, then two passes of worker processes for the rest.

Files are linted in worker processes (``--jobs``, default the core count; see
:mod:`memlint.pool`), so one file can neither stop nor crash the run. The first pass scans
each changed file: a file that no rule applies to is finished there, and the others report
which rules apply and their module summary. The project model (:mod:`memlint.project`) then
joins the summaries, and the second pass lints each remaining file with what the project
knows that it needs (its :class:`~memlint.project.view.ModuleView`). The syntax checks of
the files the scan finished without a parse run in between, in one batch per worker, while
the parent builds the project model and the workers would otherwise wait. The runner only
reads the linted files; the caches write into their own folder.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memlint.cache import Entry, ResultCache, prune_missing
from memlint.diagnostics import Diagnostic
from memlint.filecheck import INTERNAL_ERROR, FileResult, Task, check_file, file_diagnostic
from memlint.pool import DEFAULT_FILE_TIMEOUT, Pool, is_timeout, rare_collections

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from memlint.config import Settings
    from memlint.project.store import SummaryStore
    from memlint.project.summary import ModuleSummary
    from memlint.project.view import ModuleView
    from memlint.rules.spec import RuleSpec


# Rules about evaluation code, run on a file the project model shows to hold some.
_EVALUATION_RULES = frozenset({"MEM002"})
# Rules that follow DataLoader batches into the methods a project base class feeds them to.
_BATCH_RULES = frozenset({"MEM003"})
# Rules whose files get the summaries of the helpers they call from other modules, fetched on
# demand: MEM003 follows the copies, MEM002 judges the statements before a forward by what
# those helpers return (its findings must not depend on whether MEM003 runs too).
_FOLLOWS_HELPERS = _BATCH_RULES | _EVALUATION_RULES


# Scan tasks sent to a worker ahead of its answers: most files take a millisecond or two
# there, about what a round trip to the parent costs (see Pool.run).
_SCAN_AHEAD = 4


def _summarised(store: SummaryStore, path: str) -> str | None:
    """The content hash whose summary the store holds for ``path``: the scan of an
    unchanged file need not summarise it again."""
    record = store.records.get(path)
    if record is None or store.summaries.get(record.digest) is None:
        return None
    return record.digest


def _failed(task: Task, message: str) -> FileResult:
    """A file whose worker crashed or timed out: one internal-error diagnostic."""
    return FileResult(task.display, [file_diagnostic(task.display, INTERNAL_ERROR, message)])


def _gave_up(result: FileResult) -> bool:
    """The worker ran out of --file-timeout on this file (nothing else went wrong)."""
    return len(result.diagnostics) == 1 and is_timeout(result.diagnostics[0].message)


_REMEMBERED = (" (remembered from an earlier run: a longer --file-timeout, or --no-cache, "
               "tries again)")


def _remembered(d: Diagnostic) -> Diagnostic:
    return d if d.message.endswith(_REMEMBERED) else replace(d, message=d.message + _REMEMBERED)


def _retry(entry: Entry, file_timeout: float | None) -> bool:
    """A file that ran out of time is tried again only with more time than it had."""
    return entry.timeout is not None and (file_timeout is None or file_timeout > entry.timeout)


def _check_batches(keys: Sequence[str], displays: dict[str, str],
                   stats: dict[str, os.stat_result | None], jobs: int) -> list[Task]:
    """The deferred syntax checks as one task per worker, of about equal bytes: the parent
    sends them all at once and does not answer the workers until the project model is
    built."""
    if not keys:
        return []
    shares: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(keys))))]
    for number, key in enumerate(sorted(keys, key=lambda k: _size(stats.get(k)), reverse=True)):
        shares[number % len(shares)].append(key)
    return [Task("", f"<syntax check {number + 1} of {len(shares)}: {len(share)} files>",
                 phase="check", batch=tuple((key, displays[key]) for key in share))
            for number, share in enumerate(shares)]


# Seconds a batch of syntax checks gets per MB beyond --file-timeout: CPython checks about
# 15 MB a second here, so only a stuck worker runs out of it.
_CHECK_SECONDS_PER_MB = 1.0


def _batch_timeout(batches: Sequence[Task], file_timeout: float | None,
                   stats: dict[str, os.stat_result | None]) -> float | None:
    """A batch gets ``--file-timeout`` and a second per MB of its files; one that runs out is
    checked again file by file, each under ``--file-timeout`` alone."""
    if file_timeout is None or not batches:
        return file_timeout
    megabytes = max(sum(_size(stats.get(path)) for path, _ in task.batch)
                    for task in batches) / 1e6
    return file_timeout + _CHECK_SECONDS_PER_MB * megabytes


def display_path(path: Path, cwd: Path) -> str:
    """Relative to the working directory when inside it, as ruff prints paths."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


@dataclass
class RunResult:
    files: list[FileResult]
    cache_warning: str | None = None

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = [d for result in self.files for d in result.diagnostics]
        return sorted(out, key=Diagnostic.sort_key)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _cached(entry: Entry, display: str) -> FileResult:
    """A file's result as the cache holds it."""
    return FileResult(display, list(entry.for_path(display)), entry.skipped, entry.digest)


def _size(stat: os.stat_result | None) -> int:
    """Largest files first: a big file taken last would leave the other workers idle while
    it finishes (the pass ends when its slowest worker does)."""
    return 0 if stat is None else stat.st_size


def _state(stats: dict[str, os.stat_result | None]) -> str:
    """What the project model read, as of this run: every path with its size and mtime."""
    material = "\n".join(
        f"{p}\0{s.st_size}\0{s.st_mtime_ns}" if (s := stats[p]) is not None else f"{p}\0-"
        for p in sorted(stats))
    return hashlib.blake2b(material.encode("utf-8", "surrogateescape"),
                           digest_size=16).hexdigest()


def lint_paths(files: Sequence[Path], settings: Settings, rules: Sequence[RuleSpec],
               *, jobs: int, cache: ResultCache | None = None, cwd: Path | None = None,
               file_timeout: float | None = DEFAULT_FILE_TIMEOUT,
               pool: Pool | None = None, context: Sequence[Path] = ()) -> RunResult:
    """Lint files with the enabled rules, reusing cached results where nothing they depend
    on changed. ``context``: further modules of the same packages, read only for the
    project model (a pre-commit run names a few files of a package)."""
    with rare_collections():
        return _lint_paths(files, settings, rules, jobs=jobs, cache=cache, cwd=cwd,
                           file_timeout=file_timeout, pool=pool, context=context)


def _lint_paths(files: Sequence[Path], settings: Settings, rules: Sequence[RuleSpec],
                *, jobs: int, cache: ResultCache | None, cwd: Path | None,
                file_timeout: float | None, pool: Pool | None,
                context: Sequence[Path]) -> RunResult:
    here = cwd or Path.cwd()
    enabled = [rule for rule in rules if rule.code in settings.enabled]
    keys = [str(path) for path in files]
    linted = set(keys)
    extra = [str(p) for p in context if str(p) not in linted]
    stats = {key: _stat(Path(key)) for key in [*keys, *extra]}
    displays = {key: display_path(Path(key), here) for key in keys}
    state = _state(stats)
    fresh: dict[str, Entry] = {}
    if cache is not None:
        for key in keys:
            st = stats[key]
            entry = cache.fresh(key, st) if st is not None else None
            if entry is not None and _retry(entry, file_timeout):
                continue
            if entry is not None:
                fresh[key] = entry
    if cache is not None and len(fresh) == len(keys) and cache.project == state:
        # Nothing the project model reads has changed: every cached result stands.
        return RunResult([_cached(fresh[k], displays[k]) for k in keys])

    from memlint.project.store import SummaryStore

    store = SummaryStore(None if cache is None else cache.directory)
    work = pool or Pool()
    results: dict[str, FileResult] = {}
    active: dict[str, tuple[str, ...]] = {}
    summaries: dict[str, ModuleSummary] = {}
    statements: dict[str, tuple[tuple[int, int], ...]] = {}  # from the scan, for the lint
    # From the scan: bodies the lint may leave out, for the rules the scan found.
    blanks: dict[str, tuple[tuple[str, ...], tuple[tuple[int, int], ...]]] = {}
    # From the scan: the worker that scanned the file, which may still hold its stdlib tree.
    lanes: dict[str, int | None] = {}
    # From the scan: files whose code calls no device copy itself (MEM003 needs a copy
    # helper of another module there, which only the project model knows of).
    copyless: set[str] = set()

    def keep_summary(key: str, digest: str | None) -> bool:
        """Use the stored summary of an unchanged file; False when it must be scanned."""
        if digest is None or digest not in store.summaries:
            return False
        summary = store.summaries[digest]
        if summary is not None:
            summaries[key] = summary
        return True

    scans: list[Task] = []
    for key in keys:
        entry = fresh.get(key)
        if entry is not None and entry.timeout is not None:  # gave up on it before
            results[key] = _cached(entry, displays[key])
            continue
        digest = store.known(key, stats[key])
        if entry is not None and entry.active and digest is not None and (
                store.summaries[digest] is None):
            digest = None  # linted now, but stored without a summary: scan it again
        if entry is not None and keep_summary(key, digest):
            if not entry.active:  # finished (None), or left to the project model (())
                results[key] = _cached(entry, displays[key])
            if entry.active is not None:
                active[key] = entry.active
            continue
        ignored = settings.ignored_for(Path(key))
        scans.append(Task(key, displays[key], ignored, phase="scan",
                          summary_digest=_summarised(store, key), defer_check=True))
    for key in extra:  # read for the project model only: no syntax check
        if not keep_summary(key, store.known(key, stats[key])):
            scans.append(Task(key, key, phase="scan", summary_digest=None, defer_check=True))
    scanned = {task.display: task for task in scans}
    scans.sort(key=lambda task: _size(stats.get(task.path)), reverse=True)
    for result in work.run(scans, enabled, jobs, file_timeout, _failed, keep=True,
                           ahead=_SCAN_AHEAD):
        task = scanned[result.path]
        key = task.path
        if result.digest is not None:
            summary = result.summary
            if summary is None and result.digest == task.summary_digest:
                summary = store.summaries.get(result.digest)  # unchanged content
            store.put(key, stats.get(key), result.digest, summary)
            if summary is not None:
                summaries[key] = summary
        if key not in linted:
            continue
        if not result.active:
            results[key] = result  # finished, unless the project model adds a rule (())
        if result.active is not None:
            active[key] = result.active
        if result.statements is not None:
            statements[key] = result.statements
            lanes[key] = result.lane
        if result.blank and result.active:
            blanks[key] = (result.active, result.blank)
        if result.copies is False:
            copyless.add(key)

    # The syntax checks the scan left (files no rule applies to): sent to the workers now,
    # collected after the project model, which the parent builds meanwhile.
    unchecked = [key for key in keys if key in results and results[key].unchecked]
    batches = _check_batches(unchecked, displays, stats, jobs)
    checking = work.run(batches, enabled, jobs, _batch_timeout(batches, file_timeout, stats),
                        _failed, keep=True)

    def collect_checks() -> None:
        """Each unchecked file's syntax errors, into its result. A batch whose worker died or
        ran out of time is checked again one file at a time, where that is one file's."""
        failed: list[str] = []
        for result in checking:
            if any(d.path == result.path for d in result.diagnostics):  # the batch's own
                failed += [path for path, _ in batch_of[result.path]]
                continue
            for diagnostic in result.diagnostics:
                waiting(by_display[diagnostic.path]).append(diagnostic)
        single = [Task(key, displays[key], phase="check", batch=((key, displays[key]),))
                  for key in failed if key in results and results[key].unchecked]
        for result in work.run(single, enabled, jobs, file_timeout, _failed, keep=True,
                               ahead=_SCAN_AHEAD):
            waiting(by_display[result.path]).extend(result.diagnostics)
        for key in unchecked:
            if key in results:
                results[key].unchecked = False

    def waiting(key: str) -> list[Diagnostic]:
        """Where a batch's diagnostics of the file go: its result's, while its check is
        still owed; nowhere when it was checked meanwhile (:func:`checked_now`) or is
        linted now (the lint's result replaces the scan's)."""
        result = results.get(key)
        return result.diagnostics if result is not None and result.unchecked else []

    def checked_now(key: str) -> list[Diagnostic]:
        """The file's syntax errors now, checked in this process when its batch is still
        out (a module the project model asks for: the plan must not wait for the batches)."""
        result = results[key]
        if result.unchecked:
            result.diagnostics += check_file(key, displays[key])
            result.unchecked = False
        return result.diagnostics

    by_display = {displays[key]: key for key in unchecked}
    batch_of = {task.display: task.batch for task in batches}

    from memlint.cache import content_digest
    from memlint.gates import for_path
    from memlint.project.model import ViewMemo, build_views
    from memlint.project.summary import defines_one_of, may_define_mover, summarise_source

    unworthy: set[str] = set()
    memo = ViewMemo()  # shared by both calls of build_views

    def summarise_now(paths: Sequence[str], worth: Callable[[bytes], bool] | None = None,
                      always: Collection[str] = (),
                      looked_up: Mapping[str, Collection[str]] | None = None,
                      ) -> dict[str, ModuleSummary]:
        """Summaries of files the scan did not summarise, made now in this process (and
        kept); ``worth`` picks the files by their bytes, except those in ``always``, and
        ``looked_up`` by what is looked up in them (:func:`defines_one_of`)."""
        made: dict[str, ModuleSummary] = {}
        for key in sorted(paths):
            if key in summaries or (worth is not None and key in unworthy
                                    and key not in always):
                continue  # summarised earlier in this run, or read and not worth it
            try:
                source = Path(key).read_bytes()
            except OSError:
                continue
            if worth is not None and key not in always and not worth(source):
                unworthy.add(key)
                continue
            if looked_up is not None and key not in always and not defines_one_of(
                    source, looked_up.get(key, ())):
                continue  # another round may look up another name in it
            summary = summarise_source(source, key)
            store.put(key, stats.get(key), content_digest(source), summary)
            if summary is not None:
                summaries[key] = made[key] = summary
        return made

    def project_views(known: Sequence[str], extra_candidates: Sequence[str] = (),
                      hooks: Sequence[str] = (), search_hooks: bool = True,
                      ) -> tuple[Mapping[str, ModuleView], set[str]]:
        """The views of files with rules, and of files with none (the scan's (), and
        ``extra_candidates``) where the rest of the project reveals code in them (for
        ``hooks``, finished files: only per-batch hooks of a base class elsewhere). Copy
        helpers in modules they call, which no gate selected, are summarised on the way."""
        ruled = [k for k, codes in active.items() if codes]
        bare = [*(k for k, codes in active.items() if not codes), *extra_candidates]
        copying = [k for k in ruled if _FOLLOWS_HELPERS & set(active[k])]
        return build_views(summaries, ruled, known, bare, hooks, copying,
                           fetch=lambda paths, hubs, names: summarise_now(
                               paths, may_define_mover, hubs, names),
                           search_hooks=search_hooks, memo=memo)

    # Files the scan finished (no rule's prefilter selected them) that have a summary: a
    # subclass overriding a per-batch hook of a base class's loader loop may sit among them.
    finished = [k for k in keys if k in results and k not in active and k in summaries
                and not results[k].diagnostics]
    fingerprints: dict[str, str | None] = {}

    def plan_lint() -> list[Task]:
        """The lint's tasks: the files with rules, and those the project model adds rules
        to, each with its view of the project."""
        views, missing = project_views([*keys, *extra], hooks=finished)
        for key in finished:
            view = views.get(key)
            if view is not None and view.fed_by_bases():
                del results[key]
                active[key] = ()
        if missing:
            # Modules whose functions the project calls as inference code or from training
            # loops, or that override a per-batch hook of a base class's loader loop, which
            # neither a prefilter nor the summary gate selected: summarised now (and kept).
            summarise_now(sorted(missing))
            candidates = [k for k in missing if k in linted and k in results
                          and k in summaries and not checked_now(k)]
            # The whole run is known again: a candidate's copy helpers may sit in files no
            # one has summarised yet (an override of a hook, star-importing its helpers).
            views, _ = project_views([*keys, *extra], candidates, search_hooks=False)
            for key in candidates:
                view = views.get(key)
                if view is not None and (view.eval_called or view.side_jobs
                                         or view.fed_by_bases()):
                    del results[key]
                    active[key] = ()
        tasks: list[Task] = []
        for key in active:
            view = views.get(key)
            # Only the result cache reads it (a run with --no-cache skips the hashing).
            fingerprint = None if view is None or cache is None else view.fingerprint()
            fingerprints[key] = fingerprint
            entry = cache.entries.get(key) if cache is not None else None
            known = entry.digest if (entry is not None and entry.view == fingerprint
                                     and entry.timeout is None) else None
            ignored = settings.ignored_for(Path(key))
            codes = active[key]
            possible = {r.code for r in for_path(enabled, displays[key])}
            if view is not None and (view.eval_called or view.side_jobs):
                # Inference code that the rest of the project reveals (a function its callers
                # run after `.eval()`), in a file whose own text did not suggest evaluation.
                codes = tuple(sorted({*codes, *_EVALUATION_RULES} & possible))
                active[key] = codes
            if view is not None and view.fed_by_bases():
                # Per-batch hooks a base class in another module feeds from its loader loop:
                # the copies in them are batch copies though no loader is named in this file.
                codes = tuple(sorted({*codes, *_BATCH_RULES} & possible))
                active[key] = codes
            if not codes and key in results:
                results[key].active = ()  # no rule passed its gate: the scan's result stands
                continue
            results.pop(key, None)
            if key in copyless and (view is None or not view.movers):
                # No copy in the code and no copy helper elsewhere that it calls: MEM003 can
                # report nothing. Left out of this lint only (the cache keeps it among the
                # file's rules, to be asked again when the project changes).
                codes = tuple(c for c in codes if c not in _BATCH_RULES)
            scanned_for, blank = blanks.get(key, ((), ()))
            tasks.append(Task(key, displays[key], ignored, known, view=view, active=codes,
                              statements=statements.get(key),
                              blank=blank if scanned_for == codes else (), lane=lanes.get(key)))
        return tasks

    # The deferred syntax checks run while the parent plans the lint; they are collected
    # just before the lint, which needs the workers.
    try:
        tasks = plan_lint()
    finally:
        collect_checks()
    linting = {task.display: task.path for task in tasks}
    tasks.sort(key=lambda task: _size(stats.get(task.path)), reverse=True)
    for result in work.run(tasks, enabled, jobs, file_timeout, _failed, keep=pool is not None):
        key = linting[result.path]
        if result.unchanged and cache is not None:
            result = _cached(cache.entries[key], displays[key])
        result.active = active[key]
        results[key] = result
    if cache is not None:
        for key, result in results.items():
            st = stats[key]
            if st is None:
                continue
            if _gave_up(result) and file_timeout is not None:
                # Remembered, so that the same content does not cost the timeout again.
                cache.store(key, Entry(st.st_mtime_ns, st.st_size, "",
                                       tuple(_remembered(d) for d in result.diagnostics),
                                       timeout=file_timeout))
                continue
            crashed = any(d.code == INTERNAL_ERROR[0] for d in result.diagnostics)
            if result.digest is None or crashed:
                continue
            cache.store(key, Entry(st.st_mtime_ns, st.st_size, result.digest,
                                   tuple(result.diagnostics), result.skipped,
                                   result.active, fingerprints.get(key)))
        if cache.project != state:
            cache.project = state
            cache.dirty = True
        prune_missing(cache, keys)
    if pool is None:
        work.close()
    warning = (cache.save() if cache is not None else None) or store.save()
    return RunResult([results[k] for k in keys if k in results], warning)

