"""The CUDA backend: the caching allocator's own counters, read around each test.

Peak = the allocator's ``allocated_bytes.all.peak`` over the body, minus the bytes
allocated when the body started. Leaks compare ``memory_allocated`` before the test's setup
with the value after its teardown. The CUDA context is not allocator memory and never
shows up here.

cuBLAS workspaces are allocator memory that torch keeps for the life of the process, one
per (thread's cuBLAS handle, stream): on an H100 with torch 2.11, 32 MiB for the first
matmul on a thread plus 1 MiB for cublasLt, so a first training step grows by 65 MiB
(forward thread and autograd's backward thread). They are process set-up, not the test's
memory, and whether a test creates them depends on which tests ran before it. So every test
starts from the same state: the workspaces of the current stream, on this thread and on the
backward thread, exist before its setup (see :class:`Workspaces`), and their bytes are known.
The body's peak leaves them out, as a steady-state training step sees it; the leak check
counts without any workspace. A test that runs matmuls on another stream or thread still
pays that workspace in its peak (never as a leak).

A test that calls ``torch.cuda.reset_peak_memory_stats()`` itself would wipe the peak the
plugin is measuring: while a window is open, torch's reset first folds the peak so far into
every open window.

Allocation history is recorded so a failing test can leave a snapshot for
https://pytorch.org/memory_viz, and so a failure can name the lines that allocated.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from pytest_gpumem.backends import cuda_trace
from pytest_gpumem.backends.base import (
    Backend,
    Frame,
    LeakResult,
    PeakResult,
    Site,
    TestTracker,
    aggregate,
)
from pytest_gpumem.backends.frames import FrameFilter
from pytest_gpumem.leaks import count_graph_holders, storage_address
from pytest_gpumem.timeline import Timeline, cuda_test_timeline

HISTORY_ENTRIES = 100_000
_MARKS = ("body starts", "body ends")
STACK_DEPTH = 6


def _peak_allocated(runtime: Any, index: int) -> int:
    return int(runtime._cuda_memoryStats(index)["allocated_bytes"]["all"]["peak"])


class _ResetGuard:
    """Wraps ``torch._C._cuda_resetPeakMemoryStats``, which every Python-level reset
    (``torch.cuda.reset_peak_memory_stats``, ``reset_max_memory_allocated``) calls, so a
    reset inside a test folds the peak so far into the open windows first. Installed only
    while a window is open."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.watchers: list[PeakWindows] = []
        self.original: Callable[[int], None] | None = None

    def reset(self, index: int) -> None:
        for watcher in list(self.watchers):
            watcher.fold()
        assert self.original is not None
        self.original(index)

    def add(self, windows: PeakWindows) -> None:
        if not self.watchers:
            self.original = self.runtime._cuda_resetPeakMemoryStats
            self.runtime._cuda_resetPeakMemoryStats = self.reset
        self.watchers.append(windows)

    def remove(self, windows: PeakWindows) -> None:
        self.watchers.remove(windows)
        if not self.watchers and self.original is not None:
            self.runtime._cuda_resetPeakMemoryStats = self.original
            self.original = None


class PeakWindows:
    """Nested peak windows on one device despite a single, process-wide peak counter.

    Opening a window resets the counter; the peak reached so far is first folded into every
    window that is already open, so an outer window (the test) survives an inner one (the
    ``gpumem`` fixture) or the test's own reset. ``runtime`` is ``torch._C`` (a stand-in
    in CPU tests).
    """

    def __init__(self, index: int, runtime: Any, guard: _ResetGuard) -> None:
        self.index = index
        self.runtime = runtime
        self.guard = guard
        self._open: list[list[int]] = []

    def open(self) -> list[int]:
        self.fold()
        if not self._open:
            self.guard.add(self)
        reset = self.guard.original or self.runtime._cuda_resetPeakMemoryStats
        reset(self.index)
        window = [_peak_allocated(self.runtime, self.index)]
        self._open.append(window)
        return window

    def fold(self) -> None:
        if not self._open:
            return
        peak = _peak_allocated(self.runtime, self.index)
        for window in self._open:
            window[0] = max(window[0], peak)

    def close(self, window: list[int]) -> int:
        self.fold()
        self._open.remove(window)
        if not self._open:
            self.guard.remove(self)
        return window[0]


_guards: dict[int, _ResetGuard] = {}
_windows: dict[tuple[int, int], PeakWindows] = {}


def peak_windows(device: torch.device, runtime: Any = None) -> PeakWindows:
    runtime = torch._C if runtime is None else runtime
    index = device.index if device.index is not None else torch.cuda.current_device()
    guard = _guards.setdefault(id(runtime), _ResetGuard(runtime))
    key = (id(runtime), index)
    if key not in _windows:
        _windows[key] = PeakWindows(index, runtime, guard)
    return _windows[key]


