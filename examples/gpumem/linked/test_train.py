"""The step must leave nothing behind but a few numbers (10 KiB of tolerance)."""

import pytest
import torch

from train import make_model, train


@pytest.mark.gpu_mem(max_leak_mb=0.01)
def test_training_leaves_no_graph_behind(gpumem_device):
    model = make_model().to(gpumem_device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(32, 256, device=gpumem_device),
                torch.randint(0, 10, (32,), device=gpumem_device)) for _ in range(4)]
    assert train(model, optimizer, batches) > 0
