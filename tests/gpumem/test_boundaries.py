"""Budgets are judged at the byte: a peak equal to its budget passes, one byte over fails,
and a failure whose two figures round alike shows the exact bytes."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem


def test_budget_boundary_at_the_byte(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem(max="4 MiB")
def test_exactly_the_budget():
    a = torch.empty(1024, 1024)  # 4 MiB of float32

@pytest.mark.gpu_mem(max_gb=4 / 1024)
def test_exactly_the_budget_in_gib():
    a = torch.empty(1024, 1024)

@pytest.mark.gpu_mem(max="4194303")
def test_one_byte_over():
    a = torch.empty(1024, 1024)

@pytest.mark.gpu_mem(max="4095 KiB", max_leak="1 KiB")
def test_rounds_alike():
    a = torch.empty(1024, 1024)
""")
    result = run_gpumem("--gpumem", "--gpumem-json=r.json")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random([
        "peak 4.00 MiB (4,194,304 B) exceeds budget max='4194303' (4.00 MiB, 4,194,303 B) *",
        "peak 4.00 MiB (4,194,304 B) exceeds budget max='4095 KiB' (4.00 MiB, 4,193,280 B) *",
    ])
    records = {r["nodeid"].split("::")[1]: r
               for r in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert {name: r["peak_bytes"] for name, r in records.items()} == dict.fromkeys(records, 2**22)
    assert records["test_exactly_the_budget_in_gib"]["budget_bytes"] == 2**22


def test_leak_boundary_at_the_byte(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile("""
import pytest
import torch

KEPT = []

@pytest.mark.gpu_mem(max_leak="2 KiB")
def test_leaks_exactly_the_tolerance():
    KEPT.append(torch.empty(512))  # 2 KiB

@pytest.mark.gpu_mem(max_leak="2047")
def test_leaks_one_byte_over():
    KEPT.append(torch.empty(512))
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines([
        "leaked 2.00 KiB (2,048 B) still alive after teardown "
        "(max_leak='2047', 2.00 KiB, 2,047 B)*",
    ])
