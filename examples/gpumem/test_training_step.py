"""A worked example of pytest_gpumem: budgets and leak checks for a small training step.

Run it from the repository root (add ``-p pytest_gpumem.plugin`` in a source checkout
that is not pip-installed):

    pytest examples/gpumem --gpumem

``test_step_within_budget`` and ``test_lazy_optimizer_state_is_not_a_leak`` pass;
``test_history_keeps_graphs`` fails with ``M`` / MEMORY: it keeps every loss tensor, and
with it every forward graph.
"""

import pytest
import torch
from torch import nn


@pytest.fixture
def model(gpumem_device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(gpumem_device)


def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.gpu_mem(max_gb=0.05)  # 51.2 MiB (1 GiB = 2**30 bytes) above what existed before
def test_step_within_budget(model, gpumem_device):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 512, device=gpumem_device)
    y = torch.randint(0, 10, (64,), device=gpumem_device)
    losses = [train_step(model, opt, x, y).item() for _ in range(3)]  # .item(): no graph kept
    assert losses[-1] < losses[0]


@pytest.mark.gpu_mem(max_gb=0.05, repeat=3)
def test_lazy_optimizer_state_is_not_a_leak(model, gpumem_device):
    # Adam allocates its moment buffers on the first step only; the repeated body shows no
    # growth after that first run, so the test passes.
    opt = OPTIMIZERS.setdefault("adam", torch.optim.Adam(model.parameters(), lr=1e-3))
    x = torch.randn(64, 512, device=gpumem_device)
    y = torch.randint(0, 10, (64,), device=gpumem_device)
    train_step(model, opt, x, y)


OPTIMIZERS: dict = {}
HISTORY: list = []


@pytest.mark.gpu_mem(max_gb=0.05)
def test_history_keeps_graphs(model, gpumem_device):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 512, device=gpumem_device)
    y = torch.randint(0, 10, (64,), device=gpumem_device)
    for _ in range(3):
        HISTORY.append(train_step(model, opt, x, y))  # the bug: should be .item()


def test_measure_a_block(gpumem, gpumem_device):
    with gpumem.track() as m:
        activations = torch.randn(256, 1024, device=gpumem_device)  # 1 MiB
        del activations
    assert m.peak_bytes >= 2**20
    assert m.leaked_bytes == 0
