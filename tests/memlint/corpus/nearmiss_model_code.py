"""Library-style model and trainer code that must stay silent.

Model methods with evaluation-sounding names run inside some caller's forward, and an
out-of-memory handler that only wraps the error in a clearer one retries nothing.
"""

import torch
from torch import nn


class ResidualQuantizer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def encode(self, embeddings, depth):
        residual = embeddings
        codes = []
        for layer in self.layers[:depth]:
            idx = layer.encode(residual)
            residual = residual - layer.decode(idx)
            codes.append(idx)
        return torch.stack(codes)

    def forward(self, x):
        return self.encode(x, len(self.layers))


class Evaluator:
    def __init__(self, model, loader, shrink_batches):
        self.model = model
        self.loader = loader
        self.shrink_batches = shrink_batches

    @torch.no_grad()
    def evaluate(self):
        scores = []
        for x, y in self.loader:
            scores.append((self.model(x).argmax(-1) == y).float().mean().item())
        return sum(scores) / len(scores)

    def evaluate_and_report(self):
        try:
            return self.evaluate()
        except RuntimeError as err:
            # An out-of-memory here should not trigger the batch-size finder.
            if self.shrink_batches and "out of memory" in str(err):
                raise RuntimeError(
                    "evaluation ran out of memory; lower the evaluation batch size"
                ) from err
            raise
