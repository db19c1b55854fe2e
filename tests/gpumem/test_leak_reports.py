"""Leak reports a user can act on: what keeps the survivors alive, and no growth reported
for what pytest (monkeypatch's undo list) keeps between repeated runs."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem


def test_module_fixture_holding_the_tensors_is_named(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_net="""
import pytest
import torch

class Net:
    def __init__(self):
        self.history = []

    def step(self):
        self.history.append(torch.ones(1024))  # kept by the net, not by the test

@pytest.fixture(scope="module")
def net():
    return Net()

@pytest.mark.gpu_mem
def test_step(net):
    net.step()
""")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*leaked 4.00 KiB still alive after teardown (max_leak_mb=0); "
        "held by module-scoped fixture 'net' (1 storage, 4.00 KiB)*",
        "kept alive by: module-scoped fixture 'net' (1 storage, 4.00 KiB)",
    ])
    record = json.loads((pytester.path / "out.json").read_text())["tests"][0]
    assert record["leak_holders"] == ["module-scoped fixture 'net' (1 storage, 4.00 KiB)"]


def test_survivors_no_fixture_holds_are_said_to_be_the_tests_own(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(store="KEPT = []\n")
    pytester.makepyfile(test_cache="""
import pytest
import torch
import store  # another module's list: not this test's fixture or global

@pytest.mark.gpu_mem
def test_cached():
    store.KEPT.append(torch.ones(256))
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "kept alive by: none of the test's wider-scoped fixtures or its module's globals*",
    ])


def test_repeat_with_monkeypatch_and_mock_is_no_growth(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Each run replaces a patched hook with a fresh Mock that records the tensor it is
    called with; monkeypatch keeps every replaced Mock for its undo. That is pytest's
    bookkeeping, not growth of the test's own."""
    pytester.makepyfile(hooks="def on_batch(x):\n    pass\n")
    pytester.makepyfile(test_mock="""
from unittest.mock import Mock
import pytest
import torch
import hooks

@pytest.mark.gpu_mem(repeat=3)
def test_patched(monkeypatch):
    monkeypatch.setattr(hooks, "on_batch", Mock())
    hooks.on_batch(torch.ones(1200))  # 4.69 KiB
    assert hooks.on_batch.call_count == 1

@pytest.mark.gpu_mem(repeat=3)
def test_really_grows(monkeypatch):
    monkeypatch.setattr(hooks, "on_batch", Mock())
    hooks.on_batch(torch.ones(1200))
    hooks.KEPT = getattr(hooks, "KEPT", []) + [torch.ones(1200)]  # a real per-run leak
""")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["MEMORY *test_really_grows*"])
    data = json.loads((pytester.path / "out.json").read_text())
    records = {r["nodeid"]: r for r in data["tests"]}
    assert records["test_mock.py::test_patched"]["growth_per_run_bytes"] == [0, 0]
    assert records["test_mock.py::test_really_grows"]["growth_per_run_bytes"] == [4800, 4800]
