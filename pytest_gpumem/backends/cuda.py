"""The CUDA backend: the caching allocator's own counters, read around each test.

Peak = ``allocated_bytes.all.peak`` after ``reset_peak_memory_stats`` at the start of the
body, minus the bytes allocated at that moment. Leaks compare ``memory_allocated`` before
the test's setup with the value after its teardown, once cuBLAS workspaces (kept by torch
after the first matmul on a stream) are released. The CUDA context is not allocator memory
and never shows up here. Allocation history is recorded so a failing test can leave a
snapshot for https://pytorch.org/memory_viz.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import torch

from pytest_gpumem.backends.base import Backend, LeakResult, PeakResult, TestTracker
from pytest_gpumem.timeline import Timeline, cuda_test_timeline

HISTORY_ENTRIES = 100_000


class PeakWindows:
    """Nested peak windows on one device despite a single, process-wide peak counter.

    Opening a window resets the counter; the peak reached so far is first folded into every
    window that is already open, so an outer window (the test) survives an inner one (the
    ``gpumem`` fixture).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._open: list[list[int]] = []

    def open(self) -> list[int]:
        self._fold()
        torch.cuda.reset_peak_memory_stats(self.device)
        window = [torch.cuda.max_memory_allocated(self.device)]
        self._open.append(window)
        return window

    def _fold(self) -> None:
        peak = torch.cuda.max_memory_allocated(self.device)
        for window in self._open:
            window[0] = max(window[0], peak)

    def close(self, window: list[int]) -> int:
        self._fold()
        self._open.remove(window)
        return window[0]


_windows: dict[torch.device, PeakWindows] = {}


def peak_windows(device: torch.device) -> PeakWindows:
    return _windows.setdefault(device, PeakWindows(device))


def _clear_cublas_workspaces() -> None:
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def _now_us() -> int:
    return time.time_ns() // 1000  # the clock of the allocator trace's time_us


class CudaTestTracker(TestTracker):
    def __init__(self, device: torch.device, history: bool = False) -> None:
        self.device = device
        self._history = history
        self._times: dict[str, int] = {}
        self._start = 0
        self._excluded = 0
        self._paused_at: list[int] = []
        self._baseline = 0
        self._window: list[int] | None = None
        self._stats0: dict[str, int] = {}

    def _allocated(self) -> int:
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.memory_allocated(self.device))

    def start(self) -> None:
        _clear_cublas_workspaces()
        self._start = self._allocated()
        self._times["start"] = _now_us()

    def pause(self) -> None:
        self._paused_at.append(self._allocated())

    def resume(self) -> None:
        self._excluded += self._allocated() - self._paused_at.pop()

    def body_start(self) -> None:
        self._baseline = self._allocated()
        self._stats0 = dict(torch.cuda.memory_stats(self.device))
        self._window = peak_windows(self.device).open()
        self._times["body starts"] = _now_us()

    def body_end(self) -> PeakResult:
        torch.cuda.synchronize(self.device)
        self._times["body ends"] = _now_us()
        assert self._window is not None
        peak = peak_windows(self.device).close(self._window)
        self._window = None
        stats = torch.cuda.memory_stats(self.device)
        context = {
            "reserved_peak_bytes": int(stats.get("reserved_bytes.all.peak", 0)),
            "num_alloc_retries": int(stats.get("num_alloc_retries", 0))
            - int(self._stats0.get("num_alloc_retries", 0)),
            "num_ooms": int(stats.get("num_ooms", 0)) - int(self._stats0.get("num_ooms", 0)),
        }
        return PeakResult(peak_bytes=max(0, peak - self._baseline),
                          baseline_bytes=self._baseline, context=context)

    def live_bytes(self) -> int:
        gc.collect()
        _clear_cublas_workspaces()
        return self._allocated() - self._start - self._excluded

    def finish(self) -> LeakResult:
        _clear_cublas_workspaces()
        leaked = self._allocated() - self._start - self._excluded
        if leaked > 0:
            gc.collect()  # only when something survived: a full collection costs ~0.1 s
            _clear_cublas_workspaces()
            leaked = self._allocated() - self._start - self._excluded
        return LeakResult(leaked_bytes=max(0, leaked))

    def timeline(self) -> Timeline | None:
        if not self._history or "start" not in self._times:
            return None
        allocated = self._allocated()
        snapshot = torch.cuda.memory._snapshot(self.device)
        traces = snapshot.get("device_traces") or []
        index = self.device.index or 0
        trace = traces[index] if index < len(traces) else []
        return cuda_test_timeline(
            trace,
            start_us=self._times["start"],
            allocated_end=allocated,
            reserved_end=int(torch.cuda.memory_reserved(self.device)),
            body_start_bytes=self._baseline,
            marks_us=[(t, name) for name, t in self._times.items() if name != "start"],
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
        self._history = self.has_snapshots = record_history
        if record_history:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=HISTORY_ENTRIES
            )

    def tracker(self) -> TestTracker:
        return CudaTestTracker(self.torch_device, history=self._history)

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
