"""What counts as a leak, and the clues a report gives about one.

The rule, for a test without ``repeat``: tensor memory allocated while the test's own
fixtures were set up, while its body ran, or while those fixtures were torn down, and
still alive once that teardown is over (and pytest has dropped its references to the
fixture values). Memory allocated while a fixture of class, module, package or session
scope is set up belongs to that fixture, not to the test, even if this test triggered it.

With ``repeat=N`` the body runs N times on the same fixtures and the test leaks only if the
live tensor memory grows by more than the tolerance on every run after the first, which
tells a per-step leak from one-time lazy state such as optimizer buffers or caches.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Callable, Iterator
from typing import Any


def collect_for_verdict(
    live_bytes: Callable[[], int],
    tolerance: int,
    collect: Callable[[int], object] = gc.collect,
) -> None:
    """Collect only as much garbage as the leak verdict needs: none while what survives is
    within the tolerance, then the young generations (a test's own cycles usually sit
    there, about a millisecond), then the whole heap (~0.1 to 1 s with torch, scipy and
    pandas loaded) only if the bytes are still over it.

    The verdict is the one a full collection would give: collecting only frees (a backend
    counts no allocation made during a collection), so the bytes after a smaller collection
    bound those after a full one from above. At or under the tolerance before the full
    collection, they are at or under it after; over it, the full collection runs and decides.
    ``live_bytes`` counts every survivor, also what the test's own instance holds (taken off
    afterwards): at the default tolerance of 0 the collections are those made before this
    function existed, so later tests see the same heap."""
    if live_bytes() <= tolerance:
        return
    collect(1)
    if live_bytes() > tolerance:
        collect(2)


# What the interpreter had frozen before the plugin was loaded, which is before any conftest
# runs: CPython 3.12 starts with a few hundred objects in the permanent generation (375 on
# 3.12.1 and 3.12.3), 3.11 and 3.13 with none. Only a freeze beyond this is a caller's own.
FROZEN_AT_LOAD = gc.get_freeze_count()


@contextlib.contextmanager
def frozen_heap(frozen_at_load: int = FROZEN_AT_LOAD) -> Iterator[None]:
    """Freeze the heap as it is when the tests start (``gc.freeze``), so that the full
    collections of later leak verdicts walk only the objects made since: torch, scipy and
    the suite's own modules are hundreds of thousands of objects, about 0.1 s a walk.

    What is frozen is everything the run made before its first test: imports, collection,
    the plugin's own start. Frozen objects are still freed by reference counting; only
    garbage cycles among them (those of that time, and those a test makes by dropping
    older objects) stay until the heap is unfrozen when the tests are over. No collection
    runs first: it would move when the automatic collections of the first tests run, and
    so the peaks they see. A fixture's objects, even a session fixture's, are made during
    the tests and collected as always. A heap frozen further since the plugin was loaded
    (a conftest's own ``gc.freeze()``, an enclosing in-process session) is left as the
    caller had it; what the interpreter froze at start-up is not a caller's freeze, and
    is unfrozen with the rest (``gc`` has no partial unfreeze), so verdicts are the same
    on every Python."""
    if gc.get_freeze_count() > frozen_at_load:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def storage_identity(storage: Any) -> int:
    return int(storage._cdata)


def storage_address(storage: Any) -> int:
    return int(storage.data_ptr())


def count_graph_holders(
    storage_keys: set[int], key_of: Callable[[Any], int] = storage_identity
) -> int:
    """How many live tensors on the given storages still carry a ``grad_fn``.

    A kept ``loss`` or output with a ``grad_fn`` holds the whole forward graph and its saved
    activations; that is the usual way a training loop leaks. Storages are named by
    ``key_of``: their identity (CPU tracker) or their device address (CUDA allocator
    history, which knows blocks by address).
    """
    import torch

    count = 0
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
            try:
                key = key_of(obj.untyped_storage())
            except (RuntimeError, NotImplementedError):
                continue
            if key in storage_keys and obj.grad_fn is not None:
                count += 1
    return count


def growth_per_run(live_after_runs: list[int]) -> list[int]:
    """Bytes gained by each run after the first (the first is a warm-up)."""
    return [b - a for a, b in itertools.pairwise(live_after_runs)]


def repeat_leaks(live_after_runs: list[int], tolerance_bytes: int) -> bool:
    """True when every run after the warm-up grew live memory by more than the tolerance."""
    growth = growth_per_run(live_after_runs)
    return bool(growth) and all(g > tolerance_bytes for g in growth)
