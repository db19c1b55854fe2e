"""CUDA-only checks of the CUDA backend; every test here is skipped without a GPU."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        reason = None if torch.cuda.is_available() else "CUDA is not available"
    except ImportError:
        reason = "torch is not installed"
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "tests/gpu/" in item.nodeid.replace("\\", "/"):
            item.add_marker(skip)