def _clear_cublas_workspaces() -> None:
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def warm_cublas_workspaces(device: torch.device) -> None:
    """Create the workspaces a training step's matmuls create, on the current stream: the
    forward's (cuBLAS and cublasLt, this thread) and the backward's (autograd's thread, also
    cublasLt there, which activation checkpointing's recomputation uses)."""
    with torch.inference_mode(False), torch.enable_grad():
        a = torch.ones(2, 2, device=device, requires_grad=True)
        a.register_hook(lambda g: torch.nn.functional.linear(g, g, g[0]))  # type: ignore[no-untyped-call]
        torch.nn.functional.linear(a, a, a[0]).sum().backward()  # type: ignore[no-untyped-call]


class Counters:
    """The allocator's statistics for one device, read without ``torch.cuda.memory_stats``,
    which flattens some 150 entries per call (0.4 ms: most of a test's overhead)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        self._runtime: Any = torch._C

    def stats(self) -> dict[str, Any]:
        return dict(self._runtime._cuda_memoryStats(self.index))

    def allocated(self) -> int:
        torch.cuda.synchronize(self.device)
        return int(self.stats()["allocated_bytes"]["all"]["current"])

    def reserved(self) -> int:
        return int(self.stats()["reserved_bytes"]["all"]["current"])


class Workspaces:
    """The cuBLAS workspaces every test starts with, shared by one backend's trackers.

    Setting them up costs a small forward and backward pass; a test pays it only when the
    allocator's state changed since the last test ended cleanly (the first test, a test that
    left memory behind or freed older memory, code that ran between tests).
    """

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self.nbytes = 0  # workspace bytes set up by the last ``prepare``
        self._settled_at: int | None = None  # allocated bytes when a test last ended cleanly

    def prepare(self) -> int:
        """Set the workspaces up (unless they still are); the allocated bytes without them."""
        now = self.counters.allocated()
        if now == self._settled_at:
            return now - self.nbytes
        base = self.release()
        warm_cublas_workspaces(self.counters.device)
        self.nbytes = self.counters.allocated() - base
        return base

    def release(self) -> int:
        """Free every workspace; the allocated bytes without them."""
        _clear_cublas_workspaces()
        self._settled_at = None
        self.nbytes = 0
        return self.counters.allocated()

    def settle(self, allocated: int) -> None:
        self._settled_at = allocated


def _now_us() -> int:
    return time.time_ns() // 1000  # the clock of the allocator trace's time_us


_filter: FrameFilter | None = None


def _pick_frames(records: Any) -> tuple[Frame, ...]:
    global _filter
    if _filter is None:
        _filter = FrameFilter()
    return _filter.user_records(records, STACK_DEPTH)


class CudaTestTracker(TestTracker):
    def __init__(
        self, device: torch.device, history: bool = False, workspaces: Workspaces | None = None
    ) -> None:
        self.device = device
        self._history = history
        self._counters = Counters(device)
        self._workspaces = workspaces if workspaces is not None else Workspaces(self._counters)
        self._times: dict[str, int] = {}
        self._start = 0  # allocated without workspaces before the test's setup
        self._excluded = 0
        self._paused_at: list[int] = []
        self._paused_spans: list[tuple[int, int]] = []  # wider fixtures' set-up, in time_us
        self._baseline = 0
        self._window: list[int] | None = None
        self._stats0: dict[str, Any] = {}

    def _allocated(self) -> int:
        return self._counters.allocated()

    def start(self) -> None:
        self._start = self._workspaces.prepare()
        self._times["start"] = _now_us()  # after the set-up, which is not the test's

    def pause(self) -> None:
        self._paused_at.append(self._allocated())
        self._times.setdefault("paused", _now_us())

    def resume(self) -> None:
        self._excluded += self._allocated() - self._paused_at.pop()
        if not self._paused_at:
            self._paused_spans.append((self._times.pop("paused"), _now_us()))

    def body_start(self) -> None:
        self._baseline = self._allocated()
        self._stats0 = self._counters.stats()
        self._window = peak_windows(self.device).open()
        self._times["body starts"] = _now_us()

    def body_end(self) -> PeakResult:
        torch.cuda.synchronize(self.device)
        self._times["body ends"] = _now_us()
        assert self._window is not None
        peak = peak_windows(self.device).close(self._window)
        self._window = None
        stats, before = self._counters.stats(), self._stats0
        context = {
            "reserved_peak_bytes": int(stats["reserved_bytes"]["all"]["peak"]),
            "num_alloc_retries": int(stats["num_alloc_retries"])
            - int(before.get("num_alloc_retries", 0)),
            "num_ooms": int(stats["num_ooms"]) - int(before.get("num_ooms", 0)),
            "cublas_workspace_bytes": self._workspaces.nbytes,
        }
        return PeakResult(peak_bytes=max(0, peak - self._baseline),
                          baseline_bytes=self._baseline, context=context)

    def live_bytes(self) -> int:
        gc.collect()
        live = self._workspaces.release() - self._start - self._excluded
        self._workspaces.prepare()  # the next run starts as the first one did
        self._times.setdefault("first run ends", _now_us())
        return live

    def _trace(self) -> list[dict[str, Any]]:
        snapshot = torch.cuda.memory._snapshot(self.device)
        traces = snapshot.get("device_traces") or []
        index = self.device.index or 0
        return list(traces[index]) if index < len(traces) else []

    def finish(self, owned_by: Sequence[object] = (), tolerance: int = 0) -> LeakResult:
        # What owned_by reaches is not discounted here: the allocator counts bytes, not
        # storages, so the CUDA backend reports it (see docs/pytest-gpumem.md).
        now = self._allocated()
        if now == self._start + self._workspaces.nbytes + self._excluded:
            self._workspaces.settle(now)  # nothing left behind, nothing older freed
            return LeakResult(leaked_bytes=0)
        # Exact from here: without workspaces, whatever the test did to them.
        leaked = self._workspaces.release() - self._start - self._excluded
        if leaked > max(0, tolerance):
            gc.collect()  # only when over the tolerance: a full collection costs ~0.1 s
            leaked = self._workspaces.release() - self._start - self._excluded
        if leaked <= 0 or not self._history:
            return LeakResult(leaked_bytes=max(0, leaked))
        return self._survivors(self._times["start"], None, leaked)

    @property
    def no_timeline_reason(self) -> str:  # type: ignore[override]
        if not self._history:
            return "cuda-fast records no allocation history"
        return "this torch's allocator trace has no timestamps"

    def growth_survivors(self) -> LeakResult | None:
        if not self._history or "first run ends" not in self._times:
            return None
        # Each repeated run's live count releases the cuBLAS workspaces and sets them up
        # again inside the body: released now, they are no survivor of it.
        self._workspaces.release()
        try:
            return self._survivors(self._times["first run ends"], None, None)
        finally:
            self._workspaces.prepare()

    def _survivors(self, start_us: int, end_us: int | None, leaked: int | None) -> LeakResult:
        """Blocks allocated in ``[start_us, end_us]`` and not freed there, outside paused
        spans; ``leaked`` is the counters' figure when known, else the blocks' sum."""
        entries = [
            e for e in cuda_trace.entries_between(self._trace(), start_us, end_us)
            if not any(a <= int(e["time_us"]) <= b for a, b in self._paused_spans)
        ]
        blocks = cuda_trace.surviving_blocks(entries, _pick_frames)
        return LeakResult(
            leaked_bytes=sum(size for _, size, _ in blocks) if leaked is None else leaked,
            storages=len(blocks),
            sites=aggregate([(frames, size, 1) for _, size, frames in blocks]),
            graph_tensors=count_graph_holders({a for a, _, _ in blocks}, storage_address),
            survivors=tuple((a, size) for a, size, _ in blocks),
        )

    def key_of(self, storage: Any) -> int:
        return storage_address(storage)

    def explain_peak(self) -> tuple[Site, ...]:
        if not self._history or "body ends" not in self._times:
            return ()
        entries = cuda_trace.entries_between(
            self._trace(), self._times["body starts"], self._times["body ends"]
        )
        blocks = cuda_trace.blocks_at_peak(entries, _pick_frames)
        return aggregate([(frames, size, 1) for _, size, frames in blocks])

    def timeline(self) -> Timeline | None:
        if not self._history or "start" not in self._times:
            return None
        return cuda_test_timeline(
            self._trace(),
            start_us=self._times["start"],
            allocated_end=self._allocated(),
            reserved_end=self._counters.reserved(),
            body_start_bytes=self._baseline,
            marks_us=[(self._times[n], n) for n in _MARKS if n in self._times],
        )

    def close(self) -> None:
        if self._window is not None:
            peak_windows(self.device).close(self._window)
            self._window = None


class CudaBackend(Backend):
    name = "cuda"
    label = "CUDA caching-allocator counters"

    def __init__(self, record_history: bool = True) -> None:
        self.torch_device = torch.device("cuda", torch.cuda.current_device())
        self.device = str(self.torch_device)
        # The context's first-use cost is paid here, not by the first test.
        torch.cuda.init()  # type: ignore[no-untyped-call]
        self._workspaces = Workspaces(Counters(self.torch_device))
        self._history = self.has_snapshots = record_history
        if not record_history:
            # Recording costs a Python stack per allocation: 1.30x a plain kornia run on an
            # H200, against 0.86x without it (bench/RESULTS-gpu.md).
            self.label = f"{self.label} (no allocation history: no sites or snapshots)"
        if record_history:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=HISTORY_ENTRIES
            )

    def tracker(self) -> TestTracker:
        return CudaTestTracker(self.torch_device, self._history, self._workspaces)

    def dump_snapshot(self, path: Path) -> Path | None:
        if not self._history:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.cuda.memory._dump_snapshot(str(path))  # type: ignore[no-untyped-call]
        return path

    def shutdown(self) -> None:
        if self._history:
            torch.cuda.memory._record_memory_history(enabled=None)
            self._history = self.has_snapshots = False
