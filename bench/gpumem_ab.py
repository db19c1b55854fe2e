"""Two versions of the plugin, alternated on one suite's tests: CPU time of plain runs and of
``--gpumem-all`` runs with each version, pair after pair, so that the load of a shared
machine falls on both alike (``bench/gpumem_suites.py --before`` runs each once, which
cannot tell a 5% change from its noise).

    git archive HEAD pytest_gpumem | tar -x -C /tmp/before
    python bench/gpumem_ab.py /tmp/before [--suite kornia] [--tests test/geometry] [--pairs 4]
        [--backend cpu-fast --backend cpu]

The version under test is this checkout's (copied to a temporary folder, so both are
imported the same way, from ``PYTHONPATH``). Prepare the suites with
``bash bench/setup_suites.sh``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
PYTHON = WORK / "suites-venv" / "bin" / "python"
TREES = {"kornia": "kornia-0.6.5", "skorch": "skorch-1.4.0", "gpytorch": "gpytorch-1.15.2"}
# the tests bench/gpumem_suites.py runs (gpytorch: -c keeps this checkout's ini from applying)
DEFAULT_TESTS = {
    "skorch": ["skorch/tests", "--ignore=skorch/tests/test_hf.py", "--ignore=skorch/tests/llm"],
    "gpytorch": ["test/examples", "test/kernels", "test/variational", "--rootdir=.",
                 "-c", "pyproject.toml"],
}


def _cpu_run(tree: Path, tests: list[str], package: Path | None, extra: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if package is not None:
        env["PYTHONPATH"] = str(package)
    subprocess.run([str(PYTHON), "-m", "pytest", *tests, "-o", "addopts=", "-q",
                    "-p", "no:randomly", "-p", "no:cacheprovider", *extra],
                   cwd=tree, env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="folder holding the other pytest_gpumem")
    parser.add_argument("--suite", default="kornia", choices=sorted(TREES))
    parser.add_argument("--tests", action="append", help="pytest arguments (default: test)")
    parser.add_argument("--backend", action="append",
                        help="backends, each measured before and after in every pair "
                             "(default: cpu)")
    parser.add_argument("--pairs", type=int, default=4)
    ns = parser.parse_args()
    tree = WORK / TREES[ns.suite]
    tests = ns.tests or DEFAULT_TESTS.get(ns.suite, ["test"])
    backends = ns.backend or ["cpu"]
    with tempfile.TemporaryDirectory() as tmp:
        after = Path(tmp)
        shutil.copytree(HERE.parent / "pytest_gpumem", after / "pytest_gpumem",
                        ignore=shutil.ignore_patterns("__pycache__"))
        times: dict[str, list[float]] = {"plain": []}
        for pair in range(ns.pairs):
            times["plain"].append(_cpu_run(tree, tests, None, []))
            for backend in backends:
                measured = ["--gpumem-all", f"--gpumem-backend={backend}",
                            "--gpumem-max-gb=64"]
                for name, package in (("before", ns.before.resolve()), ("after", after)):
                    key = f"{backend} {name}"
                    times.setdefault(key, []).append(_cpu_run(tree, tests, package, measured))
            print(pair, {k: f"{v[-1]:.2f}" for k, v in times.items()}, flush=True)
    plain = min(times["plain"])
    print(f"plain: best {plain:.2f} s CPU")
    for key, runs in times.items():
        if key != "plain":
            best = min(runs)
            print(f"{key}: best {best:.2f} s CPU, {best / plain:.3f}x the best plain run")


if __name__ == "__main__":
    main()
