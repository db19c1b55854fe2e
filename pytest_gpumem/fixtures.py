"""``gpumem_device`` and ``gpumem``: tests that run on CUDA in GPU CI and on CPU elsewhere."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_gpumem.backends.base import Backend, Site
from pytest_gpumem.session import GpumemSession


@dataclass
class Measurement:
    """Filled in when the ``with gpumem.track()`` block ends."""

    backend: str
    device: str
    label: str
    peak_bytes: int = 0
    leaked_bytes: int = 0
    peak_sites: tuple[Site, ...] = ()
    leak_sites: tuple[Site, ...] = ()
    context: dict[str, int] = field(default_factory=dict)


class GpumemProbe:
    """Measures blocks of code with the session's backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self.backend.device)

    @contextmanager
    def track(self) -> Iterator[Measurement]:
        """Peak bytes above the start of the block, and bytes it leaves allocated."""
        backend = self.backend
        m = Measurement(backend.name, backend.device, backend.label)
        tracker = backend.tracker()
        tracker.start()
        try:
            tracker.body_start()
            try:
                yield m
            finally:
                peak = tracker.body_end()
                m.peak_bytes, m.peak_sites, m.context = peak.peak_bytes, peak.sites, peak.context
            leak = tracker.finish()
            m.leaked_bytes, m.leak_sites = leak.leaked_bytes, leak.sites
        finally:
            tracker.close()
        if tracker.problem is not None:
            warnings.warn(f"gpumem.track(): {tracker.problem}", GpumemWarning, stacklevel=3)


class GpumemWarning(UserWarning):
    """A ``gpumem.track()`` block whose figures the backend could not take."""


def probe_for(state: GpumemSession) -> GpumemProbe:
    pytest.importorskip("torch", reason="the gpumem fixtures need torch")
    return GpumemProbe(state.fixture_backend())
