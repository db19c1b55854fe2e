"""The ``gpumem_batch_size`` fixture and ``pytest_gpumem.max_batch_size`` in a real session."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("torch")

SUITE = """
import pytest
import torch
from pytest_gpumem import max_batch_size

PER_SAMPLE = 3 * 1024  # bytes alive per sample at the step's peak

def step(batch):
    activations = torch.empty(batch * 1024, dtype=torch.uint8)
    grads = torch.empty(batch * 2048, dtype=torch.uint8)
    del activations, grads

@pytest.mark.gpu_mem(max_gb=1)
def test_fixture_uses_the_default_budget(gpumem_batch_size):
    result = gpumem_batch_size(step)
    assert result.batch_size == 300
    assert result.peak_bytes == 300 * PER_SAMPLE
    assert (result.next_batch_size, result.next_peak_bytes) == (301, 301 * PER_SAMPLE)
    print(result.describe())

def test_explicit_budget(gpumem_batch_size):
    assert gpumem_batch_size(step, budget_gb=1000 * PER_SAMPLE / 2**30).batch_size == 1000

def test_function(gpumem_device):
    result = max_batch_size(step, budget_bytes=50 * PER_SAMPLE + 100, backend="cpu", high=80)
    assert result.batch_size == 50
"""


BUDGET = f"--gpumem-max-gb={300 * 3 * 1024 / 2**30!r}"


@pytest.mark.parametrize(
    "flags", [("--gpumem", "--gpumem-backend=cpu", BUDGET), ("--gpumem-backend=cpu", BUDGET)]
)
def test_batch_size_session(
    run_gpumem: Callable[..., pytest.RunResult], pytester: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    pytester.makepyfile(test_plan=SUITE)
    result = run_gpumem(*flags, "-s")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*largest batch within 900.00 KiB: 300 (peak 900.00 KiB)*"])


def test_probes_do_not_count_as_the_test_s_own_peak(
    run_gpumem: Callable[..., pytest.RunResult], pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_plan=SUITE)
    result = run_gpumem("--gpumem", "--gpumem-backend=cpu", BUDGET, "-k", "default_budget")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*0 B  (budget 1.00 GiB, cpu cpu)  *test_fixture_uses*"])


def test_no_budget_is_a_clear_error(
    run_gpumem: Callable[..., pytest.RunResult], pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_plan="""
import pytest

def test_plan(gpumem_batch_size):
    with pytest.raises(ValueError, match="needs budget_gb=..., or --gpumem-max-gb"):
        gpumem_batch_size(lambda batch: None)
"""
    )
    run_gpumem("--gpumem-backend=cpu").assert_outcomes(passed=1)
