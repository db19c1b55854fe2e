"""The plugin named twice (its entry point and its module path) loads once, as a plugin that
is both installed and listed in a conftest's ``pytest_plugins`` or given with ``-p``."""

from __future__ import annotations

import pytest

from tests.gpumem.conftest import RunGpumem, plugin_args

TEST = """
import pytest
import torch

@pytest.mark.gpu_mem(max_gb=1e-6)
def test_over():
    a = torch.zeros(1024)
"""


def test_conftest_pytest_plugins_naming_the_module(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makeconftest('pytest_plugins = ["pytest_gpumem.plugin"]\n')
    pytester.makepyfile(TEST)
    result = run_gpumem("--gpumem")
    result.assert_outcomes(failed=1)
    assert "already registered" not in result.stdout.str() + result.stderr.str()


def test_dash_p_naming_the_module(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(TEST)
    result = run_gpumem("-p", "pytest_gpumem.plugin", "--gpumem", "--gpumem-json=r.json")
    result.assert_outcomes(failed=1)
    assert (pytester.path / "r.json").exists()


def test_blocking_the_entry_point_still_works(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest("-p", "no:gpumem", "-p", "no:randomly", "--gpumem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # no such option: the plugin is off


def test_in_process_pytester_runs_share_one_torch(pytester: pytest.Pytester) -> None:
    """A plugin's own tests run it with ``pytester.runpytest()`` in one process, and
    pytester takes out every module first imported inside a run: the second run's
    ``import torch`` over the still-loaded extension failed ("bad call flags") or crashed.
    The outer process here never imports torch itself, as such a test suite need not."""
    pytester.makeconftest('pytest_plugins = ["pytester"]\n')
    pytester.makepyfile(test_suite=f'''
import pytest

INNER = """
import pytest
import torch

@pytest.mark.gpu_mem(max_gb={{gb}})
def test_alloc():
    x = torch.empty(300 * 2**20, dtype=torch.uint8)
"""

@pytest.mark.parametrize(("gb", "outcome"), [(0.1, "failed"), (1, "passed"), (0.2, "failed")])
def test_budget(pytester, gb, outcome):
    pytester.makepyfile(INNER.format(gb=gb))
    pytester.runpytest(*{plugin_args()!r}, "--gpumem").assert_outcomes(**{{outcome: 1}})
''')
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:randomly", "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(passed=3)
