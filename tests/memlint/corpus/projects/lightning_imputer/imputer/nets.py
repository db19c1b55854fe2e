"""A model's predict() API: the package's Lightning engine runs it only in predict_step."""
import torch
from torch import nn


class Imputer(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.proj = nn.Linear(size, size)

    def forward(self, x, mask):
        return torch.where(mask, x, self.proj(x))

    def predict(self, x, mask):
        return self.forward(x, mask)
