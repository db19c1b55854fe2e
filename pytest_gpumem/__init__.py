"""pytest_gpumem: per-test tensor memory budgets and leak checks, on CUDA and on CPU-only CI.

The pytest plugin lives in :mod:`pytest_gpumem.plugin`; importing this package never
imports torch.
"""

from pytest_gpumem.batch_size import BatchSizeResult, max_batch_size

__all__ = ["BatchSizeResult", "max_batch_size"]
