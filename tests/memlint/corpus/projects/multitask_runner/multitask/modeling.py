"""A forward dispatcher shared by the training step and the evaluation loops."""

from torch import nn


class MultiTaskModel(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = nn.ModuleDict(heads)

    def forward(self, batch, task):
        return self.heads[task](batch)


def wrap_forward(model, batch, task):
    # Training backpropagates what this returns; evaluation calls it under no_grad.
    return model(batch, task)


def score_batch(model, batch, task):
    # Only ever run after `.eval()`, and one caller leaves grad on.
    return model(batch, task)  # expect: MEM002
