"""The contract between the plugin's hooks and a way of measuring tensor memory."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_gpumem.timeline import Timeline

# (filename, line number, function name), innermost user frame first in a stack.
Frame = tuple[str, int, str]


@dataclass(frozen=True)
class Site:
    """Bytes attributed to one user call stack (library frames removed)."""

    frames: tuple[Frame, ...]
    nbytes: int
    count: int

    def to_json(self) -> dict[str, object]:
        return {
            "bytes": self.nbytes,
            "count": self.count,
            "frames": [{"file": f, "line": ln, "function": fn} for f, ln, fn in self.frames],
        }


@dataclass(frozen=True)
class PeakResult:
    """The body's highest tensor memory, above what was allocated when the body started."""

    peak_bytes: int
    baseline_bytes: int
    sites: tuple[Site, ...] = ()
    context: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LeakResult:
    """Tensor memory the test allocated that is still alive once it is torn down."""

    leaked_bytes: int
    storages: int = 0
    sites: tuple[Site, ...] = ()
    graph_tensors: int = 0  # survivors that still hold a grad_fn, i.e. an autograd graph
    survivors: tuple[tuple[int, int], ...] = ()  # (storage key, bytes): see TestTracker.key_of


def aggregate(
    entries: list[tuple[tuple[Frame, ...], int, int]], limit: int | None = None
) -> tuple[Site, ...]:
    """Sum (bytes, storages) per call stack, largest first."""
    sums: dict[tuple[Frame, ...], list[int]] = {}
    for site, nbytes, count in entries:
        acc = sums.setdefault(site, [0, 0])
        acc[0] += nbytes
        acc[1] += count
    ranked = sorted(sums.items(), key=lambda kv: (-kv[1][0], kv[0]))
    if limit is not None:
        ranked = ranked[:limit]
    return tuple(Site(frames=s, nbytes=b, count=c) for s, (b, c) in ranked)


class TestTracker(ABC):
    """Follows one test from before its setup to after its teardown.

    The hooks call, in order: ``start`` (before fixtures), ``pause``/``resume`` around the
    setup of every fixture wider than function scope, ``body_start``/``body_end`` around
    the test function, optionally ``live_bytes`` between repeated bodies, then ``finish``
    after teardown, optionally ``timeline``, then ``close``.
    """

    __test__ = False  # not a pytest test class, despite the name
    # Why this tracker's figures cannot be trusted (set by a backend that finds out, e.g.
    # cpu-fast when another profiler took its session); None while they can.
    problem: str | None = None

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def pause(self) -> None: ...

    @abstractmethod
    def resume(self) -> None: ...

    @abstractmethod
    def body_start(self) -> None: ...

    @abstractmethod
    def body_end(self) -> PeakResult: ...

    @abstractmethod
    def live_bytes(self) -> int:
        """Bytes the test has allocated and not freed so far (garbage collected first)."""

    @abstractmethod
    def finish(self, owned_by: Sequence[object] = (), tolerance: int = 0) -> LeakResult:
        """What the test left alive, less what ``owned_by`` (the test's own class instance,
        which pytest or a protocol plugin may still hold) reaches. Garbage is collected only
        as far as needed to tell whether that is over ``tolerance`` bytes (see
        ``leaks.collect_for_verdict``): at or under it, the bytes may still count garbage."""

    @abstractmethod
    def close(self) -> None: ...

    def key_of(self, storage: Any) -> int:
        """How this backend names a storage in ``LeakResult.survivors``: its identity."""
        return int(storage._cdata)

    # Why ``timeline()`` gave none, for the run's closing note.
    no_timeline_reason = "this backend keeps no allocation events"

    def growth_survivors(self) -> LeakResult | None:
        """What the repeated runs after the first (a warm-up: lazy state is made there)
        allocated and still hold, with sites: the report of a test whose live memory grew
        on every ``repeat`` run, asked only then (its verdict is already taken); ``None``
        when the backend cannot tell."""
        return None

    def explain_peak(self) -> tuple[Site, ...]:
        """The allocation sites alive at the body's peak, for a backend that works them out
        only when a test fails (reading them costs more than measuring); ``()`` when it
        cannot tell."""
        return ()

    def timeline(self) -> Timeline | None:
        """Allocated (and reserved) memory over the test so far, for the HTML timeline;
        called after ``finish`` and before ``close``. ``None`` when the backend kept none."""
        return None


class Backend(ABC):
    """A measuring method; ``label`` is printed in every report so numbers are not misread."""

    name: str
    device: str
    label: str
    has_snapshots: bool = False

    @abstractmethod
    def tracker(self) -> TestTracker: ...

    def dump_snapshot(self, path: Path) -> Path | None:
        """Write an allocation-history artifact for a failing test, if the backend has one."""
        return None

    def shutdown(self) -> None:  # noqa: B027 - most backends change nothing process-wide
        """Undo process-wide changes made when the backend was created."""
