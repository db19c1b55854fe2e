"""Text encoders: ``encode`` is decorated to run without gradients, ``encode_queries``
is not."""

import torch
from torch import nn


class TextEncoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x)

    @torch.no_grad()
    def encode(self, texts, batch_size=32):
        return torch.cat([self(t) for t in texts])

    def encode_queries(self, texts):
        return torch.cat([self(t) for t in texts])


class CachedEncoder(TextEncoder):
    """Inherits ``encode`` and its decorator."""
