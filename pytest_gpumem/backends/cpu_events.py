"""The ``cpu-fast`` backend: the allocator's own events, read through the PyTorch profiler.

With ``profile_memory`` on and no CPU op recording, the profiler costs nothing per op: only
each allocation and free is appended to a C++ queue (about 1.2x a plain training loop,
where following storages through a dispatch mode costs 2x before doing any work; see
``bench/gpumem_backends.py``). A test is measured in segments (setup, body, teardown; a
wider-scoped fixture's setup is left out), each one profiler session; the peak is the
highest running sum of the body's events, the leak what the test allocated and did not
free. Frees of memory allocated before the test count as in the CUDA allocator: they
lower the running sum. There are no allocation sites (the allocator knows no Python
line), but a leak's survivors are known by address, so the report still names what keeps
them alive. Another profiler cannot run while a test is measured.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from torch._C._autograd import (
    _disable_profiler,
    _enable_profiler,
    _prepare_profiler,
    _profiler_enabled,
)
from torch._C._profiler import (
    ProfilerActivity,
    ProfilerConfig,
    ProfilerState,
    _ExperimentalConfig,
    _ExtraFields_Allocation,
)

from pytest_gpumem.backends.base import Backend, LeakResult, PeakResult, TestTracker
from pytest_gpumem.holders import reachable_storages
from pytest_gpumem.leaks import collect_for_verdict, storage_address
from pytest_gpumem.timeline import Timeline

# A profiler session needs one activity; with CPU it would record every op. MTIA has no
# device here, so it adds nothing while the allocation events are still collected.
_ACTIVITIES = {ProfilerActivity.MTIA}
_CONFIG = ProfilerConfig(
    ProfilerState.KINETO, False, True, False, False, False, _ExperimentalConfig(), ""
)

Event = tuple[int, int]  # (address, bytes: negative for a free)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Kineto prints two trace-marker lines to the C-level stderr on every start and stop,
    whatever its log level; they would fill every failing test's captured stderr."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _Session:
    """One profiler session at a time; ``stop`` returns its allocation events in order."""

    active = False

    def start(self) -> None:
        if _profiler_enabled():
            raise RuntimeError("another profiler is running")
        with _quiet_stderr():
            _prepare_profiler(_CONFIG, _ACTIVITIES)  # before every enable, or torch crashes
            _enable_profiler(_CONFIG, _ACTIVITIES)
        self.active = True

    def stop(self) -> list[Event]:
        if not self.active:
            return []
        self.active = False
        if not _profiler_enabled():
            # another profiler replaced this session and has ended it (torch 2.11 raises
            # "Can't disable Kineto profiler when it's not running"): its events are lost
            return []
        with _quiet_stderr():
            try:
                result = _disable_profiler()
            except RuntimeError:  # ended by another profiler between the check and now
                return []
        events = []
        for event in result.experimental_event_tree():
            fields = event.extra_fields
            if isinstance(fields, _ExtraFields_Allocation):
                events.append((event.start_time_ns, fields.ptr, fields.alloc_size))
        events.sort(key=lambda e: e[0])
        return [(ptr, size) for _, ptr, size in events]


@contextlib.contextmanager
def _no_automatic_gc() -> Iterator[None]:
    """No automatic garbage collection while the tracker itself works with no profiler
    session on: a collection there (the event lists it builds allocate objects) would free
    a cycle the test dropped where no session records the free, and the test would look as
    if it kept that memory. Postponed, the collection runs at the next allocation, inside
    the session started next or after the verdict. Explicit ``gc.collect`` calls still run."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _running_peak(events: list[Event]) -> tuple[int, int]:
    """(highest running sum, final sum) of a segment's byte changes."""
    peak = current = 0
    for _, size in events:
        current += size
        peak = max(peak, current)
    return peak, current


def _unfreed(events: list[Event]) -> dict[int, int]:
    """Addresses allocated in ``events`` and not freed there, with their sizes."""
    live: dict[int, int] = {}
    for ptr, size in events:
        if size > 0:
            live[ptr] = size
        else:
            live.pop(ptr, None)
    return live


OTHER_PROFILER = (
    "another profiler ran during the test (torch.profiler, or a library that starts one), "
    "and only one can run at a time, so cpu-fast's allocation events were lost; "
    "--gpumem-backend=cpu measures such a test"
)


