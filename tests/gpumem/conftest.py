"""Helpers for running real pytest sessions with the plugin loaded."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable

import pytest

from pytest_gpumem.entrypoint import plugin_args

pytest.importorskip("torch", reason="the plugin's measurement tests need torch")

from pytest_gpumem.backends.cpu import warm_up

# In-process pytester runs forget modules first imported inside them, and some of torch's
# modules on the dispatch path cannot be imported twice: import them once, out here.
warm_up()

# pytest rewrites the asserts of every module of an entry-point plugin's distribution, and
# each in-process run drops the modules it imported: without this, every pytester run here
# re-imports (and re-rewrites) ~70 hypothesis modules for its plugin's terminal summary,
# about a second per run.
with contextlib.suppress(ImportError):
    import hypothesis.internal.observability  # noqa: F401

# The plugin collects garbage whenever a test leaves tensors behind; a frozen start-up heap
# (torch, pytest, hypothesis) keeps each of those collections short in these sessions.
gc.freeze()

RunGpumem = Callable[..., pytest.RunResult]


@pytest.fixture(autouse=True)
def cpu_only_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These sessions are the plugin as a CPU-only CI runner sees it (``auto`` picks the CPU
    backend); on a GPU machine they would measure CUDA instead of the CPU tensors they make.
    The CUDA backend has its own tests in tests/gpu."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # sessions in child processes (runpytest_subprocess, xdist workers) see no GPU either
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
__all__ = ["RunGpumem", "plugin_args"]


@pytest.fixture
def run_gpumem(pytester: pytest.Pytester) -> RunGpumem:
    """Run pytest in-process on the pytester directory, with the plugin and extra args, in
    file order (pytest-randomly, installed for the compatibility tests, stays off)."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(*plugin_args(), "-p", "no:randomly", *args)

    return run
