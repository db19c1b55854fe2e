"""Every kind of test is measured and judged: unittest.TestCase methods, doctests, tests a
conftest marks; a bad marker is a one-line collection error wherever it sits; --gpumem-all
measures unmarked tests, and a run that measured little says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gpumem.conftest import RunGpumem, plugin_args

UNITTEST_SUITE = """
import unittest
import pytest
import torch

class TestModel(unittest.TestCase):
    def setUp(self):
        self.weights = torch.zeros(256, 1024)  # 1 MiB, freed with the TestCase

    @pytest.mark.gpu_mem(max="2 MiB")
    def test_within(self):
        a = torch.zeros(256, 1024)  # 1 MiB more: 2 MiB with setUp's

    @pytest.mark.gpu_mem(max="1.5 MiB")
    def test_over(self):
        a = torch.zeros(256, 1024)

    def test_unmarked(self):
        a = torch.zeros(1024, 1024)  # 4 MiB
"""


def _records(path: Path) -> dict[str, dict[str, object]]:
    return {r["nodeid"]: r for r in json.loads(path.read_text())["tests"]}


def _subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A separate process, as users run: in-process sessions record every hook call (and
    so keep objects alive) in a way a real run does not."""
    return pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:randomly", "--gpumem-backend=cpu", *args
    )


def test_unittest_methods_get_a_peak_and_a_verdict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unit=UNITTEST_SUITE)
    result = _subprocess(pytester, "--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*peak 2.00 MiB exceeds budget max='1.5 MiB' (1.50 MiB)*",
        "*1.00 MiB  1 storage  test_unit.py:7 in setUp",
        "MEMORY test_unit.py::TestModel::test_over - peak 2.00 MiB*",
    ])
    records = _records(pytester.path / "out.json")
    assert records["test_unit.py::TestModel::test_within"]["peak_bytes"] == 2 * 2**20
    assert records["test_unit.py::TestModel::test_within"]["leaked_bytes"] == 0
    assert "test_unit.py::TestModel::test_unmarked" not in records


def test_unittest_default_budget_and_baseline_apply(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_unit=UNITTEST_SUITE)
    result = run_gpumem("--gpumem-all", "--gpumem-max-gb=0.003", "-k", "unmarked")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*peak 5.00 MiB exceeds budget --gpumem-max-gb=0.003 (3.07 MiB)*"])
    baseline = pytester.path / "base.json"
    run_gpumem("--gpumem-all", f"--gpumem-baseline={baseline}", "--gpumem-update-baseline",
               "-k", "unmarked").assert_outcomes(passed=1)
    assert json.loads(baseline.read_text())["tests"]["test_unit.py::TestModel::test_unmarked"][
        "peak_bytes"] == 5 * 2**20
    pytester.makepyfile(test_unit=UNITTEST_SUITE.replace("torch.zeros(1024, 1024)  # 4 MiB",
                                                         "torch.zeros(2048, 1024)"))
    regressed = run_gpumem("--gpumem-all", f"--gpumem-baseline={baseline}", "-k", "unmarked")
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(["MEMORY *test_unmarked*"])


def test_doctests_are_measured_under_gpumem_all(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(mod='''
def make():
    """
    >>> import torch
    >>> t = torch.zeros(1024, 1024)
    """
''')
    result = run_gpumem("--gpumem-all", "--doctest-modules", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1)
    assert _records(pytester.path / "out.json")["mod.py::mod.make"]["peak_bytes"] == 4 * 2**20


@pytest.mark.parametrize("flags", [[], ["--gpumem"]])
def test_bad_marker_on_a_unittest_method_is_a_collection_error(
    pytester: pytest.Pytester, run_gpumem: RunGpumem, flags: list[str]
) -> None:
    pytester.makepyfile(test_bad="""
import unittest
import pytest

class TestBad(unittest.TestCase):
    @pytest.mark.gpu_mem(max_gb=-1)
    def test_negative(self):
        pass
""")
    result = run_gpumem(*flags)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_bad.py*",
        "test_bad.py::TestBad::test_negative: gpu_mem(max_gb=-1) must be greater than zero",
        "ERROR test_bad.py::TestBad::test_negative - *",
    ])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_bad_marker_added_by_a_conftest_is_a_collection_error(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.gpu_mem(max="lots"))
""")
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    result = run_gpumem("--gpumem")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_x.py*",
        "test_x.py::test_a: gpu_mem(max=...): cannot read size 'lots'*",
    ])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_good_marker_added_by_a_conftest_is_enforced(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.gpu_mem(max="1 MiB"))
""")
    pytester.makepyfile(test_x="import torch\ndef test_a():\n    t = torch.zeros(1024, 1024)\n")
    run_gpumem("--gpumem").assert_outcomes(failed=1)


def test_unmarked_suite_says_nothing_was_measured(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_x="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*no test measured: none of the 2 tests that ran carries a gpu_mem marker; "
        "--gpumem-all (ini gpumem_all = true) measures every test",
    ])
    assert json.loads((pytester.path / "out.json").read_text())["tests"] == []


def test_partly_marked_suite_says_how_many_were_measured(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(test_x="""
import pytest

@pytest.mark.gpu_mem
def test_a():
    pass

def test_b():
    pass
""")
    result = run_gpumem("--gpumem")
    result.stdout.fnmatch_lines(["*1 of 2 tests measured*--gpumem-all measures every test"])
    everything = run_gpumem("--gpumem-all", "--gpumem-json=out.json")
    everything.stdout.no_fnmatch_line("*tests measured*")
    assert set(_records(pytester.path / "out.json")) == {"test_x.py::test_a", "test_x.py::test_b"}


def test_gpumem_all_from_ini_uses_the_default_budget(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makeini("[pytest]\ngpumem_all = true\ngpumem_max_gb = 0.001\n")
    pytester.makepyfile(test_x="""
import pytest
import torch

def test_unmarked_small():
    t = torch.zeros(1024)

def test_unmarked_big():
    t = torch.zeros(1024, 1024)

@pytest.mark.gpu_mem(max="8 MiB")
def test_marker_wins():
    t = torch.zeros(1024, 1024)
""")
    result = run_gpumem()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*budget gpumem_max_gb=0.001 (1.02 MiB)*"])
    result.stdout.fnmatch_lines(["MEMORY *test_unmarked_big*"])
