"""Measurement backends: CUDA allocator counters, or tensor-storage tracking on any device.

Importing this package does not import torch; :func:`make_backend` does.
"""

from __future__ import annotations

import pytest

from pytest_gpumem.backends.base import Backend


def _torch_problem() -> str | None:
    """Why ``import torch`` fails, or None when it works."""
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name in ("torch", None) or str(exc.name).startswith("torch."):
            return "not installed"
        return f"cannot be imported ({type(exc).__name__}: {exc})"
    except Exception as exc:  # a broken install: a missing CUDA library, an ABI mismatch
        return f"cannot be imported ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    return None


def torch_available() -> bool:
    return _torch_problem() is None


def require_torch() -> None:
    """A one-line usage error, not a traceback, when measuring is asked for without a torch
    that imports."""
    problem = _torch_problem()
    if problem == "not installed":
        raise pytest.UsageError(
            "pytest_gpumem: --gpumem needs torch, which is not installed "
            "(pip install 'torch-memlint[gpumem]')"
        )
    if problem is not None:
        raise pytest.UsageError(f"pytest_gpumem: --gpumem needs torch, which {problem}")


def make_backend(
    choice: str, *, round_bytes: int = 1, record_history: bool = True, timeline: bool = False
) -> Backend:
    """Pick the backend for ``auto|cuda|cuda-fast|cpu|cpu-fast``; a wrong choice is a
    one-line usage error. ``cuda-fast`` is the CUDA backend without allocation history.

    ``timeline`` makes the CPU backend keep each test's allocation events; the CUDA
    backend draws timelines from the allocation history it records (not ``cuda-fast``).
    """
    require_torch()
    import torch

    if choice in ("cuda", "cuda-fast") or (choice == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise pytest.UsageError(
                f"pytest_gpumem: --gpumem-backend={choice}, but torch.cuda.is_available() is "
                f"False (torch {torch.__version__}); use --gpumem-backend=cpu or auto"
            )
        from pytest_gpumem.backends.cuda import CudaBackend

        return CudaBackend(record_history=record_history and choice != "cuda-fast")
    if choice == "cpu-fast":
        from pytest_gpumem.backends.cpu_events import CpuEventsBackend

        return CpuEventsBackend()
    from pytest_gpumem.backends.cpu import CpuBackend

    return CpuBackend(round_bytes=round_bytes, history=timeline)
