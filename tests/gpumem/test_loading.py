"""The plugin named twice (its entry point and its module path) loads once, as a plugin that
is both installed and listed in a conftest's ``pytest_plugins`` or given with ``-p``."""

from __future__ import annotations

import pytest

from tests.gpumem.conftest import RunGpumem

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
