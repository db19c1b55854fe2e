"""Worker processes, so that no single file can stop or crash the run.

libcst's native parser can overflow the C stack on pathologically nested code and kill its
process outright, which no ``except`` can catch. With each file handed to a worker one at a
time, the parent knows exactly which file a dead worker was on, reports it as one diagnostic
and starts a replacement; a worker stuck past ``--file-timeout`` is killed the same way.

A pre-commit run on one file is mostly spent importing libcst (about 0.2 s). The command line
therefore forks its first worker before anything else (:meth:`Pool.start`): the worker
imports libcst while the parent imports the rest, reads the configuration and finds the files.
This module imports nothing heavy, so that fork happens early.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlint.filecheck import FileResult, Task
    from memlint.rules.spec import RuleSpec

# Generous: the slowest real file seen (a 200k-element literal) parses in a few seconds.
DEFAULT_FILE_TIMEOUT = 120.0

# The address space one worker may add to what it starts with. libcst needs about 0.7 GB per
# MB of ordinary code, but a giant literal (a 2.5M-element list) can take 10 GB: past this,
# that file fails alone (MEM997) instead of the machine swapping or the OOM killer picking a
# process.
# MEMLINT_WORKER_MEMORY_MB overrides it.
DEFAULT_WORKER_MEMORY_MB = 6144

# libcst's visitors recurse per nesting level; the native parser (which gives out first, at
# about a thousand levels, by overflowing the C stack) is the limit, not Python's 1000 frames.
WORKER_RECURSION_LIMIT = 20_000


# libcst builds hundreds of thousands of short-lived nodes per file, and the parent unpickles
# as many summary objects, none of them garbage in a cycle; the default thresholds run a
# collection every 700 allocations: about 10% of a worker's CPU and a third of the parent's on
# transformers. Rarer collections cost no memory there (peak RSS 105 MB either way).
GC_THRESHOLDS = (100_000, 50, 1000)


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """The parent's side of a run with :data:`GC_THRESHOLDS`, the caller's restored after."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


class PoolError(Exception):
    """No worker process could be started (a process limit, no memory): one line for the user."""


def worker_memory_mb() -> int | None:
    """The per-worker memory ceiling in MB, or None for none (``0`` in the variable)."""
    text = os.environ.get("MEMLINT_WORKER_MEMORY_MB", "")
    try:
        value = int(text) if text.strip() else DEFAULT_WORKER_MEMORY_MB
    except ValueError:
        value = DEFAULT_WORKER_MEMORY_MB
    return value if value > 0 else None


def _mapped() -> int:
    """This process's address space in bytes (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit_memory() -> None:
    """Cap this worker's address space (never raising a lower limit the user set)."""
    megabytes = worker_memory_mb()
    with contextlib.suppress(Exception):  # not on Linux, or not allowed: no ceiling
        import resource

        if megabytes is None:
            return
        # On top of what the worker maps already (a fork of a large process, such as a test
        # run that imported torch, starts big).
        wanted = _mapped() + megabytes * 1024 * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft > wanted:
            if hard != resource.RLIM_INFINITY:
                wanted = min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def _warm_up() -> None:
    """Import what linting a file needs, while the parent is busy with everything else."""
    with contextlib.suppress(Exception):  # a real failure resurfaces, per file, later
        import memlint.engine
        from memlint.rules import rule_specs

        for spec in rule_specs():
            if spec.default_enabled:
                spec.load()
        del memlint


