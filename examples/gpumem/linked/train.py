"""A training step that leaks: every loss is kept, and with it every step's autograd graph.

`pytest --gpumem` catches the leak and names memlint's MEM001 at the line that keeps the
loss; `memlint --fix --unsafe-fixes train.py` fixes it (`.detach()`), and the test passes.
"""

import torch
from torch import nn

history = []


def train(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss)
    return history[-1].item()


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
