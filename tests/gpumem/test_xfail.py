"""A memory failure of a test marked ``xfail`` is its expected failure, as pytest treats
any other failure of it; ``raises=`` and ``--runxfail`` keep it a failure."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem

XFAIL_TESTS = """
import pytest
import torch

KEPT = []

@pytest.mark.gpu_mem(max_gb=1e-6)
@pytest.mark.xfail(reason="too big for now")
def test_over_budget():
    a = torch.zeros(1024)  # 4 KiB, over 1.05 KiB

@pytest.mark.gpu_mem(max_gb=1e-6)
@pytest.mark.xfail(reason="too big for now", strict=True)
def test_over_budget_strict():
    a = torch.zeros(1024)

@pytest.mark.gpu_mem(max_gb=1)
@pytest.mark.xfail(reason="leaks for now")
def test_leaks():
    KEPT.append(torch.zeros(16))

@pytest.mark.gpu_mem(max_gb=1e-6)
@pytest.mark.xfail(reason="only this error is expected", raises=KeyError)
def test_other_error_expected():
    a = torch.zeros(1024)

@pytest.mark.gpu_mem(max_gb=1)
@pytest.mark.xfail(reason="within budget", strict=True)
def test_within_budget_strict():
    a = torch.zeros(4)
"""


def test_memory_failure_of_an_xfail_test_is_expected(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(XFAIL_TESTS)
    result = run_gpumem("--gpumem", "--gpumem-json=r.json", "-rfExX")
    # over budget (plain and strict): xfailed; the leak, found at teardown: its call an
    # XPASS and its teardown an XFAIL, as pytest reports a teardown error of an xfail test;
    # raises=KeyError: a memory failure; strict within budget: pytest's [XPASS(strict)].
    result.assert_outcomes(xfailed=3, xpassed=1, failed=2)
    result.stdout.fnmatch_lines_random([
        "XFAIL *test_over_budget - too big for now",
        "XFAIL *test_over_budget_strict - too big for now",
        "XFAIL *test_leaks - leaks for now",  # pytest 9 drops "at teardown of" here
        "MEMORY *test_other_error_expected*",
        "FAILED *test_within_budget_strict*",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    records = {r["nodeid"].split("::")[1]: r for r in
               json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert records["test_over_budget"]["outcome"] == "skipped"
    assert records["test_over_budget"]["violations"] == ["peak"]
    assert records["test_over_budget_strict"]["violations"] == ["peak"]
    assert records["test_leaks"]["violations"] == ["leak"]
    assert records["test_other_error_expected"]["outcome"] == "memory"
    assert records["test_within_budget_strict"]["outcome"] == "failed"


def test_only_expected_failures_keep_the_run_green(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=1e-6)
@pytest.mark.xfail(reason="known")
def test_over_budget():
    a = torch.zeros(1024)
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_runxfail_makes_it_an_ordinary_memory_failure(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(XFAIL_TESTS)
    result = run_gpumem("--gpumem", "--runxfail")
    result.assert_outcomes(failed=3, passed=2, errors=1)
    result.stdout.fnmatch_lines_random([
        "MEMORY *::test_over_budget*",
        "MEMORY *::test_over_budget_strict*",
        "MEMORY *::test_leaks*",
    ])


def test_baseline_regression_of_an_xpass_is_its_xfail(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem
@pytest.mark.xfail(reason="grew")
def test_grew():
    a = torch.zeros(2**20)  # 4 MiB
""")
    (pytester.path / "b.json").write_text(json.dumps({"format": 1, "tests": {
        "test_baseline_regression_of_an_xpass_is_its_xfail.py::test_grew": {
            "backend": "cpu", "device": "cpu", "leaked_bytes": 0, "peak_bytes": 1024}}}))
    result = run_gpumem("--gpumem", "--gpumem-baseline=b.json", "-rx")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["XFAIL *test_grew - grew"])
