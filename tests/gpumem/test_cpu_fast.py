"""The cpu-fast backend (allocator events from the profiler) in real sessions: the same
verdicts as the per-op tracker on tensors, leak holders named by address."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem


def _warm_up_profiler() -> None:
    """In-process sessions forget modules first imported inside them, and a profiler
    session's lazy imports cannot run twice (a TORCH_LIBRARY registration): run one here."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.empty(1)
    prof.key_averages()


_warm_up_profiler()

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
    bad.stderr.fnmatch_lines(["*--gpumem-backend must be one of auto, cuda, cuda-fast, cpu,*"])


def test_gpumem_fixture_inside_a_measured_test(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """One profiler session per process: the block's tracker takes the test's over and
    hands its events back, so both the block and the test see them."""
    pytester.makepyfile("""
import pytest
import torch

@pytest.mark.gpu_mem(max="1 MiB")
def test_block(gpumem):
    a = torch.empty(1000)
    with gpumem.track() as m:
        b = torch.empty(1000)
        c = torch.empty(2000)
        del c
    assert m.peak_bytes == 12000
    assert m.leaked_bytes == 4000
    d = torch.empty(10**6)  # 3.81 MiB: the test's own peak, over its budget
""")
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-json=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*peak 3.82 MiB exceeds budget max='1 MiB'*"])
    record = json.loads((pytester.path / "r.json").read_text())["tests"][0]
    assert record["peak_bytes"] == 4000 + 4000 + 4_000_000


# torch 2.11 raises where 2.13 returns quietly when no profiler is running (seen on the GPU
# machine, bench/RESULTS-gpu.md): the tracker must not disable a session someone ended.
STRICT_DISABLE_CONFTEST = """
from pytest_gpumem.backends import cpu_events

_real = cpu_events._disable_profiler


def _strict():
    if not cpu_events._profiler_enabled():
        raise RuntimeError("Can't disable Kineto profiler when it's not running")
    return _real()


def pytest_configure(config):
    cpu_events._disable_profiler = _strict


def pytest_unconfigure(config):
    cpu_events._disable_profiler = _real
"""


@pytest.mark.parametrize("disable", ["as installed", "strict, as torch 2.11"])
def test_a_test_running_its_own_profiler_is_left_unmeasured(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, disable: str
) -> None:
    """torch.profiler replaces cpu-fast's session: no verdict on lost events, and it says so."""
    if disable.startswith("strict"):
        pytester.makeconftest(STRICT_DISABLE_CONFTEST)
    pytester.makepyfile("""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

@pytest.mark.gpu_mem(max="1 KiB")
def test_profiles():
    a = torch.empty(10**5)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.randn(64, 64) @ torch.randn(64, 64)
    assert prof.key_averages()

@pytest.mark.gpu_mem(max="1 KiB")
def test_after_it():
    a = torch.empty(10**4)  # 39 KiB: measured again, over budget
""")
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-json=r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*not measured: *::test_profiles: another profiler ran during the test*",
    ])
    result.stdout.fnmatch_lines(["MEMORY *test_after_it*"])
    records = {r["nodeid"].split("::")[1]: r
               for r in json.loads((pytester.path / "r.json").read_text())["tests"]}
    assert records["test_profiles"]["peak_bytes"] is None
    assert records["test_profiles"]["not_measured"].startswith("another profiler ran")
    assert records["test_after_it"]["not_measured"] is None


def test_garbage_of_an_earlier_test_does_not_offset_a_leak(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """The leak verdict's garbage collection frees an earlier test's cycle (left as garbage
    within that test's tolerance): those frees are not this test's, so they cannot net its
    leak to nothing."""
    pytester.makepyfile("""
import gc
import pytest
import torch

KEPT = []

class Node:
    pass

@pytest.fixture(scope="module", autouse=True)
def no_automatic_collection():
    gc.disable()
    yield
    gc.enable()

@pytest.mark.gpu_mem(max_leak_mb=1)
def test_leaves_a_cycle():
    node = Node()
    node.me, node.tensor = node, torch.empty(10**5)  # 391 KiB of garbage, within 1 MiB

@pytest.mark.gpu_mem
def test_leaks():
    KEPT.append(torch.empty(1000))
""")
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["leaked 3.91 KiB still alive after teardown*"])


GAP_CONFTEST = """
import gc
from pytest_gpumem.backends import cpu_events

_real = cpu_events._disable_profiler


def _stop_then_collect():
    result = _real()
    if gc.isenabled():  # what an automatic collection at this moment would do
        gc.collect()
    return result


def pytest_configure(config):
    cpu_events._disable_profiler = _stop_then_collect


def pytest_unconfigure(config):
    cpu_events._disable_profiler = _real
"""


def test_no_automatic_collection_while_no_session_records(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Whenever the tracker stops a profiler session (here each stop is followed at once by
    the collection an allocation could trigger), a cycle the body dropped is freed only once
    a session records again: otherwise its free went unseen and the test looked as if it
    kept the tensor. Between repeated runs the collection is recorded too, so a run's
    garbage is no growth."""
    pytester.makeconftest(GAP_CONFTEST)
    pytester.makepyfile("""
import gc
import pytest
import torch


def old_cycle():
    cycle = [torch.ones(1000)]
    cycle.append(cycle)
    gc.collect(1)  # promoted while referenced: no young collection frees it once dropped


@pytest.mark.gpu_mem
def test_drops_an_old_cycle():
    old_cycle()


@pytest.mark.gpu_mem(repeat=3)
def test_drops_a_cycle_on_every_run():
    old_cycle()
""")
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-json=out.json")
    result.assert_outcomes(passed=2)
    records = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert {r["nodeid"].split("::")[-1]: (r["leaked_bytes"], r["growth_per_run_bytes"])
            for r in records} == {"test_drops_an_old_cycle": (0, []),
                                  "test_drops_a_cycle_on_every_run": (0, [0, 0])}


def test_round_option_says_it_does_nothing_here(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile("import pytest\n\n@pytest.mark.gpu_mem\ndef test_a():\n    pass\n")
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu-fast", "--gpumem-round=512")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["--gpumem-round: no effect on the cpu-fast backend*"])


def test_track_block_running_a_profiler_warns(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile("""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from pytest_gpumem.fixtures import GpumemWarning

def test_block(gpumem):
    with pytest.warns(GpumemWarning, match="another profiler ran"):
        with gpumem.track():
            with profile(activities=[ProfilerActivity.CPU]):
                torch.empty(100)
""")
    run_gpumem("--gpumem-backend=cpu-fast").assert_outcomes(passed=1)
