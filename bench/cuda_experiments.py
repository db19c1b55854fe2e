"""The CUDA facts behind the backend's design, measured on the machine at hand.

Each line answers one question that ``bench/RESULTS-gpu.md`` quotes:

- how much allocator memory cuBLAS workspaces take, per thread and stream;
- how much of the CNN's CPU-versus-CUDA gap is cuDNN's (the same step with cuDNN off);
- how much of the transformer block's gap is the attention kernel's (each SDPA backend);
- what CUDA graphs and ``torch.compile(mode="reduce-overhead")`` leave behind in a test;
- what a test's peak looks like when it runs matmuls on a side stream or another thread;
- the CUDA tracker's own cost per test.

    python bench/cuda_experiments.py          # needs a CUDA GPU
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpumem_zoo as zoo

from pytest_gpumem.backends.cuda import CudaBackend

KEPT: list[object] = []


def _allocated() -> int:
    torch.cuda.synchronize()
    return int(torch.cuda.memory_allocated())


def workspaces() -> None:
    torch._C._cuda_clearCublasWorkspaces()
    a = torch.randn(256, 256, device="cuda")
    before = _allocated()
    (a @ a).sum().item()
    forward = _allocated() - before
    torch.nn.functional.linear(a, a, a[0]).sum().item()
    lt = _allocated() - before - forward
    layer = torch.nn.Linear(64, 64).cuda()
    before = _allocated()
    layer(torch.randn(8, 64, device="cuda")).sum().backward()  # type: ignore[no-untyped-call]
    grads = sum(-(-p.grad.untyped_storage().nbytes() // 512) * 512  # the allocator's blocks
                for p in layer.parameters() if p.grad is not None)
    backward = _allocated() - before - grads
    print(f"cuBLAS workspace, first matmul on this thread: {forward:,} B; first cublasLt "
          f"(addmm with bias): {lt:,} B; first backward (autograd's thread): {backward:,} B")


def kernel_scratch(device: torch.device) -> None:
    cnn, block = zoo.CASES[1], zoo.CASES[2]
    for enabled in (True, False):
        torch.backends.cudnn.enabled = enabled
        print(f"CNN allocator peak, cudnn.enabled={enabled}: "
              f"{zoo.cuda_allocator_peak(cnn, device):,} B")
    torch.backends.cudnn.enabled = True
    from torch.nn.attention import SDPBackend, sdpa_kernel

    print(f"transformer block, default attention: {zoo.cuda_allocator_peak(block, device):,} B")
    for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION):
        with sdpa_kernel([backend]):
            print(f"transformer block, {backend.name}: "
                  f"{zoo.cuda_allocator_peak(block, device):,} B")


def _graph_dies_with_the_test() -> None:
    x = torch.randn(1024, 1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x @ x
    graph.replay()


def _graph_kept() -> None:
    x = torch.randn(1024, 1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x @ x
    KEPT.append((graph, x, y))


def _reduce_overhead() -> None:
    f = torch.compile(lambda t: (t.sin() * 2).sum(), mode="reduce-overhead")
    for _ in range(4):
        f(torch.randn(4096, device="cuda")).item()


def _side_stream() -> None:
    a = torch.randn(256, 256, device="cuda")
    with torch.cuda.stream(torch.cuda.Stream()):
        (a @ a).sum().item()


def _other_thread() -> None:
    a = torch.randn(256, 256, device="cuda")
    worker = threading.Thread(target=lambda: (a @ a).sum().item())
    worker.start()
    worker.join()


def tracked_cases() -> None:
    backend = CudaBackend(record_history=True)
    cases: list[tuple[str, Callable[[], None]]] = [
        ("CUDA graph captured and dropped in the test", _graph_dies_with_the_test),
        ("CUDA graph kept in a global", _graph_kept),
        ("torch.compile reduce-overhead, first in the process", _reduce_overhead),
        ("torch.compile reduce-overhead, second", _reduce_overhead),
        ("matmul on a new side stream", _side_stream),
        ("matmul on a new thread", _other_thread),
    ]
    for name, body in cases:
        tracker = backend.tracker()
        tracker.start()
        tracker.body_start()
        body()
        peak = tracker.body_end()
        leak = tracker.finish()
        tracker.close()
        where = [(s.nbytes, s.count, s.frames[:1]) for s in leak.sites]
        print(f"{name}: peak {peak.peak_bytes:,} B, leaked {leak.leaked_bytes:,} B {where}")
    KEPT.clear()
    backend.shutdown()


def lifecycle_cost(n: int = 500) -> None:
    for history in (False, True):
        backend = CudaBackend(record_history=history)
        start = time.perf_counter()
        for _ in range(n):
            tracker = backend.tracker()
            tracker.start()
            tracker.body_start()
            float(torch.ones(8, device="cuda").sum())
            tracker.body_end()
            tracker.finish()
            tracker.close()
        per_test = (time.perf_counter() - start) / n
        print(f"tracker lifecycle around ones(8).sum(), history={history}: "
              f"{per_test * 1e3:.3f} ms")
        backend.shutdown()


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("bench/cuda_experiments.py needs a CUDA GPU")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name()}")
    device = torch.device("cuda", torch.cuda.current_device())
    workspaces()
    kernel_scratch(device)
    tracked_cases()
    lifecycle_cost()


if __name__ == "__main__":
    main()
