"""Real sessions writing HTML memory timelines (CPU backend, drawn from the tracker's events)."""

from __future__ import annotations

import json
import re

import pytest

from tests.gpumem.conftest import RunGpumem

SUITE = """
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=0.001)
def test_big():
    a = torch.zeros(1024, 1024)  # 4 MiB
    b = a + 1                    # 8 MiB live: over the 1.02 MiB budget
    del a, b

@pytest.mark.gpu_mem(max_gb=0.01)
def test_small():
    torch.zeros(1024)
"""


def _levels(page: str) -> set[str]:
    """The distinct heights the allocated staircase visits."""
    (points,) = re.findall(r'<polyline fill="none" stroke="#4e79a7"[^>]* points="([^"]+)"', page)
    return {pair.split(",")[1] for pair in points.split()}


def test_failing_test_gets_a_timeline_with_budget_and_points(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = run_gpumem(
        "--gpumem", "--gpumem-timeline-dir=timelines", "--gpumem-json=out.json",
        "--gpumem-snapshot-dir=snaps",
    )
    result.assert_outcomes(passed=1, failed=1)
    page_path = pytester.path / "timelines" / "test_suite.py_test_big.html"
    assert sorted(p.name for p in (pytester.path / "timelines").iterdir()) == [page_path.name]
    page = page_path.read_text()
    assert "budget 1.02 MiB" in page and 'stroke="#e15759"' in page
    assert "peak 8.00 MiB" in page
    assert len(_levels(page)) == 3  # 0, 4 and 8 MiB
    assert ">body starts</text>" in page and ">body ends</text>" in page
    result.stdout.fnmatch_lines(
        [
            "*memory timeline: timelines/test_suite.py_test_big.html",
            "*gpumem notes*",
            "--gpumem-snapshot-dir: no snapshots written, memory snapshots need the CUDA backend's"
            " allocation history (this run measured on cpu)*",
            "1 memory timeline(s) written to timelines",
        ]
    )
    assert not (pytester.path / "snaps").exists()
    data = json.loads((pytester.path / "out.json").read_text())
    records = {r["nodeid"]: r for r in data["tests"]}
    big_page = str(page_path.relative_to(pytester.path))
    assert records["test_suite.py::test_big"]["timeline"] == big_page
    assert records["test_suite.py::test_small"]["timeline"] is None


def test_ini_scope_all_draws_every_measured_test(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\ngpumem_timeline_dir = out\ngpumem_timeline = all\n")
    run_gpumem("--gpumem").assert_outcomes(passed=1, failed=1)
    names = sorted(p.name for p in (pytester.path / "out").iterdir())
    assert names == ["test_suite.py_test_big.html", "test_suite.py_test_small.html"]
    small = (pytester.path / "out" / names[1]).read_text()
    assert "peak 4.00 KiB" in small and "budget 10.24 MiB" in small

    no_dir = run_gpumem("--gpumem", "-o", "gpumem_timeline_dir=")
    no_dir.stdout.fnmatch_lines(["*no timelines written without --gpumem-timeline-dir"])

    bad = run_gpumem("--gpumem", "--gpumem-timeline=some")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in bad.stderr.lines if line.strip()]
    assert errors == ["ERROR: --gpumem-timeline must be one of failed, all, got 'some'"]


def test_cpu_fast_draws_timelines_from_allocator_events(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Any backend draws timelines: cpu-fast from the allocator events it keeps anyway
    (it used to write none and blame the CUDA trace's time stamps)."""
    pytester.makepyfile(test_suite=SUITE)
    result = run_gpumem(
        "--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-timeline-dir=timelines"
    )
    result.assert_outcomes(passed=1, failed=1)
    page = (pytester.path / "timelines" / "test_suite.py_test_big.html").read_text()
    assert "peak 8.00 MiB" in page and "budget 1.02 MiB" in page
    assert ">body starts</text>" in page and ">body ends</text>" in page
    result.stdout.fnmatch_lines(["1 memory timeline(s) written to timelines"])
    result.stdout.no_fnmatch_line("*allocator trace has no timestamps*")
