"""Ways to measure CPU tensor memory, side by side on one small training loop.

Each candidate wraps the same loop (an MLP, SGD, 300 steps, one intra-op thread); the
best of several rounds of process CPU time is kept and divided by the plain loop's:

- ``noop-dispatch``: a ``TorchDispatchMode`` that only calls the op. The floor for every
  per-op Python approach: tracking only storage-creating ops, or sampling every Nth op,
  still pays this dispatch for every op.
- ``storage-tracker``: the CPU backend's tracker (``pytest_gpumem.backends.cpu``): every
  new storage followed by a weak reference, its allocation site kept.
- ``storage-tracker-no-sites``: the same without recording allocation sites.
- ``profiler-memory``: the PyTorch profiler's C++ allocation events alone
  (``profile_memory=True`` with no CPU op recording; a non-CPU activity keeps it legal).
- ``profiler-cpu-memory``: the profiler with CPU op events as well (``torch.profiler``'s
  usual ``activities=[CPU], profile_memory=True``).

A CUDA-only fast path (allocator counters, no per-op work) is the CUDA backend itself:
``bench/gpumem_overhead.py --backend cuda`` on a GPU.

    python bench/gpumem_backends.py [--steps 300] [--rounds 5]

``--suite skorch`` (after ``bash bench/setup_suites.sh``) compares the candidates on a real
suite instead: bench/gpumem_candidate_plugin.py runs every test phase inside the candidate,
and the pytest process's CPU time is divided by the plain run's. ``--candidate`` picks some.

    python bench/gpumem_backends.py --suite skorch [--candidate noop-dispatch ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_gpumem.backends.cpu import StorageTracker


class NoopMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _profiler(cpu_ops: bool) -> Iterator[None]:
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import (
        ProfilerConfig,
        ProfilerState,
        _disable_profiler,
        _enable_profiler,
        _prepare_profiler,
    )
    from torch.profiler import ProfilerActivity

    activities = {ProfilerActivity.CPU} if cpu_ops else {ProfilerActivity.MTIA}
    config = ProfilerConfig(ProfilerState.KINETO, False, True, False, False, False,
                            _ExperimentalConfig(), "")
    _prepare_profiler(config, activities)  # before every enable: a second enable without
    _enable_profiler(config, activities)   # it crashes the interpreter (torch 2.13)
    try:
        yield
    finally:
        result = _disable_profiler()
        peak = current = 0
        for event in result.events():  # the allocation events: bytes, negative when freed
            if event.name() == "[memory]":
                current += event.nbytes()
                peak = max(peak, current)


@contextlib.contextmanager
def _tracker(sites: bool) -> Iterator[None]:
    tracker = StorageTracker(stack_depth=6 if sites else 0)
    with tracker:
        tracker.open_window()
        yield
        tracker.close_window()


CANDIDATES: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "plain": contextlib.nullcontext,
    "noop-dispatch": NoopMode,
    "storage-tracker": lambda: _tracker(True),
    "storage-tracker-no-sites": lambda: _tracker(False),
    "profiler-memory": lambda: _profiler(False),
    "profiler-cpu-memory": lambda: _profiler(True),
}


def _loop(steps: int) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _suite(name: str, candidates: list[str]) -> None:
    """Each candidate around every test phase of a real suite, one run each."""
    from gpumem_suites import PYTHON, SUITES, WORK

    suite = next((s for s in SUITES if s.name == name), None)
    if suite is None:
        sys.exit(f"no suite {name!r}; one of {', '.join(s.name for s in SUITES)}")
    if not PYTHON.exists():
        sys.exit("run bash bench/setup_suites.sh first")
    here = os.path.dirname(os.path.abspath(__file__))
    base = None
    for candidate in ["plain", *[c for c in candidates if c != "plain"]]:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "GPUMEM_CANDIDATE": candidate,
               "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [str(PYTHON), "-m", "pytest", *suite.tests, "-q", "-p", "no:randomly",
             "-p", "no:cacheprovider", "-p", "gpumem_candidate_plugin"],
            cwd=WORK / suite.tree, env=env, capture_output=True, text=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        base = base or cpu
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
        print(f"  {candidate:26s} {cpu:7.1f} s CPU  {cpu / base:5.2f}x  {last}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suite", help="compare on this real suite (bench/gpumem_suites.py)")
    parser.add_argument("--candidate", action="append", choices=list(CANDIDATES),
                        help="candidates to run (default: all)")
    ns = parser.parse_args()
    if ns.suite:
        print(f"{ns.suite}: every test phase inside the candidate, process CPU time")
        _suite(ns.suite, ns.candidate or list(CANDIDATES))
        return
    torch.set_num_threads(1)
    _loop(10)  # warm caches and lazy imports
    best = dict.fromkeys(CANDIDATES, float("inf"))
    for _ in range(ns.rounds):  # interleaved, so a busy spell hits every candidate alike
        for name, make in CANDIDATES.items():
            start = time.process_time()
            with make():
                _loop(ns.steps)
            best[name] = min(best[name], time.process_time() - start)
    base = best["plain"]
    print(f"{ns.steps} training steps, best of {ns.rounds} rounds, process CPU time")
    for name, seconds in best.items():
        print(f"  {name:26s} {seconds * 1000:8.1f} ms  {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()
