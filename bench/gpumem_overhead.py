"""Per-test cost of ``--gpumem`` on trivial marked tests.

Writes a suite of N and of 2N trivial marked tests, runs each with and without
``--gpumem`` (interleaved, several rounds, best time kept), and reports the slope:
the extra time per additional test, which leaves out fixed start-up costs (importing
torch, the plugin's warm-up). Times are the child process's CPU time (user + system),
which a busy machine disturbs far less than wall-clock time; wall time is shown too.

    python bench/gpumem_overhead.py [--tests 500] [--rounds 3] [--timeline] [--backend cuda]

``--timeline`` adds ``--gpumem-timeline-dir``, which makes the CPU backend keep every
test's allocation events (a passing test writes no file, so this times the event history).
``--backend cuda`` runs the trivial tests' tensors on the GPU and measures them with the
CUDA backend (allocation history on, as ``--gpumem`` records it).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_gpumem.entrypoint import plugin_args  # noqa: E402

TEST_TEMPLATE = """
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=0.5)
@pytest.mark.parametrize("i", range({n}))
def test_trivial(i):
    assert float(torch.ones(8, device="{device}").sum()) == 8.0
"""


def _suite(root: Path, n: int, device: str) -> Path:
    directory = root / f"suite_{n}"
    directory.mkdir()
    (directory / "test_trivial.py").write_text(TEST_TEMPLATE.format(n=n, device=device))
    return directory


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(
    directory: Path, gpumem: bool, timeline: bool = False, backend: str = "cpu"
) -> tuple[float, float]:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            *plugin_args(), "-W", "ignore::UserWarning"]
    if gpumem:
        args += ["--gpumem", f"--gpumem-backend={backend}"]
        if timeline:
            args.append(f"--gpumem-timeline-dir={directory / 'timelines'}")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True)
    cpu, wall = _children_cpu() - cpu0, time.perf_counter() - wall0
    if done.returncode != 0:
        raise SystemExit(f"pytest failed in {directory}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return cpu, wall


def tracker_cost(
    n: int = 5000, timeline: bool = False, backend_name: str = "cpu"
) -> tuple[tuple[float, float], tuple[float, float]]:
    """In-process seconds per trivial body, bare and inside the backend's per-test tracker
    lifecycle (start, body window, leak check, close), as (CPU, wall) pairs. CPU time is
    stable on a busy machine; on CUDA, wall time also counts waiting for the GPU."""
    import torch

    from pytest_gpumem.backends import make_backend

    torch.set_num_threads(1)
    backend = make_backend(backend_name, timeline=timeline)
    device = torch.device(backend.device)

    def body() -> None:
        float(torch.ones(8, device=device).sum())

    def lifecycle() -> None:
        tracker = backend.tracker()
        tracker.start()
        tracker.body_start()
        body()
        tracker.body_end()
        tracker.finish()
        tracker.close()

    def per_call(fn: Callable[[], None]) -> tuple[float, float]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            fn()
        return (time.process_time() - cpu0) / n, (time.perf_counter() - wall0) / n

    bare, tracked = per_call(body), per_call(lifecycle)
    backend.shutdown()
    return bare, tracked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeline", action="store_true",
                        help="time --gpumem with the per-test event history kept")
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: the tests' tensors on the GPU, measured by the CUDA backend")
    opts = parser.parse_args()
    n = opts.tests
    print(f"backend {opts.backend}")
    with tempfile.TemporaryDirectory() as tmp:
        suites = {size: _suite(Path(tmp), size, opts.backend) for size in (n, 2 * n)}
        best: dict[tuple[int, bool], float] = {}
        walls: dict[tuple[int, bool], float] = {}
        for _ in range(opts.rounds):
            for size, directory in suites.items():
                for gpumem in (False, True):
                    cpu, wall = _run(directory, gpumem, opts.timeline, opts.backend)
                    key = (size, gpumem)
                    best[key] = min(best.get(key, cpu), cpu)
                    walls[key] = min(walls.get(key, wall), wall)
    print(f"{'tests':>6} {'plain cpu s':>12} {'--gpumem cpu s':>15} {'ratio':>6}"
          f" {'plain wall s':>13} {'--gpumem wall s':>16}")
    for size in (n, 2 * n):
        off, on = best[(size, False)], best[(size, True)]
        print(f"{size:>6} {off:>12.2f} {on:>15.2f} {on / off:>6.2f}"
              f" {walls[(size, False)]:>13.2f} {walls[(size, True)]:>16.2f}")
    for label, times in (("cpu", best), ("wall", walls)):
        plain_per_test = (times[(2 * n, False)] - times[(n, False)]) / n
        gpumem_per_test = (times[(2 * n, True)] - times[(n, True)]) / n
        fixed = times[(n, True)] - times[(n, False)] - n * (gpumem_per_test - plain_per_test)
        print(f"per test ({label}): plain {plain_per_test * 1e3:.2f} ms, --gpumem "
              f"{gpumem_per_test * 1e3:.2f} ms, overhead "
              f"{(gpumem_per_test - plain_per_test) * 1e3:.2f} ms/test; fixed start-up cost "
              f"of --gpumem {fixed:.2f} s (best of {opts.rounds} rounds)")
    bare, tracked = tracker_cost(timeline=opts.timeline, backend_name=opts.backend)
    lifecycle = "with event history" if opts.timeline else "lifecycle"
    for i, label in enumerate(("cpu", "wall")):
        print(f"in-process tracker {lifecycle} ({label}): body {bare[i] * 1e3:.3f} ms,"
              f" tracked {tracked[i] * 1e3:.3f} ms, overhead "
              f"{(tracked[i] - bare[i]) * 1e3:.3f} ms/test")


if __name__ == "__main__":
    main()
