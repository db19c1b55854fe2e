"""The CUDA backend's logic that needs no GPU: replaying the allocator's history, the peak
windows' guard against a test's own reset, and the NVML-versus-allocator explanation."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gpumem.backends import cuda_trace
from pytest_gpumem.nvml import NvmlReading, outside_allocator

pytest.importorskip("torch")

MiB = 2**20


def entry(action: str, addr: int, size: int, t: int, *frames: tuple[str, int, str]) -> Any:
    return {
        "action": action, "addr": addr, "size": size, "time_us": t,
        "frames": [{"filename": f, "line": ln, "name": fn} for f, ln, fn in frames],
    }


def keep_all(records: Any) -> Any:
    return tuple(records)


USER = ("/project/test_model.py", 12, "test_step")
HELPER = ("/project/helpers.py", 3, "make")

TRACE = [
    entry("alloc", 1, 4 * MiB, 10, USER),                # before the window
    entry("alloc", 2, 8 * MiB, 20, HELPER, USER),
    entry("alloc", 3, 2 * MiB, 21, USER),
    entry("free_requested", 2, 8 * MiB, 22),
    entry("free_completed", 2, 8 * MiB, 23),
    entry("free_requested", 1, 4 * MiB, 24),             # an older block freed in the window
    entry("alloc", 4, 1 * MiB, 25, USER),
    entry("segment_alloc", 99, 20 * MiB, 26),
]


def test_entries_between_uses_the_time_stamps() -> None:
    window = cuda_trace.entries_between(TRACE, 20, 23)
    assert [e["addr"] for e in window] == [2, 3, 2, 2]
    assert cuda_trace.entries_between([{"action": "alloc"}], 0) == []  # no stamps, no entries


def test_survivors_are_the_blocks_allocated_and_not_freed() -> None:
    blocks = cuda_trace.surviving_blocks(cuda_trace.entries_between(TRACE, 20), keep_all)
    assert [(a, s) for a, s, _ in blocks] == [(3, 2 * MiB), (4, 1 * MiB)]
    assert blocks[0][2] == (USER,)


def test_peak_set_is_what_was_alive_at_the_highest_net_allocation() -> None:
    blocks = cuda_trace.blocks_at_peak(cuda_trace.entries_between(TRACE, 20), keep_all)
    assert sorted((a, s) for a, s, _ in blocks) == [(2, 8 * MiB), (3, 2 * MiB)]
    assert dict((a, f) for a, _, f in blocks)[2] == (HELPER, USER)


def test_peak_after_older_frees_counts_them_against_the_window() -> None:
    # 4 MiB allocated before the window is freed first; what the window allocates later
    # never brings the net above where it started, so nothing of it is at a peak.
    trace = [
        entry("free_requested", 1, 4 * MiB, 1),
        entry("alloc", 5, 3 * MiB, 2, USER),
        entry("free_requested", 5, 3 * MiB, 3),
        entry("alloc", 6, 2 * MiB, 4, HELPER),
    ]
    assert cuda_trace.blocks_at_peak(trace, keep_all) == []  # net stays at or below zero


def test_recorded_frames_become_user_frames() -> None:
    from pytest_gpumem.backends.frames import FrameFilter

    torch_file = __import__("torch").__file__
    e = entry("alloc", 7, 512, 1, (torch_file, 5, "ones"), USER,
              (__import__("_pytest.python").python.__file__, 9, "pytest_pyfunc_call"), HELPER)
    picked = FrameFilter().user_records(cuda_trace.recorded_frames(e), depth=6)
    assert picked == (USER,)  # torch skipped, the walk ends at pytest
    compiled = entry("alloc", 8, 512, 1, ("/tmp/torchinductor_ci/k4/ck4u.py", 128, "call"), USER)
    assert FrameFilter().user_records(cuda_trace.recorded_frames(compiled), 6) == (USER,)


class FakeRuntime:
    """Stands in for ``torch._C``'s allocator statistics on a CPU-only machine."""

    def __init__(self) -> None:
        self.allocated = 0
        self.peak = 0

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def free(self, n: int) -> None:
        self.allocated -= n

    def _cuda_memoryStats(self, index: int) -> dict[str, Any]:
        return {"allocated_bytes": {"all": {"peak": self.peak, "current": self.allocated}}}

    def _cuda_resetPeakMemoryStats(self, index: int) -> None:
        self.peak = self.allocated


def test_a_reset_inside_the_window_does_not_lose_the_peak() -> None:
    import torch

    from pytest_gpumem.backends.cuda import peak_windows

    runtime = FakeRuntime()
    original = runtime._cuda_resetPeakMemoryStats
    windows = peak_windows(torch.device("cuda", 0), runtime)
    outer = windows.open()
    runtime.alloc(64 * MiB)
    runtime.free(64 * MiB)
    runtime._cuda_resetPeakMemoryStats(0)  # what torch.cuda.reset_peak_memory_stats calls
    inner = windows.open()  # a gpumem fixture block inside the test
    runtime.alloc(MiB)
    assert windows.close(inner) == MiB
    runtime.free(MiB)
    assert windows.close(outer) == 64 * MiB
    assert runtime._cuda_resetPeakMemoryStats == original  # unwrapped once nothing is open
    runtime.alloc(2 * MiB)
    runtime._cuda_resetPeakMemoryStats(0)
    assert runtime.peak == 2 * MiB


def test_nvml_explanation_splits_the_driver_figure() -> None:
    GiB = 2**30
    process = NvmlReading(3 * GiB, 80 * GiB, "process")
    line = outside_allocator(process, reserved=2 * GiB, allocated=GiB + GiB // 2)
    assert line.startswith("this process uses 3.00 GiB by NVML")
    assert "reserved 2.00 GiB of it (1.50 GiB in live tensors, 512.00 MiB cached" in line
    assert "the other 1.00 GiB is outside the allocator: the CUDA context" in line
    device = outside_allocator(NvmlReading(5 * GiB, 80 * GiB, "device"), 2 * GiB, GiB)
    assert device.startswith("the whole device uses 5.00 GiB")
    assert device.endswith("plus every other process on the device")


class FakeCounters:
    """Allocated bytes of a pretend device whose workspaces the fakes below create and free."""

    def __init__(self) -> None:
        self.tensors = 0
        self.workspaces = 0
        self.device = None
        self.warm_ups = 0

    def allocated(self) -> int:
        return self.tensors + self.workspaces


def test_workspaces_are_set_up_once_while_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_gpumem.backends import cuda

    device = FakeCounters()

    def warm(_: object) -> None:
        device.workspaces, device.warm_ups = 66 * MiB, device.warm_ups + 1

    monkeypatch.setattr(cuda, "_clear_cublas_workspaces", lambda: setattr(device, "workspaces", 0))
    monkeypatch.setattr(cuda, "warm_cublas_workspaces", warm)
    workspaces = cuda.Workspaces(device)  # type: ignore[arg-type]
    device.tensors = 10 * MiB
    assert workspaces.prepare() == 10 * MiB  # without workspaces...
    assert (workspaces.nbytes, device.warm_ups) == (66 * MiB, 1)  # ...which now exist
    workspaces.settle(device.allocated())  # a test ended with nothing left behind
    assert workspaces.prepare() == 10 * MiB and device.warm_ups == 1  # no second set-up
    device.tensors += MiB  # something ran between tests
    assert workspaces.prepare() == 11 * MiB and device.warm_ups == 2
    assert workspaces.release() == 11 * MiB and workspaces.nbytes == 0
