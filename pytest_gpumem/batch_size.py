"""Find the largest batch size whose step fits a memory budget, by measuring peaks.

Unlike an OOM-retry loop (accelerate's ``find_executable_batch_size`` starts large and
shrinks the batch each time the step raises out-of-memory), this search:

- never needs an OOM to learn that a size is too big: a size is rejected when its measured
  peak passes the *budget*, which can be well below the card's capacity (plan for a 16 GiB
  card on an 80 GiB CI GPU);
- skips sizes whose peak, extrapolated linearly from the sizes already measured, would
  pass the budget by more than ``overshoot``, so it does not drive the device into an OOM;
  an OOM that happens anyway is caught and counts as "does not fit";
- works on the CPU backend, where nothing ever OOMs, as an estimate of tensor memory;
- reports the peak at the size it found and at the next size, so the margin is visible.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_gpumem.backends.base import Backend
from pytest_gpumem.fixtures import GpumemProbe, probe_for
from pytest_gpumem.units import format_bytes, gib_to_bytes


@dataclass(frozen=True)
class Probe:
    """One size the search looked at; ``peak_bytes`` is ``None`` when the step ran out."""

    batch_size: int
    peak_bytes: int | None
    estimated: bool = False  # extrapolated from other probes, not run


@dataclass(frozen=True)
class BatchSizeResult:
    batch_size: int  # 0 when even ``low`` does not fit
    peak_bytes: int | None
    next_batch_size: int
    next_peak_bytes: int | None
    next_peak_estimated: bool
    budget_bytes: int
    backend: str
    probes: tuple[Probe, ...] = field(default=())

    def describe(self) -> str:
        if self.batch_size == 0:
            return (
                f"no batch size fits {format_bytes(self.budget_bytes)}: batch "
                f"{self.next_batch_size} peaks at {_peak_text(self.next_peak_bytes)} "
                f"({self.backend})"
            )
        estimate = " (extrapolated)" if self.next_peak_estimated else ""
        return (
            f"largest batch within {format_bytes(self.budget_bytes)}: {self.batch_size} "
            f"(peak {_peak_text(self.peak_bytes)}); batch {self.next_batch_size} peaks at "
            f"{_peak_text(self.next_peak_bytes)}{estimate}; {len(self.probes)} probes on "
            f"{self.backend}"
        )


def _peak_text(peak: int | None) -> str:
    return "out of memory" if peak is None else format_bytes(peak)


def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text.lower() or "can't allocate memory" in text
    )


def measure_step_peak(backend: Backend, step_fn: Callable[[int], Any], batch_size: int) -> int:
    """The peak of one call of ``step_fn`` above what was allocated before it."""
    with GpumemProbe(backend).track() as measured:
        step_fn(batch_size)
    return measured.peak_bytes


class _Search:
    def __init__(
        self,
        measure: Callable[[int], int | None],
        budget: int,
        overshoot: float,
    ) -> None:
        self.measure = measure
        self.budget = budget
        self.guard = budget * (1.0 + overshoot)
        self.peaks: dict[int, int | None] = {}
        self.estimates: dict[int, int] = {}

    def predicted(self, size: int) -> int | None:
        """A cautious guess of the peak at ``size`` from the sizes below it.

        With one size measured the peak is taken as proportional to the batch; with two,
        the larger of a linear and a power-law extrapolation, so that steps whose memory
        grows faster than linearly (attention over a growing sequence) are not
        underestimated into an out-of-memory probe.
        """
        below = sorted((b, p) for b, p in self.peaks.items() if p is not None and b < size)
        if not below:
            return None
        if len(below) == 1:
            b1, p1 = below[0]
            return p1 * size // b1
        (b0, p0), (b1, p1) = below[-2], below[-1]
        linear = p1 + (p1 - p0) / (b1 - b0) * (size - b1)
        power = linear
        if 0 < p0 < p1:
            exponent = math.log(p1 / p0) / math.log(b1 / b0)
            power = p1 * (size / b1) ** exponent
        return int(max(linear, power))

    def largest_predicted_fit(self) -> int | None:
        """Where a straight line through the two largest fitting sizes meets the budget."""
        known = sorted((b, p) for b, p in self.peaks.items() if p is not None and p <= self.budget)
        if len(known) < 2:
            return None
        (b0, p0), (b1, p1) = known[-2], known[-1]
        slope = (p1 - p0) / (b1 - b0)
        if slope <= 0:
            return None
        return b1 + int((self.budget - p1) // slope)

    def fits(self, size: int) -> bool:
        if size not in self.peaks and size not in self.estimates:
            guess = self.predicted(size)
            if guess is not None and guess > self.guard:
                self.estimates[size] = guess  # would pass the budget by far: do not run it
            else:
                self.peaks[size] = self.measure(size)
        if size in self.estimates:
            return False
        peak = self.peaks[size]
        return peak is not None and peak <= self.budget

    def run(self, low: int, high: int | None) -> tuple[int, int]:
        """Return (largest fitting size or 0, the size just above it).

        Probes alternate between the linear prediction, which finds the answer in a few
        steps when memory grows linearly with the batch, and plain doubling/bisection,
        which bounds the number of probes when it does not.
        """
        if not self.fits(low):
            return 0, low
        good, bad = low, None
        for turn in itertools.count():
            if bad is not None and bad - good <= 1:
                break
            if bad is None and good == high:
                return good, good + 1
            guess = self.largest_predicted_fit()
            trust = turn % 2 == 0  # every other probe ignores the guess: bounded probes
            if bad is None:
                # Grow at least 2x and at most 4x, unless the line says the answer is near.
                if guess is None or guess > 4 * good:
                    candidate = 4 * good if guess is not None else 2 * good
                elif guess > good:
                    candidate = guess
                else:
                    candidate = good + 1 if trust else 2 * good
                if high is not None:
                    candidate = min(candidate, high)
            else:
                candidate = guess if guess is not None and trust else (good + bad) // 2
                candidate = min(max(candidate, good + 1), bad - 1)
            if self.fits(candidate):
                good = candidate
            else:
                bad = candidate
        assert bad is not None
        return good, bad


def max_batch_size(
    step_fn: Callable[[int], Any],
    budget_gb: float | None = None,
    *,
    budget_bytes: int | None = None,
    low: int = 1,
    high: int | None = None,
    backend: str | Backend = "auto",
    round_bytes: int = 1,
    warmup: bool = True,
    overshoot: float = 0.5,
) -> BatchSizeResult:
    """Largest ``batch_size`` in ``[low, high]`` for which ``step_fn(batch_size)`` fits.

    ``budget_gb`` is in GiB (2**30 bytes); ``budget_bytes`` gives it exactly instead. The
    peak of a step is what it allocates above what was allocated before it, measured by
    the plugin's own backends (CUDA allocator counters, or CPU tensor-storage tracking).
    The search assumes a larger batch never needs less memory. With ``high=None`` it
    grows from ``low`` until a size does not fit. ``warmup`` runs ``step_fn(low)`` once
    unmeasured first, so one-time allocations (cuBLAS workspaces, lazy module state) do
    not make the first probe look bigger than the rest.
    """
    budget = _budget(budget_gb, budget_bytes)
    if isinstance(low, bool) or not isinstance(low, int) or low < 1:
        raise ValueError(f"low must be a whole number >= 1, got {low!r}")
    if high is not None and (isinstance(high, bool) or not isinstance(high, int) or high < low):
        raise ValueError(f"high must be a whole number >= low ({low}), got {high!r}")
    if isinstance(backend, str):
        from pytest_gpumem.backends import make_backend

        # Its own backend records no allocation history: the search needs only peaks, and
        # recording would go on slowing every allocation of the caller's process.
        owned = make_backend(backend, round_bytes=round_bytes, record_history=False)
        try:
            return _search(step_fn, budget, low, high, owned, warmup, overshoot)
        finally:
            owned.shutdown()
    return _search(step_fn, budget, low, high, backend, warmup, overshoot)


def _search(
    step_fn: Callable[[int], Any],
    budget: int,
    low: int,
    high: int | None,
    chosen: Backend,
    warmup: bool,
    overshoot: float,
) -> BatchSizeResult:

    def measure(size: int) -> int | None:
        try:
            return measure_step_peak(chosen, step_fn, size)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            _release_after_oom()
            return None

    if warmup:
        step_fn(low)
    search = _Search(measure, budget, overshoot)
    good, bad = search.run(low, high)
    if bad not in search.peaks and bad not in search.estimates:
        search.fits(bad)
    probes = tuple(
        sorted(
            [Probe(b, p) for b, p in search.peaks.items()]
            + [Probe(b, p, estimated=True) for b, p in search.estimates.items()],
            key=lambda probe: probe.batch_size,
        )
    )
    return BatchSizeResult(
        batch_size=good,
        peak_bytes=search.peaks.get(good) if good else None,
        next_batch_size=bad,
        next_peak_bytes=search.peaks[bad] if bad in search.peaks else search.estimates[bad],
        next_peak_estimated=bad in search.estimates,
        budget_bytes=budget,
        backend=chosen.label,
        probes=probes,
    )


def _budget(budget_gb: float | None, budget_bytes: int | None) -> int:
    if (budget_gb is None) == (budget_bytes is None):
        raise ValueError("give exactly one of budget_gb (GiB) and budget_bytes")
    budget = gib_to_bytes(budget_gb) if budget_gb is not None else budget_bytes
    if budget is None or budget <= 0:
        raise ValueError(f"the budget must be positive, got {budget_gb or budget_bytes!r}")
    return budget


def _release_after_oom() -> None:
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class BatchSizePlanner:
    """What the ``gpumem_batch_size`` fixture gives a test: the search on the session's
    backend, with ``--gpumem-max-gb`` (or ini ``gpumem_max_gb``) as the default budget.

    While it probes, the calling test's own measurement is paused, so the probes above the
    budget do not count as the test's leak, nor (on the CPU backend) as its peak. On CUDA
    the allocator's peak counter is process-wide: a test that plans batch sizes should not
    also carry a ``gpu_mem(max_gb=...)`` budget below what it probes.
    """

    def __init__(
        self,
        backend: Backend,
        default_budget_bytes: int | None,
        pause: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
    ) -> None:
        self.backend = backend
        self.default_budget_bytes = default_budget_bytes
        self._pause, self._resume = pause, resume

    def __call__(
        self,
        step_fn: Callable[[int], Any],
        budget_gb: float | None = None,
        *,
        low: int = 1,
        high: int | None = None,
        warmup: bool = True,
    ) -> BatchSizeResult:
        budget_bytes = None
        if budget_gb is None:
            if self.default_budget_bytes is None:
                raise ValueError(
                    "gpumem_batch_size needs budget_gb=..., or --gpumem-max-gb / ini "
                    "gpumem_max_gb for its default"
                )
            budget_bytes = self.default_budget_bytes
        self._pause()
        try:
            return max_batch_size(
                step_fn,
                budget_gb,
                budget_bytes=budget_bytes,
                low=low,
                high=high,
                backend=self.backend,
                warmup=warmup,
            )
        finally:
            self._resume()


@pytest.fixture
def gpumem_batch_size(request: pytest.FixtureRequest) -> BatchSizePlanner:
    """``gpumem_batch_size(step_fn, budget_gb=None, low=1, high=None)`` -> BatchSizeResult."""
    from pytest_gpumem.session import STATE

    state = request.config.stash[STATE]
    backend = probe_for(state).backend
    default = None if state.settings.budget is None else state.settings.budget.nbytes
    run = state.current
    if run is not None and run.item is request.node:
        return BatchSizePlanner(backend, default, run.tracker.pause, run.tracker.resume)
    return BatchSizePlanner(backend, default)
