"""The CPU backend: tensor storages followed through a ``TorchDispatchMode``.

Every aten op's outputs pass through the mode. A storage not seen before and not among the
op's inputs is new: in-place, view and ``out=`` results share an input's storage and are
counted once. A weak reference on the untyped storage says when it is freed. This counts
tensor storages on any device (CPU, meta, CUDA) exactly, optionally rounded to a block size;
it does not see kernel scratch buffers, allocator caching or tensors made without a
dispatched op (``torch.from_numpy``), and only follows the thread that opened it.

Never combine this with ``FakeTensorMode(device="cuda")`` for training: on CPU builds
``backward()`` then aborts the interpreter, which no ``except`` can catch.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_gpumem.backends.base import (
    Backend,
    LeakResult,
    PeakResult,
    Site,
    TestTracker,
    aggregate,
)
from pytest_gpumem.backends.frames import FrameFilter, RawStack
from pytest_gpumem.holders import reachable_storages
from pytest_gpumem.leaks import collect_for_verdict, count_graph_holders, storage_identity
from pytest_gpumem.timeline import Timeline

STACK_DEPTH = 6
HISTORY_POINTS = 20_000
_filter: FrameFilter | None = None
# References to a storage: 2 when only a fresh op output's tensor and our Python storage
# object hold it (an input tensor on the same storage would add its own)
_use_count: Callable[[int], int] = torch._C._storage_Use_Count
_OpOverload = torch._ops.OpOverload


def _frame_filter() -> FrameFilter:
    global _filter
    if _filter is None:
        _filter = FrameFilter()
    return _filter


class _Live:
    __slots__ = ("in_window", "nbytes", "ref", "site")

    def __init__(
        self, nbytes: int, site: RawStack, ref: weakref.ref[Any], in_window: bool
    ) -> None:
        self.nbytes = nbytes
        self.site = site
        self.ref = ref
        self.in_window = in_window


def _tensors(obj: Any, out: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results: aten ops nest them only in tuples,
    lists and dicts, so this walk is all the general (and slower) pytree flatten did."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, tuple | list):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


def _returns_fresh(func: Any) -> bool:
    """Whether the op's schema says no result aliases an argument (no in-place, ``out=`` or
    view result): then a result storage that nothing else references is a new one."""
    try:
        return not any(r.alias_info is not None for r in func._schema.returns)
    except AttributeError:
        return False


_FRESH: dict[Any, bool] = {}


def _storage(t: torch.Tensor) -> Any:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return None


class EventHistory:
    """Live bytes after every tracked allocation and free, numbered in event order.

    Memory stays bounded: whenever ``limit`` points have piled up, each run of four
    neighbours is thinned to its lowest and highest point, so the peak (and every dip) of a
    long test survives in half the space. Appending is all the hot path pays.
    """

    __slots__ = ("count", "events", "limit", "marks", "values")

    def __init__(self, limit: int = HISTORY_POINTS) -> None:
        self.limit = max(8, limit)
        self.count = 0
        self.events: list[int] = [0]
        self.values: list[int] = [0]
        self.marks: list[tuple[int, str]] = []

    def record(self, value: int) -> None:
        self.count += 1
        self.events.append(self.count)
        self.values.append(value)
        if len(self.values) >= self.limit:
            self._thin()

    def mark(self, label: str) -> None:
        self.marks.append((self.count, label))

    def _thin(self) -> None:
        events, values = self.events, self.values
        kept_events: list[int] = []
        kept_values: list[int] = []
        for start in range(0, len(values), 4):
            chunk = range(start, min(start + 4, len(values)))
            low = min(chunk, key=values.__getitem__)
            high = max(chunk, key=values.__getitem__)
            for i in sorted({low, high}):
                kept_events.append(events[i])
                kept_values.append(values[i])
        self.events, self.values = kept_events, kept_values

    def points(self, current: int) -> tuple[list[int], list[int]]:
        """(event numbers, live bytes), ending with the present value."""
        events, values = list(self.events), list(self.values)
        if events[-1] != self.count:
            events.append(self.count)
            values.append(current)
        return events, values


class StorageTracker(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Live and peak bytes of the storages created while the mode is active.

    ``open_window``/``close_window`` bracket the span whose peak is wanted; the peak is
    measured above the live bytes at ``open_window``, and the allocation sites that were
    alive at that peak are kept for reports.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # True (torch's default) wraps __torch_dispatch__ so that its first call imports
        # torch._dynamo: seconds of start-up, and ~50 non-propagating loggers that pytest's
        # logging plugin then visits in every test phase (about 1 ms per test).
        return False

    def __init__(
        self,
        round_bytes: int = 1,
        stack_depth: int = STACK_DEPTH,
        history: EventHistory | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.history = history
        self.round_bytes = max(1, round_bytes)
        self.stack_depth = stack_depth
        self.current = 0
        self.peak = 0
        self.baseline = 0
        self._live: dict[int, _Live] = {}
        self._paused = 0
        self._in_window = False
        # live [bytes, storages] per site, for storages allocated inside the window
        self._window_sites: dict[RawStack, list[int]] = {}
        self._peak_dirty = False
        self._peak_sites: list[tuple[RawStack, int, int]] = []
        self._frames = _frame_filter()

    # -- accounting -------------------------------------------------------------------

    def _round(self, n: int) -> int:
        r = self.round_bytes
        return n if r == 1 else -(-n // r) * r

    def _note_peak_candidate(self) -> None:
        # The live set at the peak is copied lazily, at the first decrease after a new
        # peak, so a steadily growing forward pass costs one copy rather than one per op.
        if self._peak_dirty:
            self._peak_sites = [(s, b, c) for s, (b, c) in self._window_sites.items()]
            self._peak_dirty = False

    def _grow(self, n: int) -> None:
        self.current += n
        if self.history is not None:
            self.history.record(self.current)
        if self.current > self.peak:
            self.peak = self.current
            if self._in_window:
                self._peak_dirty = True

    def _shrink(self, n: int) -> None:
        self._note_peak_candidate()
        self.current -= n
        if self.history is not None:
            self.history.record(self.current)

    def _sites(
        self, entries: list[tuple[RawStack, int, int]], limit: int | None = None
    ) -> tuple[Site, ...]:
        """Sites with their lines named, summed per named stack (two instructions of one
        line are one site)."""
        resolve = self._frames.resolve
        return aggregate([(resolve(s), b, c) for s, b, c in entries], limit)

    def _site_add(self, site: RawStack, n: int, count: int) -> None:
        acc = self._window_sites.get(site)
        if acc is None:
            self._window_sites[site] = [n, count]
        else:
            acc[0] += n
            acc[1] += count

    def _site_sub(self, site: RawStack, n: int, count: int) -> None:
        acc = self._window_sites.get(site)
        if acc is None:
            return
        acc[0] -= n
        acc[1] -= count
        if acc[1] <= 0:
            del self._window_sites[site]

    def _freed(self, key: int, ref: weakref.ref[Any]) -> None:
        """A tracked storage was freed (the weak reference's callback, bound to its key)."""
        entry = self._live.get(key)
        if entry is None or entry.ref is not ref:
            return
        del self._live[key]
        # _shrink and _site_sub written out: this runs once per freed storage.
        if self._peak_dirty:
            self._note_peak_candidate()
        n = entry.nbytes
        current = self.current = self.current - n
        if self.history is not None:
            self.history.record(current)
        if entry.in_window:
            site = entry.site
            acc = self._window_sites.get(site)
            if acc is not None:
                acc[0] -= n
                acc[1] -= 1
                if acc[1] <= 0:
                    del self._window_sites[site]

    def _track(self, storage: Any, key: int) -> None:
        # _round, _grow and _site_add written out: this runs once per new storage.
        n = storage.nbytes()
        r = self.round_bytes
        if r != 1:
            n = -(-n // r) * r
        site = self._frames.raw_user_frames(sys._getframe(2), self.stack_depth)
        in_window = self._in_window
        self._live[key] = _Live(n, site, weakref.ref(storage, partial(self._freed, key)),
                                in_window)
        if in_window:
            acc = self._window_sites.get(site)
            if acc is None:
                self._window_sites[site] = [n, 1]
            else:
                acc[0] += n
                acc[1] += 1
        current = self.current = self.current + n
        if self.history is not None:
            self.history.record(current)
        if current > self.peak:
            self.peak = current
            if in_window:
                self._peak_dirty = True

    def _resized(self, entry: _Live, storage: Any) -> None:
        n = self._round(storage.nbytes())
        delta = n - entry.nbytes
        if delta == 0:
            return
        entry.nbytes = n
        if entry.in_window:
            self._site_add(entry.site, delta, 0)
        if delta > 0:
            self._grow(delta)
        else:
            self._shrink(-delta)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        # An OpOverload's __call__ only calls its C++ op: calling that directly saves a
        # Python frame per op (subclasses that override __call__ keep it).
        call = func._op if type(func) is _OpOverload else func
        out = call(*args, **kwargs) if kwargs else call(*args)
        if self._paused:
            return out
        live = self._live
        input_keys: set[int] | None = None
        fresh: bool | None = None
        for t in (out,) if isinstance(out, torch.Tensor) else _tensors(out, []):
            try:
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # sparse, other storage-less layouts
                continue
            key = storage._cdata
            entry = live.get(key)
            if entry is not None:
                if storage.nbytes() != entry.nbytes:
                    self._resized(entry, storage)  # resize_, out= into a too-small tensor
                continue
            # The usual case, a new result, without walking the op's inputs: the schema
            # rules out aliasing and nothing but this result holds the storage.
            if _use_count(key) == 2:
                if fresh is None:
                    fresh = _FRESH.get(func)
                    if fresh is None:
                        fresh = _FRESH[func] = _returns_fresh(func)
                if fresh:
                    for a in args:
                        if a is t:
                            break
                    else:
                        self._track(storage, key)
                        continue
            if input_keys is None:
                input_keys = {
                    s._cdata
                    for a in _tensors((args, kwargs), [])
                    if (s := _storage(a)) is not None
                }
            if key not in input_keys:
                self._track(storage, key)
        return out

    # -- control ----------------------------------------------------------------------

    def pause(self) -> None:
        self._paused += 1

    def resume(self) -> None:
        self._paused -= 1

    def open_window(self) -> None:
        self._in_window = True
        self._window_sites = {}
        self._peak_sites = []
        self._peak_dirty = False
        self.baseline = self.current
        self.peak = self.current
        if self.history is not None:
            self.history.mark("body starts")

    def close_window(self, site_limit: int | None = None) -> PeakResult:
        self._note_peak_candidate()
        self._in_window = False
        if self.history is not None:
            self.history.mark("body ends")
        sites = self._sites(self._peak_sites, site_limit)
        return PeakResult(peak_bytes=self.peak - self.baseline, baseline_bytes=self.baseline,
                          sites=sites)

    def _live_bytes(self) -> int:
        return sum(e.nbytes for e in self._live.values())

    def survivors(self, owned_by: Sequence[object] = (), tolerance: int = 0) -> LeakResult:
        """What is still alive now, less what ``owned_by`` reaches, after as much garbage
        collection as a verdict against ``tolerance`` bytes needs."""
        collect_for_verdict(self._live_bytes, tolerance)
        if self._live and owned_by:
            owned = reachable_storages(owned_by, storage_identity, set(self._live))
            for key in owned:
                self._live.pop(key, None)
        return self.alive()

    def live_refs(self) -> dict[int, weakref.ref[Any]]:
        """The storages alive now, each with its own weak reference (a key alone can be
        reused by a later storage at the same address)."""
        return {key: entry.ref for key, entry in self._live.items()}

    def alive(self, made_after: dict[int, weakref.ref[Any]] | None = None) -> LeakResult:
        """The storages alive now that were made while tracking, with their sites; with
        ``made_after`` (a :meth:`live_refs`), only those made in the body since then."""
        entries = [(k, e) for k, e in self._live.items()
                   if made_after is None or (e.in_window and made_after.get(k) is not e.ref)]
        return LeakResult(
            leaked_bytes=sum(e.nbytes for _, e in entries),
            storages=len(entries),
            sites=self._sites([(e.site, e.nbytes, 1) for _, e in entries]),
            graph_tensors=count_graph_holders({k for k, _ in entries}) if entries else 0,
            survivors=tuple((k, e.nbytes) for k, e in entries),
        )

    def forget(self) -> None:
        """Drop every weak reference, so later frees no longer call back into us."""
        self._live.clear()
        self._window_sites.clear()
        self._peak_sites.clear()


def warm_up() -> None:
    """Dispatch one op under the mode at session start, so lazy imports and caches on
    torch's dispatch path are filled before the first test is measured."""
    with StorageTracker():
        torch.empty(0)


class CpuTestTracker(TestTracker):
    def __init__(self, round_bytes: int, history: bool = False) -> None:
        self.mode = StorageTracker(
            round_bytes=round_bytes, history=EventHistory() if history else None
        )
        self._entered = False
        self._after_first_run: dict[int, weakref.ref[Any]] | None = None

    def start(self) -> None:
        self.mode.__enter__()  # type: ignore[no-untyped-call]
        self._entered = True

    def pause(self) -> None:
        self.mode.pause()

    def resume(self) -> None:
        self.mode.resume()

    def body_start(self) -> None:
        self.mode.open_window()

    def body_end(self) -> PeakResult:
        return self.mode.close_window()

    def live_bytes(self) -> int:
        gc.collect()
        if self._after_first_run is None:
            self._after_first_run = self.mode.live_refs()
        return self.mode.current

    def _exit(self) -> None:
        if self._entered:
            self._entered = False
            self.mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]

    def finish(self, owned_by: Sequence[object] = (), tolerance: int = 0) -> LeakResult:
        self._exit()
        return self.mode.survivors(owned_by, tolerance)

    def growth_survivors(self) -> LeakResult | None:
        if self._after_first_run is None:
            return None
        return self.mode.alive(made_after=self._after_first_run)

    def timeline(self) -> Timeline | None:
        history = self.mode.history
        if history is None:
            return None
        events, values = history.points(self.mode.current)
        return Timeline(
            allocated=values,
            events=events,
            body_start_bytes=self.mode.baseline,
            marks=tuple(history.marks),
        )

    def close(self) -> None:
        self._exit()
        self.mode.forget()


class CpuBackend(Backend):
    name = "cpu"
    device = "cpu"

    def __init__(self, round_bytes: int = 1, history: bool = False) -> None:
        self.round_bytes = round_bytes
        self.history = history  # keep each test's events for its timeline
        warm_up()
        rounding = "exact bytes" if round_bytes == 1 else f"rounded up to {round_bytes} B"
        self.label = f"CPU measurement: tensor storages tracked per op, {rounding}"

    def tracker(self) -> TestTracker:
        return CpuTestTracker(self.round_bytes, history=self.history)
