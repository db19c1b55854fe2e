"""The plugin measures through pytest's own phases, so plugins that drive the protocol
(reruns, repeats, timeouts, random order, xdist) keep working with --gpumem, and each run
of a test is measured afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gpumem.conftest import RunGpumem

pytest.importorskip("xdist")
pytest.importorskip("pytest_rerunfailures")
pytest.importorskip("flaky")
pytest.importorskip("pytest_timeout")
pytest.importorskip("pytest_repeat")
pytest.importorskip("pytest_randomly")

REPO = Path(__file__).resolve().parents[2]

COUNTER = """
import pathlib

def attempt(name):
    '''How many times this test ran before, counted in a file beside the tests.'''
    path = pathlib.Path(__file__).with_name(name + ".count")
    n = int(path.read_text()) if path.exists() else 0
    path.write_text(str(n + 1))
    return n
"""

FLAKY_SUITE = COUNTER + """
import pytest
import torch
from flaky import flaky

@pytest.mark.gpu_mem(max="8 MiB")
def test_plain():
    a = torch.zeros(1024, 1024)  # 4 MiB

@flaky(max_runs=3)
@pytest.mark.gpu_mem(max="8 MiB")
def test_flaky_decorator():
    a = torch.zeros(1024, 1024)
    assert attempt("flaky") >= 1

@pytest.mark.gpu_mem(max="8 MiB")
@pytest.mark.timeout(60)
def test_with_timeout():
    a = torch.zeros(1024, 1024)

class TestGroup:
    @pytest.mark.gpu_mem(max="8 MiB")
    def test_method(self):
        a = torch.zeros(1024, 1024)
"""


def _records(path: Path) -> dict[str, dict[str, object]]:
    return {r["nodeid"]: r for r in json.loads(path.read_text())["tests"]}


def test_protocol_plugins_together_under_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rerunfailures, flaky, timeout, repeat, randomly and xdist all at once: every test
    passes as it does without --gpumem, and each record is one attempt's 4 MiB. (With flaky
    installed, its protocol hook runs every test, so --reruns is inert in both runs; the
    next test has rerunfailures on its own.)"""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # workers must import the plugin too
    pytester.makepyfile(test_suite=FLAKY_SUITE)
    report = pytester.path / "gpumem.json"
    args = ("-n", "2", "-p", "randomly", "--count=2", "--timeout=120", "--reruns=2",
            "-p", "no:cacheprovider")
    plain = pytester.runpytest(*args)
    for counter in pytester.path.glob("*.count"):
        counter.unlink()
    measured = pytester.runpytest(*args, "--gpumem", f"--gpumem-json={report}")
    for result in (plain, measured):
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed") == 8, result.stdout.str()
        assert "failed" not in outcomes and "errors" not in outcomes
    records = _records(report)
    assert len(records) == 8
    for nodeid, record in records.items():
        assert record["outcome"] == "passed", nodeid
        assert record["peak_bytes"] == 4 * 2**20, nodeid  # one attempt, not the sum


def test_a_rerun_is_measured_afresh(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    """A memory failure is a failure rerunfailures retries; the retry has its own peak."""
    pytester.makepyfile(test_suite=COUNTER + """
import pytest
import torch

@pytest.mark.gpu_mem(max="6 MiB")
def test_big_then_small():
    n = 2 if attempt("big") == 0 else 1  # 8 MiB on the first run, 4 MiB on the rerun
    a = torch.zeros(n * 1024, 1024)
""")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json", "--reruns=1", "-p", "no:flaky")
    outcomes = result.parseoutcomes()
    outcomes.pop("warnings", None)  # e.g. pytest's note on an already imported `tests`
    assert outcomes == {"passed": 1, "rerun": 1}
    record = _records(pytester.path / "out.json")["test_suite.py::test_big_then_small"]
    assert record["peak_bytes"] == 4 * 2**20
    assert record["outcome"] == "passed"


def test_flaky_reruns_a_failing_attempt(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_suite=COUNTER + """
import pytest
import torch
from flaky import flaky

@flaky(max_runs=2)
@pytest.mark.gpu_mem(max="8 MiB")
def test_second_time_lucky():
    a = torch.zeros(1024, 1024)
    assert attempt("lucky") == 1
""")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1)
    record = _records(pytester.path / "out.json")["test_suite.py::test_second_time_lucky"]
    assert (record["outcome"], record["peak_bytes"]) == ("passed", 4 * 2**20)


def test_pytest_repeat_measures_every_copy(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_suite="""
import pytest
import torch

@pytest.mark.gpu_mem(max="1 MiB")
def test_each_copy():
    a = torch.zeros(512, 1024)  # 2 MiB: over budget in every copy
""")
    result = run_gpumem("--gpumem", "--count=3")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["MEMORY *test_each_copy[[]1-3[]]*"])