# Ctrl-C and SIGTERM, held while a worker is forked (:func:`_signals_held`).
_HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while a worker is forked. Python runs a signal handler at the
    next point it checks, and one that falls in the callbacks ``fork()`` runs in the parent
    (logging releases its lock there) has its exception printed as "ignored" and dropped: the
    command went on linting as if the CI timeout's SIGTERM had never come. Held, the signal
    arrives once the fork is done, where the handler's exception stops the run."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _die_with_parent(parent: int) -> None:
    """End this worker when the parent dies, however it dies (SIGKILL from a CI timeout or
    the OOM killer included): workers forked later hold copies of this worker's pipe, so
    it would never see end-of-file and would wait forever. Linux only; elsewhere the pipe
    closing is the signal. ``parent`` is the pid the parent had before it forked: read in
    the child, it could already be the reaper's, if the parent died in between."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _serve(conn: Connection, warm: bool, parent: int) -> None:
    """A worker's loop: the rules first, then one task in, one result out, until None.

    A warm worker imports libcst on a background thread, so that a file no rule applies to
    is answered at once; a file that needs parsing waits for that thread to finish.
    """
    # Ctrl-C reaches the whole process group; the parent alone decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler
    if hasattr(signal, "pthread_sigmask"):  # held by the parent across the fork
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)
    _die_with_parent(parent)
    # A crash is reported by the parent as one line; no C-level traceback dump on stderr,
    # nor the parser's own "memory allocation failed" lines when the ceiling is hit.
    faulthandler.disable()
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    _limit_memory()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), WORKER_RECURSION_LIMIT))
    gc.set_threshold(*GC_THRESHOLDS)
    imports_ready = None
    if warm:
        thread = threading.Thread(target=_warm_up, name="memlint-warm-up", daemon=True)
        try:
            thread.start()
            imports_ready = thread.join
        except RuntimeError:  # no thread to be had (a process limit): import when needed
            pass
    from memlint.filecheck import lint_task

    try:
        rules: Sequence[RuleSpec] = conn.recv()
    except (EOFError, OSError):
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(lint_task(task, rules, imports_ready=imports_ready))


def timeout_message(seconds: float) -> str:
    return f"gave up after {seconds:g} s (--file-timeout); the file is too complex to parse"


def is_timeout(message: str) -> bool:
    return message.startswith("gave up after ") and "(--file-timeout)" in message


def crash_message(code: int | None) -> str:
    """Why a worker died, as far as its exit status tells."""
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    if code == -signal.SIGKILL:
        return (f"the linter process was killed on this file ({how}), perhaps by the "
                "system's out-of-memory killer")
    if code == -signal.SIGABRT:  # the parser's allocation failed under the ceiling
        megabytes = worker_memory_mb()
        limit = "" if megabytes is None else (f"; the limit is {megabytes} MB per worker, "
                                              "MEMLINT_WORKER_MEMORY_MB")
        return (f"the linter process ran out of memory on this file ({how}{limit}): "
                "the file is too large to analyse")
    return (f"the linter process crashed on this file ({how}); "
            "the code is probably nested too deeply for the parser")


class _Worker:
    def __init__(self, ctx: multiprocessing.context.BaseContext, warm: bool, lane: int) -> None:
        # Stable for the worker's life: results carry it, and the tasks of a later pass that
        # name it (``Task.lane``) go to it first.
        self.lane = lane
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, warm, os.getpid()), daemon=True)  # type: ignore[attr-defined]
        try:
            with _signals_held():
                self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()
        self.configured = False
        self.rules: tuple[RuleSpec, ...] = ()
        # Sent and not yet answered, oldest first: the worker is on the first one, which
        # started when the answer before it came (or when it was sent to an idle worker).
        self.tasks: deque[Task] = deque()
        self.started = 0.0

    def assign(self, task: Task, rules: Sequence[RuleSpec]) -> None:
        if not self.configured:
            self.rules = tuple(rules)
            self.conn.send(self.rules)
            self.configured = True
        if not self.tasks:
            self.started = time.monotonic()
        self.tasks.append(task)
        with contextlib.suppress(OSError):
            # Sent ahead, to a worker that died on an earlier file since: its sentinel says
            # so, and this task goes to another worker with the rest (:meth:`unsent`).
            self.conn.send(task)

    def abandon(self, seconds: float, failed: Callable[[Task, str], FileResult]) -> FileResult:
        """Kill a worker stuck on one file (libcst is superlinear on some inputs); the files
        sent after it are the caller's to hand to another worker (:meth:`unsent`)."""
        task = self.tasks.popleft()
        self.process.kill()
        self.process.join()
        return failed(task, timeout_message(seconds))

    def collect(self, failed: Callable[[Task, str], FileResult]) -> tuple[FileResult, bool]:
        """The first outstanding task's result, and whether this worker died producing it
        (then the files sent after it are the caller's to hand on: :meth:`unsent`)."""
        task = self.tasks.popleft()
        try:
            if self.conn.poll():
                result: FileResult = self.conn.recv()
                self.started = time.monotonic()
                result.lane = self.lane
                return result, False
        except (EOFError, OSError):
            pass
        self.process.join(timeout=5)
        return failed(task, crash_message(self.process.exitcode)), True

    def unsent(self) -> list[Task]:
        """The tasks a dead worker had been sent but never started, oldest first."""
        left = list(self.tasks)
        self.tasks.clear()
        return left

    def stop(self) -> None:
        if not self.configured:  # still warming up, or idle: nothing to finish
            self.process.kill()
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class _Queue:
    """The tasks of one pass not yet sent: one line per worker for the tasks that name it
    (``Task.lane``: files it scanned, whose trees it may still hold), in the order given,
    and one for any worker. A worker whose line is done takes from the shared line, then
    from the end of the longest other line (its smallest files, when the tasks come
    largest first), so that no worker waits while another has work."""

    def __init__(self, tasks: Sequence[Task], lanes: Sequence[int]) -> None:
        self.lines: dict[int, deque[Task]] = {lane: deque() for lane in lanes}
        self.shared: deque[Task] = deque()
        for task in tasks:
            self.lines.get(task.lane if task.lane is not None else -1, self.shared).append(task)

    def __bool__(self) -> bool:
        return bool(self.shared) or any(self.lines.values())

    def take(self, lane: int) -> Task:
        own = self.lines.get(lane)
        if own:
            return own.popleft()
        if self.shared:
            return self.shared.popleft()
        return max(self.lines.values(), key=len).pop()

    def put_back(self, tasks: Sequence[Task]) -> None:
        """Tasks a dead worker was sent and never started: first, for any worker."""
        self.shared.extendleft(reversed(tasks))


