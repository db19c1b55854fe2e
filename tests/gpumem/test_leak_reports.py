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
    pytester.makepyfile(test_cache="""
import pytest
import torch

def remember(tensor, _seen=[]):  # a cache in a default argument: no fixture or global
    _seen.append(tensor)

@pytest.mark.gpu_mem
def test_cached():
    remember(torch.ones(256))
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


def test_what_a_kept_output_graph_saved_is_the_holders(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """A kept output keeps the activations its autograd graph saved (the input of each
    Linear): they are named with the global that keeps the output, not left unexplained."""
    pytester.makepyfile(test_graph="""
import pytest
import torch

HISTORY = []
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Tanh())

@pytest.mark.gpu_mem
def test_keeps_outputs():
    for _ in range(2):
        HISTORY.append(model(torch.randn(8, 256)).sum())
""")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1, errors=1)
    record = json.loads((pytester.path / "out.json").read_text())["tests"][0]
    leaked = record["leaked_bytes"]
    assert leaked > 2 * 8 * 256 * 4  # the inputs at least, each 8 KiB
    (holder,) = record["leak_holders"]
    assert holder.startswith("global 'HISTORY' of test_graph.py (")
    assert f"storages, {leaked / 1024:.2f} KiB, and the autograd graphs of their grad_fn)" in holder


def test_instance_state_with_a_graph_is_the_tests_own(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """``self.out = self.model(x)``: the instance keeps the output and, through its graph,
    the input; both go with the instance."""
    pytester.makepyfile(test_instance="""
import pytest
import torch

@pytest.mark.gpu_mem
class TestModel:
    def setup_method(self, method):
        self.model = torch.nn.Linear(256, 256)

    def test_forward(self):
        self.out = self.model(torch.randn(4, 256))
""")
    run_gpumem("--gpumem").assert_outcomes(passed=1)


_CLASS_HOLDERS = {
    # The test's own class.
    "TestShared.seen": """
class TestShared:
    seen = []

    @pytest.mark.gpu_mem
    def test_appends(self):
        TestShared.seen.append(torch.ones(10))
""",
    # A registry class of the test module; a class is opaque to the walk from globals, so
    # this read "none of the test's wider-scoped fixtures ..." before.
    "Registry.seen": """
class Registry:
    seen = []

@pytest.mark.gpu_mem
def test_registers():
    Registry.seen.append(torch.ones(10))
""",
}


@pytest.mark.parametrize("holder", sorted(_CLASS_HOLDERS))
def test_class_attribute_holding_the_tensors_is_named(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, holder: str
) -> None:
    pytester.makepyfile(test_attr="import pytest\nimport torch\n" + _CLASS_HOLDERS[holder])
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        f"kept alive by: class attribute {holder} (1 storage, 40 B)",
    ])


def test_global_of_a_project_module_the_test_imports_from_is_named(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """``from trainer_lib import train``: the leak sits in that module's ``history``, which
    read "none of the test's wider-scoped fixtures ..." before; torch's globals stay out."""
    pytester.makepyfile(trainer_lib="""
import torch

history = []

def train():
    history.append(torch.ones(10))
""", test_trainer="""
import pytest
import torch

from trainer_lib import train

@pytest.mark.gpu_mem
def test_train():
    train()
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "kept alive by: global 'history' of trainer_lib.py (1 storage, 40 B)",
    ])


def test_a_holder_that_breaks_when_inspected_leaves_the_verdict_alone(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_gpumem.holders

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise RuntimeError("an object that cannot be inspected")

    monkeypatch.setattr(pytest_gpumem.holders, "holders_of", broken)
    monkeypatch.setattr("pytest_gpumem.session.holders_of", broken)
    pytester.makepyfile("""
import pytest
import torch
KEPT = []

@pytest.mark.gpu_mem
def test_leaks():
    KEPT.append(torch.ones(10))
""")
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    assert "INTERNALERROR" not in result.stdout.str()
