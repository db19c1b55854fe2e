"""Per-test cost of ``--gpumem`` on trivial marked tests.

Writes a suite of N and of 2N trivial marked tests, runs each with and without
``--gpumem`` (interleaved, several rounds, best time kept), and reports the slope:
the extra time per additional test, which leaves out fixed start-up costs (importing
torch, the plugin's warm-up). Times are the child process's CPU time (user + system),
which a busy machine disturbs far less than wall-clock time; wall time is shown too.

    python bench/gpumem_overhead.py [--tests 500] [--rounds 3] [--timeline]

``--timeline`` adds ``--gpumem-timeline-dir``, which makes the CPU backend keep every
test's allocation events (a passing test writes no file, so this times the event history).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
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
    assert float(torch.ones(8).sum()) == 8.0
"""


def _suite(root: Path, n: int) -> Path:
    directory = root / f"suite_{n}"
    directory.mkdir()
    (directory / "test_trivial.py").write_text(TEST_TEMPLATE.format(n=n))
    return directory


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(directory: Path, gpumem: bool, timeline: bool = False) -> tuple[float, float]:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            *plugin_args(), "-W", "ignore::UserWarning"]
    if gpumem:
        args += ["--gpumem", "--gpumem-backend=cpu"]
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


def tracker_cost(n: int = 5000, timeline: bool = False) -> tuple[float, float]:
    """In-process CPU seconds per trivial body, bare and inside the CPU backend's per-test
    tracker lifecycle (start, body window, leak check, close): stable on a busy machine."""
    import torch

    from pytest_gpumem.backends.cpu import CpuBackend

    torch.set_num_threads(1)
    backend = CpuBackend(history=timeline)

    def body() -> None:
        float(torch.ones(8).sum())

    start = time.process_time()
    for _ in range(n):
        body()
    bare = (time.process_time() - start) / n
    start = time.process_time()
    for _ in range(n):
        tracker = backend.tracker()
        tracker.start()
        tracker.body_start()
        body()
        tracker.body_end()
        tracker.finish()
        tracker.close()
    return bare, (time.process_time() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeline", action="store_true",
                        help="time --gpumem with the per-test event history kept")
    opts = parser.parse_args()
    n = opts.tests
    with tempfile.TemporaryDirectory() as tmp:
        suites = {size: _suite(Path(tmp), size) for size in (n, 2 * n)}
        best: dict[tuple[int, bool], float] = {}
        walls: dict[tuple[int, bool], float] = {}
        for _ in range(opts.rounds):
            for size, directory in suites.items():
                for gpumem in (False, True):
                    cpu, wall = _run(directory, gpumem, opts.timeline)
                    key = (size, gpumem)
                    best[key] = min(best.get(key, cpu), cpu)
                    walls[key] = min(walls.get(key, wall), wall)
    print(f"{'tests':>6} {'plain cpu s':>12} {'--gpumem cpu s':>15} {'ratio':>6}"
          f" {'plain wall s':>13} {'--gpumem wall s':>16}")
    for size in (n, 2 * n):
        off, on = best[(size, False)], best[(size, True)]
        print(f"{size:>6} {off:>12.2f} {on:>15.2f} {on / off:>6.2f}"
              f" {walls[(size, False)]:>13.2f} {walls[(size, True)]:>16.2f}")
    plain_per_test = (best[(2 * n, False)] - best[(n, False)]) / n
    gpumem_per_test = (best[(2 * n, True)] - best[(n, True)]) / n
    fixed = best[(n, True)] - best[(n, False)] - n * (gpumem_per_test - plain_per_test)
    print(f"per test: plain {plain_per_test * 1e3:.2f} ms, --gpumem {gpumem_per_test * 1e3:.2f} ms,"
          f" overhead {(gpumem_per_test - plain_per_test) * 1e3:.2f} ms/test")
    print(f"fixed start-up cost of --gpumem: {fixed:.2f} s (best of {opts.rounds} rounds)")
    bare, tracked = tracker_cost(timeline=opts.timeline)
    lifecycle = "with event history" if opts.timeline else "lifecycle"
    print(f"in-process tracker {lifecycle}: body {bare * 1e3:.3f} ms,"
          f" tracked {tracked * 1e3:.3f} ms, overhead {(tracked - bare) * 1e3:.3f} ms/test")


if __name__ == "__main__":
    main()