def _refill(worker: _Worker, queue: _Queue, rules: Sequence[RuleSpec], ahead: int) -> None:
    """Send the worker queued tasks until ``ahead`` of them are outstanding."""
    while queue and len(worker.tasks) < max(1, ahead):
        worker.assign(queue.take(worker.lane), rules)


class Pool:
    """Worker processes for one command: started early, reused by every lint pass."""

    def __init__(self, ctx: multiprocessing.context.BaseContext | None = None) -> None:
        self.ctx = ctx or multiprocessing.get_context()
        self.idle: list[_Worker] = []
        self._lanes = itertools.count()

    @classmethod
    def start(cls) -> Pool:
        """A pool with one worker already importing libcst and the default rules (none when
        no process can be started now: the first pass says so, or makes do)."""
        pool = cls()
        with contextlib.suppress(OSError):
            pool.idle.append(_Worker(pool.ctx, warm=True, lane=next(pool._lanes)))
        return pool

    def _spawn(self, count: int, have: int) -> list[_Worker]:
        """Up to ``count`` new workers: fewer when the system refuses more processes
        (``RLIMIT_NPROC``, memory), as long as the pass has at least one."""
        out: list[_Worker] = []
        for _ in range(count):
            try:
                out.append(_Worker(self.ctx, warm=False, lane=next(self._lanes)))
            except OSError as exc:
                if have + len(out) == 0:
                    raise PoolError("cannot start a worker process: "
                                    f"{exc.strerror or exc} (a process limit?)") from None
                break
        return out

    def _take(self, count: int, rules: Sequence[RuleSpec]) -> list[_Worker]:
        # A worker kept from an earlier pass already holds its rules; one holding others
        # cannot be told new ones.
        for worker in [w for w in self.idle if w.configured and w.rules != tuple(rules)]:
            self.idle.remove(worker)
            worker.stop()
        taken, self.idle = self.idle[:count], self.idle[count:]
        return taken + self._spawn(count - len(taken), len(taken))

    def run(self, tasks: Sequence[Task], rules: Sequence[RuleSpec], jobs: int,
            file_timeout: float | None,
            failed: Callable[[Task, str], FileResult], *,
            keep: bool = False, ahead: int = 1) -> Iterator[FileResult]:
        """Results in completion order; a worker that dies or hangs is replaced, and its
        file reported through ``failed``. The workers are stopped when the pass ends, or,
        with ``keep``, kept for the next pass (the lint pass after the scan) until
        :meth:`close`.

        The first tasks are sent before this returns, so the workers start on them while
        the caller does something else before it asks for the results (the runner builds
        the project model while the deferred syntax checks run).

        ``ahead``: tasks sent to a worker before its first answer comes back. A file that
        takes a millisecond (most of a scan) costs about as much again in the round trip
        to the parent, during which the worker would wait; with the next files already in
        its pipe it does not. The worker still takes them one at a time, so a crash or a
        timeout is still one file's, and the files queued behind it go to another worker.
        """
        if not tasks:
            return iter(())
        workers = self._take(max(1, min(jobs, len(tasks))), rules)
        queue = _Queue(tasks, [w.lane for w in workers])
        try:
            for worker in workers:
                _refill(worker, queue, rules, ahead)
        except BaseException:
            for worker in workers:
                worker.stop()
            raise
        return self._collect(queue, workers, rules, file_timeout, failed, keep, ahead)

    def _collect(self, queue: _Queue, workers: list[_Worker], rules: Sequence[RuleSpec],
                 file_timeout: float | None, failed: Callable[[Task, str], FileResult],
                 keep: bool, ahead: int) -> Iterator[FileResult]:
        try:
            while True:
                busy = [w for w in workers if w.tasks]
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
                        result, died = worker.collect(failed)
                    elif file_timeout is not None and now - worker.started >= file_timeout:
                        result, died = worker.abandon(file_timeout, failed), True
                    else:
                        continue
                    yield result
                    if died:
                        queue.put_back(worker.unsent())
                        worker.stop()
                        index = workers.index(worker)
                        replacement = self._spawn(1, len(workers) - 1)
                        if not replacement:  # no process to be had: the others go on
                            del workers[index]
                            if not workers:
                                workers = self._spawn(1, 0)
                            continue
                        workers[index] = worker = replacement[0]
                    _refill(worker, queue, rules, ahead)
                for worker in workers:  # a replacement, or the others after a death
                    if not worker.tasks:
                        _refill(worker, queue, rules, ahead)
        finally:
            for worker in workers:
                if keep and not worker.tasks and worker.process.is_alive():
                    self.idle.append(worker)
                else:
                    worker.stop()

    def close(self) -> None:
        """Stop the workers no pass used (the warm one, when every file was cached)."""
        for worker in self.idle:
            worker.stop()
        self.idle = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
