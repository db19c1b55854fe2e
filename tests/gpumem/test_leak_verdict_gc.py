"""Leak verdicts collect garbage only as far as they need to (leaks.collect_for_verdict),
and give the verdict a full collection would: garbage cycles that hold tensors, young or
promoted to the oldest generation, are no leak; a real leak next to one is reported at its
own size; a tolerance is judged after the collection that can change the answer."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

from pytest_gpumem.leaks import collect_for_verdict
from tests.gpumem.conftest import plugin_args

SUITE = """
import gc
import pytest
import torch

KEPT = []


def old_cycle(nbytes):
    # a reference cycle holding a tensor, moved to the oldest generation while still
    # referenced: once dropped, only a full collection frees it
    cycle = [torch.ones(nbytes // 4)]
    cycle.append(cycle)
    gc.collect(1)
    return cycle


@pytest.fixture(scope="module")
def prior():
    return {"cycle": old_cycle(8000)}  # set up outside the tests: not their memory


@pytest.mark.gpu_mem
def test_young_cycle():
    cycle = [torch.ones(1000)]
    cycle.append(cycle)


@pytest.mark.gpu_mem
def test_old_cycle():
    old_cycle(8000)


@pytest.mark.gpu_mem
def test_leak_next_to_old_cycle():
    old_cycle(8000)
    KEPT.append(torch.ones(1000))


@pytest.mark.gpu_mem(max_leak="8 KiB")
def test_within_tolerance_once_collected():
    old_cycle(8000)
    KEPT.append(torch.ones(1000))


@pytest.mark.gpu_mem(max_leak="8 KiB")
def test_over_tolerance_once_collected():
    old_cycle(8000)
    KEPT.append(torch.ones(3000))


@pytest.mark.gpu_mem
def test_leak_while_a_prior_cycle_dies(prior):
    prior.pop("cycle")  # older garbage, freed by the verdict's full collection
    KEPT.append(torch.ones(1000))
"""

# test -> leaked bytes in the JSON record, the same on both backends: the older cycle that
# dies during the last test is not its memory (the tracker never followed its storage; the
# profiler cannot size a block allocated before its session, so it nets no free of it)
LEAKED = {
    "test_young_cycle": 0,
    "test_old_cycle": 0,
    "test_leak_next_to_old_cycle": 4000,
    "test_within_tolerance_once_collected": 4000,
    "test_over_tolerance_once_collected": 12000,
    "test_leak_while_a_prior_cycle_dies": 4000,
}
FAILS = {
    "test_leak_next_to_old_cycle",
    "test_over_tolerance_once_collected",
    "test_leak_while_a_prior_cycle_dies",
}


@pytest.mark.parametrize("backend", ["cpu", "cpu-fast"])
def test_verdicts_are_those_of_a_full_collection(pytester: pytest.Pytester, backend: str) -> None:
    # In a process of its own: its leaked tensors and cycles, freed once an in-process
    # session is over, would be frees inside a later session's profiler events.
    pytester.makepyfile(test_gc_suite=SUITE)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:randomly", "--gpumem-all", f"--gpumem-backend={backend}",
        "--gpumem-json=out.json", "-rE")
    records = {r["nodeid"].split("::")[-1]: r for r in json.loads(
        (pytester.path / "out.json").read_text())["tests"]}
    assert {name: r["leaked_bytes"] for name, r in records.items()} == LEAKED
    assert {name for name, r in records.items() if r["outcome"] == "memory"} == FAILS
    result.assert_outcomes(passed=6, errors=len(FAILS))


FROZEN_SUITE = """
import gc
import json
import weakref

import pytest
import torch

KEPT = []
HUNG = []


class Node:
    pass


def cycle_of(tensor):
    node = Node()
    node.me, node.tensor = node, tensor
    return node


# made at import, before the first test: part of the heap frozen while the tests run
IMPORTED = {"cycle": cycle_of(torch.ones(2000)), "other": cycle_of(None)}


@pytest.fixture(scope="module")
def shared():
    nets = {"net": cycle_of(None)}  # made during the tests, so collected as always
    gc.collect(1)
    return nets


def test_heap_is_frozen(shared):  # also sets up the module-scoped fixture before the others
    assert gc.get_freeze_count() > 0


def test_leak_held_in_its_own_cycle():
    KEPT.append(cycle_of(torch.ones(1000)))  # reachable: a leak, cycle or not


def test_own_cycle_promoted_then_dropped():
    node = cycle_of(torch.ones(1000))
    gc.collect(1)  # to the oldest generation while referenced: only a full collection frees it
    del node


def test_frozen_cycle_dropped_next_to_a_leak():
    IMPORTED.pop("cycle")  # garbage from before the tests: stays frozen, not this test's
    KEPT.append(torch.ones(500))


def test_hangs_its_tensor_on_a_frozen_cycle_then_drops_it():
    # the documented edge: the cycle stays frozen until the tests are over, and the tensor
    # with it (an unfrozen heap's full collection would free both)
    tensor = torch.ones(1000)
    HUNG.append(weakref.ref(tensor))
    IMPORTED.pop("other").tensor = tensor


def test_drops_a_module_scoped_object(shared):
    with open("hung-tensor.json", "w") as fh:  # after the verdict on the test before
        json.dump({"alive": HUNG[0]() is not None}, fh)
    # the test's tensor on an older cycle of a wider-scoped fixture, which the test drops
    shared["net"].tensor = torch.ones(1000)
    shared.pop("net")
"""

FROZEN_CONFTEST = """
import gc
import json
import pytest

AT_START = gc.get_freeze_count()  # the interpreter's own: 375 objects on Python 3.12


def _role(config):
    return getattr(config, "workerinput", {}).get("workerid", "main")


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session):
    frozen = gc.get_freeze_count()
    result = yield
    with open(f"frozen-{_role(session.config)}.json", "w") as fh:
        json.dump({"at_start": AT_START, "while_testing": frozen}, fh)
    return result


def pytest_sessionfinish(session):
    with open(f"frozen-{_role(session.config)}.json") as fh:
        seen = json.load(fh)
    seen["after"] = gc.get_freeze_count()
    with open(f"frozen-{_role(session.config)}.json", "w") as fh:
        json.dump(seen, fh)
"""

FROZEN_LEAKED = {
    "test_heap_is_frozen": 0,
    "test_leak_held_in_its_own_cycle": 4000,
    "test_own_cycle_promoted_then_dropped": 0,
    "test_frozen_cycle_dropped_next_to_a_leak": 2000,
    "test_hangs_its_tensor_on_a_frozen_cycle_then_drops_it": 4000,
    "test_drops_a_module_scoped_object": 0,
}


@pytest.mark.parametrize(
    ("backend", "xdist"), [("cpu", []), ("cpu-fast", []), ("cpu-fast", ["-n", "1"])])
def test_frozen_start_up_heap_keeps_verdicts(
    pytester: pytest.Pytester, backend: str, xdist: list[str]
) -> None:
    """The heap as it is before the first test is frozen while the tests run (in each xdist
    worker, never in the controller) and unfrozen after: a full collection still frees
    every cycle the tests made or their fixtures hold, a leak a cycle keeps reachable is
    still one, and a frozen cycle dropped during a test is not that test's memory, unless
    the test hung its own tensor on it (docs/plugin.md, "Leaks")."""
    pytester.makepyfile(test_frozen_suite=FROZEN_SUITE)
    pytester.makeconftest(FROZEN_CONFTEST)
    pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:randomly", "--gpumem-all", f"--gpumem-backend={backend}",
        "--gpumem-json=out.json", *xdist)
    records = {r["nodeid"].split("::")[-1]: r for r in json.loads(
        (pytester.path / "out.json").read_text())["tests"]}
    leaked = {name: r["leaked_bytes"] for name, r in records.items()}
    # The documented edge: the tensor hung on a frozen cycle stays until the tests are over,
    # and is then the test's leak, on every Python (3.12 starts with objects frozen: that
    # once turned the freeze off there and freed it, bench/RESULTS-gpu.md, 2026-11-28).
    edge = "test_hangs_its_tensor_on_a_frozen_cycle_then_drops_it"
    assert json.loads((pytester.path / "hung-tensor.json").read_text()) == {"alive": True}
    assert leaked == FROZEN_LEAKED
    assert {name for name, r in records.items() if r["outcome"] == "memory"} == {
        "test_leak_held_in_its_own_cycle", "test_frozen_cycle_dropped_next_to_a_leak", edge}
    assert records["test_heap_is_frozen"]["outcome"] == "passed"
    seen = {p.stem: json.loads(p.read_text()) for p in pytester.path.glob("frozen-*.json")}
    if xdist:  # the controller runs no test: its heap stays as the interpreter left it
        at_start = seen["frozen-main"]["at_start"]
        assert seen["frozen-main"] == {"at_start": at_start, "while_testing": at_start,
                                       "after": at_start}
        assert seen["frozen-gw0"]["while_testing"] > seen["frozen-gw0"]["at_start"]
        assert seen["frozen-gw0"]["after"] == 0
    else:
        assert seen["frozen-main"]["while_testing"] > seen["frozen-main"]["at_start"]
        assert seen["frozen-main"]["after"] == 0


class _Heap:
    """Survivors that each collection of a generation at least that old frees some of."""

    def __init__(self, by_generation: dict[int, int], kept: int) -> None:
        self.by_generation = dict(by_generation)
        self.kept = kept
        self.collections: list[int] = []

    def bytes(self) -> int:
        return self.kept + sum(self.by_generation.values())

    def collect(self, generation: int) -> None:
        self.collections.append(generation)
        for g in [g for g in self.by_generation if g <= generation]:
            del self.by_generation[g]


@pytest.mark.parametrize(
    ("garbage", "kept", "tolerance", "collections", "leaks"),
    [
        ({}, 0, 0, [], False),  # nothing alive: no collection at all
        ({1: 100}, 0, 0, [1], False),  # young garbage only
        ({2: 100}, 0, 0, [1, 2], False),  # old garbage: the full collection decides
        ({2: 100}, 50, 0, [1, 2], True),  # a leak next to old garbage
        ({2: 100}, 50, 200, [], False),  # within the tolerance even with the garbage
        ({2: 100}, 50, 120, [1, 2], False),  # over it only until collected
        ({1: 10, 2: 100}, 150, 120, [1, 2], True),  # over it after every collection
    ],
)
def test_collections_a_verdict_needs(
    garbage: dict[int, int], kept: int, tolerance: int, collections: list[int], leaks: bool
) -> None:
    heap = _Heap(garbage, kept)
    collect_for_verdict(heap.bytes, tolerance, heap.collect)
    assert heap.collections == collections
    assert (heap.bytes() > tolerance) == leaks
    # the same verdict as collecting everything first
    assert (kept > tolerance) == leaks


def test_default_collector_is_the_garbage_collector() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    gc.collect()  # into the oldest generation, still referenced
    alive = [cycle]
    del cycle
    alive.clear()  # now garbage that only a full collection finds
    count = gc.get_count()
    collect_for_verdict(lambda: 1, 0)
    assert gc.get_count() <= count


FREEZES = """
import gc, json, sys
if sys.argv[1] == "interpreter":
    gc.freeze()  # as CPython 3.12 starts: objects frozen before the plugin is loaded
from pytest_gpumem.leaks import frozen_heap
seen = {"at_load": gc.get_freeze_count()}
with frozen_heap():
    seen["inside"] = gc.get_freeze_count()
    with frozen_heap():  # an in-process session inside a measured one
        pass
    seen["after_nested"] = gc.get_freeze_count()
seen["after"] = gc.get_freeze_count()
gc.freeze()  # a conftest's own freeze, after the plugin was loaded
seen["caller"] = gc.get_freeze_count()
with frozen_heap():
    seen["caller_inside"] = gc.get_freeze_count()
seen["caller_after"] = gc.get_freeze_count()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("start", ["clean", "interpreter"])
def test_frozen_heap_whatever_the_interpreter_froze_at_start_up(start: str) -> None:
    """Python 3.12 starts with a few hundred objects frozen (bench/RESULTS-gpu.md,
    2026-11-28): that is no caller's freeze, so the tests' heap is still frozen and unfrozen
    after. A freeze made after the plugin was loaded, a conftest's or an enclosing
    session's, is left as it is."""
    out = subprocess.run([sys.executable, "-c", FREEZES, start], capture_output=True,
                         text=True, check=True).stdout
    seen = json.loads(out)
    if start == "interpreter":  # on 3.12 a clean start has some frozen already
        assert seen["at_load"] > 0
    assert seen["inside"] > seen["at_load"]
    assert seen["after_nested"] == seen["inside"]
    assert seen["after"] == 0
    assert seen["caller"] > 0
    assert seen["caller_inside"] == seen["caller_after"] == seen["caller"]
