"""Batch-size search against steps whose peak is known analytically (CPU backend)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_gpumem.batch_size import max_batch_size  # noqa: E402

K = 3000  # bytes per sample of one buffer


def linear_step(calls: list[int]) -> object:
    """Peak = 2 * K * batch: a buffer and its clone are alive together."""

    def step(batch: int) -> None:
        calls.append(batch)
        x = torch.empty(batch * K, dtype=torch.uint8)
        y = x.clone()
        del x, y

    return step


@pytest.mark.parametrize("budget", [12_000, 10**6, 123_457, 5 * 10**7])
def test_linear_step_finds_floor_of_budget(budget: int) -> None:
    calls: list[int] = []
    result = max_batch_size(linear_step(calls), budget_bytes=budget, backend="cpu")
    expected = budget // (2 * K)
    assert result.batch_size == expected
    assert result.peak_bytes == 2 * K * expected
    assert result.next_batch_size == expected + 1
    assert result.next_peak_bytes == 2 * K * (expected + 1)
    assert not result.next_peak_estimated
    assert len(result.probes) <= 12  # prediction finds it without a long bisection
    # No probe was run at a size whose peak passes the budget by more than half again.
    assert max(calls) * 2 * K <= budget * 1.5
    assert "largest batch within" in result.describe()


def test_quadratic_step_is_never_probed_far_beyond_the_budget() -> None:
    calls: list[int] = []

    def step(batch: int) -> None:
        calls.append(batch)
        torch.empty(batch * batch * 100, dtype=torch.uint8)

    result = max_batch_size(step, budget_bytes=1_000_000, backend="cpu")
    assert result.batch_size == 100  # 100 * 100 * 100 = 1e6 fits exactly, 101 does not
    assert result.next_peak_bytes == 101 * 101 * 100
    assert max(calls) ** 2 * 100 <= 1_500_000


def test_a_size_predicted_far_over_budget_is_not_run() -> None:
    calls: list[int] = []
    result = max_batch_size(linear_step(calls), budget_bytes=6000, backend="cpu")
    assert (result.batch_size, result.peak_bytes) == (1, 6000)
    assert (result.next_batch_size, result.next_peak_bytes) == (2, 12_000)
    assert result.next_peak_estimated and calls == [1, 1]  # warm-up and one probe
    assert "(extrapolated)" in result.describe()


def test_budget_in_gib_and_rounding() -> None:
    def step(batch: int) -> None:
        torch.empty(batch, dtype=torch.uint8)  # 1 byte per sample, rounded up to 512

    result = max_batch_size(step, budget_gb=4096 / 2**30, backend="cpu", round_bytes=512)
    assert result.batch_size == 4096
    assert result.next_peak_bytes == 4608


def test_high_bound_and_nothing_fits() -> None:
    result = max_batch_size(linear_step([]), budget_bytes=10**6, backend="cpu", high=50)
    assert (result.batch_size, result.peak_bytes) == (50, 2 * K * 50)
    assert (result.next_batch_size, result.next_peak_bytes) == (51, 2 * K * 51)
    nothing = max_batch_size(linear_step([]), budget_bytes=1000, backend="cpu", low=3)
    assert (nothing.batch_size, nothing.next_batch_size) == (0, 3)
    assert nothing.describe().startswith("no batch size fits")


def test_out_of_memory_counts_as_too_big() -> None:
    def step(batch: int) -> None:
        if batch > 40:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        torch.empty(batch * K, dtype=torch.uint8)

    result = max_batch_size(step, budget_bytes=10**9, backend="cpu")
    assert result.batch_size == 40
    assert result.next_peak_bytes is None
    assert "out of memory" in result.describe()


def test_other_errors_propagate() -> None:
    def step(batch: int) -> None:
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        max_batch_size(step, budget_bytes=10**6, backend="cpu")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({}, "exactly one"),
        ({"budget_gb": 1.0, "budget_bytes": 5}, "exactly one"),
        ({"budget_bytes": 0}, "positive"),
        ({"budget_bytes": 10, "low": 0}, "low"),
        ({"budget_bytes": 10, "low": 4, "high": 2}, "high"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        max_batch_size(lambda b: None, backend="cpu", **kwargs)  # type: ignore[arg-type]
