"""The CUDA backend against torch.cuda's own counters, and the false-leak cases."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import plugin_args

torch = pytest.importorskip("torch")


def _backend():  # type: ignore[no-untyped-def]
    from pytest_gpumem.backends.cuda import CudaBackend

    return CudaBackend(record_history=False)


def test_peak_matches_allocator_counters() -> None:
    backend = _backend()
    tracker = backend.tracker()
    tracker.start()
    tracker.body_start()
    before = torch.cuda.memory_allocated()
    a = torch.empty(1024, 1024, device="cuda")  # 4 MiB, a multiple of the 512 B block
    b = torch.empty(512, 1024, device="cuda")
    expected = torch.cuda.max_memory_allocated() - before
    del a, b
    peak = tracker.body_end()
    tracker.close()
    assert peak.peak_bytes == expected == 6 * 2**20
    assert peak.context["num_ooms"] == 0


def test_nested_window_keeps_the_outer_peak() -> None:
    from pytest_gpumem.backends.cuda import peak_windows

    windows = peak_windows(torch.device("cuda", torch.cuda.current_device()))
    outer = windows.open()
    big = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
    del big
    inner = windows.open()  # resets the process-wide peak
    small = torch.empty(2**20, dtype=torch.uint8, device="cuda")
    inner_peak = windows.close(inner)
    outer_peak = windows.close(outer)
    del small
    assert outer_peak - inner_peak >= 7 * 2**20


def test_reset_inside_a_window_keeps_the_peak() -> None:
    from torch.cuda import reset_peak_memory_stats

    from pytest_gpumem.backends.cuda import peak_windows

    windows = peak_windows(torch.device("cuda", torch.cuda.current_device()))
    window = windows.open()
    big = torch.empty(32 * 2**20, dtype=torch.uint8, device="cuda")
    del big
    reset_peak_memory_stats()
    torch.cuda.reset_max_memory_allocated()
    assert windows.close(window) - torch.cuda.memory_allocated() >= 32 * 2**20


def test_workspaces_are_set_up_before_the_body_and_never_leak() -> None:
    backend = _backend()
    torch._C._cuda_clearCublasWorkspaces()
    layer = torch.nn.Linear(128, 128).cuda()
    x = torch.randn(16, 128, device="cuda")
    tracker = backend.tracker()
    tracker.start()
    tracker.body_start()
    before = torch.cuda.memory_allocated()
    layer(x).sum().backward()
    torch.cuda.synchronize()
    grads = sum(p.grad.untyped_storage().nbytes() for p in layer.parameters())
    grown = torch.cuda.memory_allocated() - before
    peak = tracker.body_end()
    layer.zero_grad(set_to_none=True)
    leak = tracker.finish()
    tracker.close()
    assert grown == grads  # no workspace appeared inside the body
    assert peak.peak_bytes < 2**20
    assert leak.leaked_bytes == 0


def test_cpu_and_cuda_backends_agree_on_an_mlp_step() -> None:
    from pytest_gpumem.backends.cpu import StorageTracker

    def build(device: str):  # type: ignore[no-untyped-def]
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
        ).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(64, 512, device=device), torch.randint(0, 10, (64,), device=device)

        def step() -> None:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)  # each step starts without gradients

        step()
        return step

    cpu_step = build("cpu")
    tracker = StorageTracker(round_bytes=512)
    with tracker:
        tracker.open_window()
        cpu_step()
        cpu_peak = tracker.close_window().peak_bytes
    tracker.forget()
    cuda_step = build("cuda")
    cuda_tracker = _backend().tracker()
    cuda_tracker.start()
    cuda_tracker.body_start()
    cuda_step()
    cuda_peak = cuda_tracker.body_end().peak_bytes
    cuda_tracker.close()
    # The workspaces exist before the body, so only tensors count: within 5% of each other.
    assert abs(cuda_peak - cpu_peak) <= 0.05 * cuda_peak, (cpu_peak, cuda_peak)


def test_sessions_false_leaks_and_real_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
import pytest
import torch

KEPT = []

@pytest.mark.gpu_mem
def test_first_matmul():
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()  # creates the cuBLAS workspace, which torch keeps

@pytest.mark.gpu_mem
def test_leaks():
    KEPT.append(torch.ones(2**20, device="cuda"))

@pytest.mark.gpu_mem(max_gb=0.001)
def test_over_budget():
    a = torch.ones(2**20, device="cuda")

@pytest.mark.gpu_mem(max_gb=1)
def test_real_oom():
    torch.cuda.set_per_process_memory_fraction(0.01)
    try:
        torch.empty(2**40, dtype=torch.uint8, device="cuda")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
""")
    result = pytester.runpytest(*plugin_args(), "--gpumem", "--gpumem-json=out.json",
                                "--gpumem-snapshot-dir=snaps")
    result.assert_outcomes(passed=2, failed=2, errors=1)  # test_leaks: a teardown error
    result.stdout.fnmatch_lines(["*backend cuda, device cuda:*", "*pytorch.org/memory_viz*"])
    records = {r["nodeid"].split("::")[1]: r for r in
               json.loads((pytester.path / "out.json").read_text())["tests"]}
    assert records["test_first_matmul"]["leaked_bytes"] == 0
    assert records["test_leaks"]["leaked_bytes"] >= 4 * 2**20
    assert records["test_over_budget"]["violations"] == ["peak"]
    assert "oom" in records["test_real_oom"]["violations"]
    assert list((pytester.path / "snaps").glob("*.pickle"))


def test_timeline_from_the_allocator_trace_matches_the_counters() -> None:
    from pytest_gpumem.backends.cuda import CudaBackend

    backend = CudaBackend(record_history=True)
    try:
        tracker = backend.tracker()
        tracker.start()
        before = torch.cuda.memory_allocated()
        tracker.body_start()
        a = torch.empty(4 * 2**20, dtype=torch.uint8, device="cuda")
        b = torch.empty(2 * 2**20, dtype=torch.uint8, device="cuda")
        del a, b
        peak = tracker.body_end()
        tracker.finish()
        timeline = tracker.timeline()
        tracker.close()
    finally:
        backend.shutdown()
    assert timeline is not None, "this torch's allocator trace has no time_us"
    assert timeline.allocated[0] == before
    assert timeline.allocated[-1] == torch.cuda.memory_allocated()
    assert timeline.peak - timeline.body_start_bytes == peak.peak_bytes == 6 * 2**20
    assert timeline.reserved and max(timeline.reserved) >= timeline.peak
    assert [label for _, label in timeline.marks] == ["body starts", "body ends"]