class EventsTracker(TestTracker):
    """One test's (or one ``gpumem.track()`` block's) allocation events.

    Only one profiler session can run in a process. A tracker started while another one
    records (the ``gpumem`` fixture inside a measured test) takes the session over: the
    outer one's events so far are its own, then every event the inner one records is also
    the outer one's, until the inner one closes and the outer one records again.
    """

    _recording: EventsTracker | None = None  # whose session is on now, process-wide

    def __init__(self) -> None:
        self.session = _Session()
        self.events: list[Event] = []  # every measured segment, in order
        self.body_from = 0
        self.body_to: int | None = None
        self.paused = 0
        self.outer: EventsTracker | None = None
        self.problem: str | None = None

    def _start(self) -> None:
        try:
            self.session.start()
        except RuntimeError:  # the test (or a fixture) runs its own profiler
            self.problem = OTHER_PROFILER
            return
        EventsTracker._recording = self

    def _stop(self, frees_only: bool = False) -> None:
        with _no_automatic_gc():
            self._stop_session(frees_only)

    def _stop_session(self, frees_only: bool) -> None:
        if self.session.active and not _profiler_enabled():
            self.problem = OTHER_PROFILER  # someone else's profiler replaced ours
        if EventsTracker._recording is self:
            EventsTracker._recording = None
        events = self.session.stop()
        # During a garbage collection only the frees of what this tracker saw allocated are
        # its own: a finalizer of older garbage may allocate, and older garbage freed there
        # (an earlier test's cycles) is not what this test allocated either.
        if frees_only:
            mine = _unfreed(self.events)
            events = [e for e in events if e[1] < 0 and e[0] in mine]
        tracker: EventsTracker | None = self
        while tracker is not None:
            tracker.events.extend(events)
            tracker = tracker.outer

    def start(self) -> None:
        with _no_automatic_gc():
            outer = EventsTracker._recording
            if outer is not None and outer is not self:
                outer._stop()  # its events so far are its own; ours are its too from now on
                self.outer = outer
            self._start()

    def pause(self) -> None:
        if self.paused == 0:
            self._stop()
        self.paused += 1

    def resume(self) -> None:
        self.paused -= 1
        if self.paused == 0:
            self._start()

    def body_start(self) -> None:
        with _no_automatic_gc():
            self._stop()
            self.body_from = len(self.events)
            self._start()

    def body_end(self) -> PeakResult:
        with _no_automatic_gc():
            self._stop()
            self.body_to = len(self.events)
            before = sum(size for _, size in self.events[: self.body_from])
            peak, _ = _running_peak(self.events[self.body_from :])
            self._start()
        return PeakResult(peak_bytes=peak, baseline_bytes=max(0, before))

    def live_bytes(self) -> int:
        with _no_automatic_gc():
            self._stop()
            self._collect(2)  # inside a session: the frees of the run's garbage count
            self._start()
        return max(0, sum(size for _, size in self.events))

    def key_of(self, storage: Any) -> int:
        return storage_address(storage)

    def _live_bytes(self) -> int:
        return sum(size for _, size in self.events)

    def _collect(self, generation: int) -> None:
        """A garbage collection whose frees count: a finalizer of older garbage may
        allocate, and that is not what the test left behind."""
        self._start()
        gc.collect(generation)
        self._stop(frees_only=True)

    def finish(self, owned_by: Sequence[object] = (), tolerance: int = 0) -> LeakResult:
        with _no_automatic_gc():
            self._stop()
            collect_for_verdict(self._live_bytes, tolerance, self._collect)
        leaked = sum(size for _, size in self.events)
        if leaked <= 0:
            return LeakResult(leaked_bytes=0)
        live = _unfreed(self.events)
        if owned_by and live:
            for ptr in reachable_storages(owned_by, storage_address, set(live)):
                leaked -= live.pop(ptr)
        if leaked <= 0:
            return LeakResult(leaked_bytes=0)
        return LeakResult(leaked_bytes=leaked, storages=len(live),
                          survivors=tuple(live.items()))

    def timeline(self) -> Timeline | None:
        """The running sum of the test's allocator events (setup, body, teardown)."""
        allocated = [0]
        for _, size in self.events:
            allocated.append(allocated[-1] + size)
        marks = [(self.body_from, "body starts")]
        if self.body_to is not None:
            marks.append((self.body_to, "body ends"))
        return Timeline(
            allocated=allocated,
            events=range(len(allocated)),
            body_start_bytes=allocated[self.body_from],
            marks=tuple(marks),
        )

    def close(self) -> None:
        with _no_automatic_gc():
            if self.session.active:
                self._stop()
            self.events = []
            outer, self.outer = self.outer, None
            if outer is not None and outer.paused == 0:
                outer._start()  # the outer tracker records again


class CpuEventsBackend(Backend):
    name = "cpu-fast"
    device = "cpu"
    label = "CPU measurement: allocator events from the PyTorch profiler (no allocation sites)"

    def tracker(self) -> TestTracker:
        return EventsTracker()
