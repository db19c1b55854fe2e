"""The cpu-fast backend (allocator events from the profiler) in real sessions: the same
verdicts as the per-op tracker on tensors, leak holders named by address."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem

SUITE = """
import unittest
import pytest
import torch

KEPT = []

@pytest.fixture(scope="module")
def net():
    return {"history": []}

@pytest.fixture(scope="module")
def big_module_state():
    return torch.zeros(1024, 1024)  # set up outside the test: not its memory

@pytest.mark.gpu_mem(max="6 MiB")
def test_within(big_module_state):
    a = torch.zeros(1024, 1024)

@pytest.mark.gpu_mem(max="6 MiB")
def test_over():
    a = torch.zeros(1024, 1024)
    b = a + 1

@pytest.mark.gpu_mem
def test_leak_in_fixture(net):
    net["history"].append(torch.ones(1000))

@pytest.mark.gpu_mem(repeat=3)
def test_grows():
    KEPT.append(torch.ones(1000))

class TestCase(unittest.TestCase):
    def setUp(self):
        self.weights = torch.zeros(256, 1024)

    @pytest.mark.gpu_mem(max="3 MiB")
    def test_method(self):
        a = torch.zeros(256, 1024)
"""


def test_cpu_fast_verdicts(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-json=out.json")
    result.assert_outcomes(passed=3, failed=2, errors=1)
    result.stdout.fnmatch_lines_random([
        "peak 8.00 MiB exceeds budget max='6 MiB' (6.00 MiB) [[]backend cpu-fast, device cpu[]]",
        "*held by module-scoped fixture 'net' (1 storage, 3.91 KiB)*",
        "live tensor memory after each of 3 runs: 3.91 KiB, 7.81 KiB, 11.72 KiB*",
        "measured by: CPU measurement: allocator events from the PyTorch profiler*",
    ])
    records = {r["nodeid"]: r for r in json.loads((pytester.path / "out.json").read_text())[
        "tests"]}
    assert records["test_suite.py::test_within"]["peak_bytes"] == 4 * 2**20
    assert records["test_suite.py::TestCase::test_method"]["peak_bytes"] == 2 * 2**20
    assert records["test_suite.py::TestCase::test_method"]["leaked_bytes"] == 0
    assert "USDT" not in result.stderr.str() + result.stdout.str()


def test_cpu_fast_is_a_backend_choice(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    bad = run_gpumem("--gpumem", "--gpumem-backend=fast")
    bad.stderr.fnmatch_lines(["*--gpumem-backend must be one of auto, cuda, cpu, cpu-fast*"])
