"""Real test suites, plain and with every test measured (``--gpumem-all``): the ratio of
CPU time (user + system of the pytest process) and whether the outcomes are identical.

Prepare the suites first with ``bash bench/setup_suites.sh`` (pinned sdists and their
dependencies under bench/.work/), then:

    python bench/gpumem_suites.py [--suite skorch] [--backend cpu-fast] [-- extra args]

``--before DIR`` measures another version of the plugin in the same run, side by side:
DIR holds its ``pytest_gpumem`` package (``git archive REV pytest_gpumem | tar -x -C
DIR``) and goes first on ``PYTHONPATH`` for an extra run per backend.

The suites, all pinned PyPI sdists (GitHub is out of reach from the benchmark machine):

- skorch 1.4.0: ``skorch/tests`` less the Hugging Face and LLM tests (they download
  models).
- kornia 0.6.5, the newest kornia sdist that ships a test folder (0.6.8 to 0.7.0 ship
  one or two files, 0.7.4 and later none). Its ``test/`` is the geometry, contrib and
  metrics tests; the repository's root conftest.py with the ``device``/``dtype`` fixtures
  is not in the sdist, so setup_suites.sh writes a two-fixture stand-in (CPU, float32).
- gpytorch 1.15.2, in place of pytorch-metric-learning: no pytorch-metric-learning sdist
  ships its tests (0.9.90, 0.9.99, 1.0.0, 1.7.3, 2.0.0, 2.5.0 and 2.9.0 checked).
  gpytorch is a real PyTorch training library with a unittest-style suite; the run takes
  ``test/examples`` (training loops), ``test/kernels`` and ``test/variational``.

CPU time is used because the shared benchmark machine makes wall time swing by 3x; wall
time is printed too. ``--gpumem-max-gb`` is set generously (64 GiB) so only leaks could
change an outcome; every test that fails or errors in one mode only is listed.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Where setup_suites.sh put the suites, and the interpreter that runs them; on a machine
# with no package registry (the lent GPU machine) --work and --python point at carried trees
# and at an interpreter that already holds the suites' dependencies.
WORK = HERE / ".work"
PYTHON = str(WORK / "suites-venv" / "bin" / "python")


@dataclass(frozen=True)
class Suite:
    name: str
    tree: str  # under bench/.work
    tests: tuple[str, ...]  # pytest arguments that select the suite's tests


SUITES = (
    Suite(
        "skorch",
        "skorch-1.4.0",
        ("skorch/tests", "--ignore=skorch/tests/test_hf.py", "--ignore=skorch/tests/llm",
         "-o", "addopts="),
    ),
    Suite("kornia", "kornia-0.6.5", ("test", "-o", "addopts=")),
    # no pytest section in gpytorch's own files: -c keeps this checkout's from applying
    Suite("gpytorch", "gpytorch-1.15.2",
          ("test/examples", "test/kernels", "test/variational", "--rootdir=.",
           "-c", "pyproject.toml")),
)


@dataclass
class Run:
    cpu_s: float
    wall_s: float
    outcomes: dict[str, str]
    summary: str


def _run(suite: Suite, extra: list[str], plugin_dir: str | None = None) -> Run:
    tag = "-".join(a.lstrip("-") for a in extra[:2]) + ("-before" if plugin_dir else "")
    report = WORK / f"{suite.name}-{tag}.outcomes"
    args = [PYTHON, "-m", "pytest", *suite.tests, "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", "-rA", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=WORK / suite.tree, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1",
                               **({"PYTHONPATH": plugin_dir} if plugin_dir else {})}, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcomes: dict[str, str] = {}
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


def _use(work: Path | None, python: str | None) -> None:
    """Another suites folder takes its own venv when it has one, else this interpreter."""
    global WORK, PYTHON
    if work is not None:
        WORK = work.resolve()
        venv = WORK / "suites-venv" / "bin" / "python"
        PYTHON = str(venv) if venv.exists() else sys.executable
    PYTHON = python or PYTHON


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", help="run only these suites")
    parser.add_argument("--backend", action="append",
                        help="gpumem backends to compare with plain (default: cpu-fast, cpu)")
    parser.add_argument("--before", metavar="DIR",
                        help="also measure the pytest_gpumem package in DIR, side by side")
    parser.add_argument("--work", type=Path, help=f"the suites' trees (default {WORK})")
    parser.add_argument("--python", help=f"the interpreter that runs them (default {PYTHON})")
    parser.add_argument("extra", nargs="*", help="more pytest arguments for both runs")
    ns = parser.parse_args()
    _use(ns.work, ns.python)
    if shutil.which(PYTHON) is None:
        sys.exit("run bash bench/setup_suites.sh first")
    for suite in SUITES:
        if ns.suite and suite.name not in ns.suite:
            continue
        plain = _run(suite, list(ns.extra))
        print(f"{suite.name}: plain {plain.cpu_s:.1f} s CPU ({plain.wall_s:.1f} s wall): "
              f"{plain.summary}")
        for backend in ns.backend or ["cpu-fast", "cpu"]:
            for before in ([ns.before] if ns.before else []) + [None]:
                _measured(suite, plain, backend, list(ns.extra), before)


def _measured(suite: Suite, plain: Run, backend: str, extra: list[str],
              before: str | None) -> None:
    name = f"{suite.name}-{backend}{'-before' if before else ''}"
    measured = _run(suite, [*extra, "--gpumem-all", f"--gpumem-backend={backend}",
                            "--gpumem-max-gb=64", "--gpumem-top=3",
                            f"--gpumem-json={WORK / f'{name}.json'}"], before)
    differ = sorted(n for n in set(plain.outcomes) | set(measured.outcomes)
                    if plain.outcomes.get(n) != measured.outcomes.get(n))
    label = f" ({before})" if before else ""
    print(f"  --gpumem-all --gpumem-backend={backend}{label}: {measured.cpu_s:.1f} s CPU "
          f"({measured.wall_s:.1f} s wall): {measured.cpu_s / plain.cpu_s:.2f}x CPU, "
          f"{measured.wall_s / plain.wall_s:.2f}x wall: {measured.summary}")
    print(f"    {len(differ)} tests with another outcome than plain")
    for nodeid in differ:
        print(f"      {nodeid}: {plain.outcomes.get(nodeid)} -> "
              f"{measured.outcomes.get(nodeid)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
