"""xdist on CPU: both workers report, the controller's JSON is complete, and a worker that
dies mid-run loses none of the records of tests that had already finished."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("xdist")

REPO = Path(__file__).resolve().parents[2]

SUITE = """
import os
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=1)
@pytest.mark.parametrize("n", range(8))
def test_sized(n):
    torch.empty(1024 * (n + 1), dtype=torch.uint8)

@pytest.mark.gpu_mem(max_gb=1)
def test_worker_dies():
    if os.environ.get("GPUMEM_KILL_WORKER"):
        os._exit(1)
"""


def test_two_workers_aggregate_and_survive_a_crash(
    run_gpumem: Callable[..., pytest.RunResult],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # workers must import the plugin too
    monkeypatch.setenv("GPUMEM_KILL_WORKER", "1")
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "out" / "gpumem.json"
    result = run_gpumem(
        "-n",
        "2",
        "--gpumem",
        "--gpumem-backend=cpu",
        f"--gpumem-json={report}",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=8, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*test_worker_dies*"])
    result.stdout.fnmatch_lines(["*workers: gw0 on cpu, gw1 on cpu*"])
    records = {r["nodeid"]: r for r in json.loads(report.read_text())["tests"]}
    expected = {f"test_suite.py::test_sized[{n}]" for n in range(8)}
    assert set(records) == expected  # every finished test, none lost to the crash
    assert {r["worker"] for r in records.values()} == {"gw0", "gw1"}
    for n in range(8):
        record = records[f"test_suite.py::test_sized[{n}]"]
        assert (record["peak_bytes"], record["device"]) == (1024 * (n + 1), "cpu")
    # The journal is removed once the final report is written.
    assert sorted(p.name for p in report.parent.iterdir()) == ["gpumem.json"]


def test_without_xdist_records_say_main(
    run_gpumem: Callable[..., pytest.RunResult], pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "gpumem.json"
    run_gpumem("--gpumem", "--gpumem-backend=cpu", f"--gpumem-json={report}").assert_outcomes(
        passed=9
    )
    records = json.loads(report.read_text())["tests"]
    assert len(records) == 9 and {r["worker"] for r in records} == {"main"}


def test_bad_device_options_are_one_line(run_gpumem: Callable[..., pytest.RunResult]) -> None:
    for option, needle in (
        ("--gpumem-devices=0;1", "comma-separated CUDA indices"),
        ("--gpumem-memory-fraction=2", "expected a number in (0, 1]"),
    ):
        result = run_gpumem("--gpumem", "--gpumem-backend=cpu", option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{needle}*"])
        assert "Traceback" not in result.stderr.str()
