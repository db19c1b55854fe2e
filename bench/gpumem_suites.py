"""Real test suites, plain and with every test measured (``--gpumem-all``): the ratio of
CPU time (user + system of the pytest process) and whether the outcomes are identical.

Prepare the suites first with ``bash bench/setup_suites.sh`` (pinned sdists and their
dependencies under bench/.work/). Only suites whose sdist ships its tests can run:

    python bench/gpumem_suites.py [--suite skorch] [--backend cpu-fast] [-- extra args]

CPU time is used because the shared benchmark machine makes wall time swing by 3x; wall
time is printed too. ``--gpumem-max-gb`` is set generously (64 GiB) so only leaks could
change an outcome; every test that fails or errors in one mode only is listed.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
PYTHON = WORK / "suites-venv" / "bin" / "python"


@dataclass(frozen=True)
class Suite:
    name: str
    tree: str  # under bench/.work
    tests: tuple[str, ...]  # pytest arguments that select the suite's tests
    why_not: str = ""  # set when the pinned sdist cannot run its tests here


SUITES = (
    Suite(
        "skorch",
        "skorch-1.4.0",
        ("skorch/tests", "--ignore=skorch/tests/test_hf.py", "--ignore=skorch/tests/llm",
         "-o", "addopts="),
    ),
    Suite("pytorch-metric-learning", "pytorch-metric-learning-2.9.0", (),
          why_not="the 2.9.0 sdist ships no tests (its tests/ folder is only on GitHub)"),
    Suite("kornia", "kornia-0.9.0", (),
          why_not="the 0.9.0 sdist ships no tests (its tests/ folder is only on GitHub)"),
)


@dataclass
class Run:
    cpu_s: float
    wall_s: float
    outcomes: dict[str, str]
    summary: str


def _run(suite: Suite, extra: list[str]) -> Run:
    report = WORK / f"{suite.name}-{'-'.join(a.lstrip('-') for a in extra[:2])}.outcomes"
    args = [str(PYTHON), "-m", "pytest", *suite.tests, "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", "-rA", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=WORK / suite.tree, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcomes = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS|MEMORY) (\S+)", line)
        if match:
            word, nodeid = match.groups()
            outcomes.setdefault(nodeid, word if word != "MEMORY" else "MEMORY")
            if word in ("FAILED", "ERROR", "MEMORY"):
                outcomes[nodeid] = word
    report.write_text(proc.stdout[-20000:])
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    return Run(cpu, wall, outcomes, summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", help="run only these suites")
    parser.add_argument("--backend", action="append",
                        help="gpumem backends to compare with plain (default: cpu-fast, cpu)")
    parser.add_argument("extra", nargs="*", help="more pytest arguments for both runs")
    ns = parser.parse_args()
    if not PYTHON.exists():
        sys.exit("run bash bench/setup_suites.sh first")
    for suite in SUITES:
        if ns.suite and suite.name not in ns.suite:
            continue
        if suite.why_not:
            print(f"{suite.name}: not run: {suite.why_not}")
            continue
        plain = _run(suite, list(ns.extra))
        print(f"{suite.name}: plain {plain.cpu_s:.1f} s CPU ({plain.wall_s:.1f} s wall): "
              f"{plain.summary}")
        for backend in ns.backend or ["cpu-fast", "cpu"]:
            measured = _run(suite, [*ns.extra, "--gpumem-all", f"--gpumem-backend={backend}",
                                    "--gpumem-max-gb=64", "--gpumem-top=3"])
            differ = sorted(n for n in set(plain.outcomes) | set(measured.outcomes)
                            if plain.outcomes.get(n) != measured.outcomes.get(n))
            print(f"  --gpumem-all --gpumem-backend={backend}: {measured.cpu_s:.1f} s CPU "
                  f"({measured.wall_s:.1f} s wall): {measured.cpu_s / plain.cpu_s:.2f}x CPU, "
                  f"{measured.wall_s / plain.wall_s:.2f}x wall: {measured.summary}")
            print(f"    {len(differ)} tests with another outcome than plain")
            for nodeid in differ:
                print(f"      {nodeid}: {plain.outcomes.get(nodeid)} -> "
                      f"{measured.outcomes.get(nodeid)}")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
