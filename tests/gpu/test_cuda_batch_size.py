"""The batch-size search on a real GPU: the size it returns fits the budget and the next
one does not, judged by torch's own counters rather than the plugin's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn


def _steady_peak(step: object, batch: int) -> int:
    """Peak of one step above what was allocated before it, after a warm-up step."""
    assert callable(step)
    step(batch)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step(batch)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated()) - before


def _trace_length() -> int:
    traces = torch.cuda.memory._snapshot()["device_traces"]
    return len(traces[0]) if traces else 0


def test_found_batch_fits_and_the_next_does_not() -> None:
    from pytest_gpumem import max_batch_size

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10)
    ).cuda()

    def step(batch: int) -> None:
        x = torch.randn(batch, 1024, device="cuda")
        model(x).logsumexp(dim=1).sum().backward()
        model.zero_grad(set_to_none=True)

    budget = 256 * 2**20
    trace_before = _trace_length()
    result = max_batch_size(step, budget_bytes=budget, backend="cuda")
    print(result.describe())
    assert result.batch_size > 1 and result.next_batch_size == result.batch_size + 1
    assert not result.next_peak_estimated
    fits, over = _steady_peak(step, result.batch_size), _steady_peak(step, result.batch_size + 1)
    assert fits <= budget < over
    assert (fits, over) == (result.peak_bytes, result.next_peak_bytes)
    # The search's own backend left no allocation history recording behind.
    torch.empty(2**20, device="cuda")
    assert _trace_length() == trace_before
