"""The hooks of one detector, in a module of its own: the batches come from the base's loop."""

import torch

from vision.detectors.base import BaseDetector


class AutoEncoderDetector(BaseDetector):
    def __init__(self, model, optimizer, device="cuda"):
        super().__init__(model, device)
        self.optimizer = optimizer

    def training_forward(self, batch):
        x = batch.to(self.device)  # expect: MEM003
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), x)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def evaluating_forward(self, batch):
        # Reached from a list comprehension over the loader: not followed (the rule's limit).
        x = batch.to(self.device)
        return (self.model(x) - x).pow(2).sum(1).cpu()

    def moved_forward(self, batch):
        # The base moved this batch before handing it on: copying again moves nothing.
        return self.model(batch.to(self.device))

    def end_epoch(self, epoch):
        # Not a batch: the epoch number.
        torch.tensor(epoch).to(self.device)
