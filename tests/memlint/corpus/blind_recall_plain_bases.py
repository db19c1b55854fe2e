"""Experiment classes whose base is named like a model but is a plain class holding the
networks (MEM002): their evaluation methods are evaluation code, not a module's forward."""

import torch
import torch.nn as nn


def dice_score(pred, target):
    inter = (pred == target).float().sum()
    return 2 * inter / (pred.numel() + target.numel())


class BaseModel:
    """Holds an experiment's networks, optimiser and device; no nn.Module."""

    def __init__(self, net, device):
        self.net = net.to(device)
        self.device = device
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-3)


class SegmentationModel(BaseModel):
    def validate(self, loader):
        self.net.eval()
        total = 0.0
        for image, mask in loader:
            pred = self.net(image.to(self.device, non_blocking=True))  # expect: MEM002
            total += dice_score(pred.argmax(1), mask.to(self.device, non_blocking=True)).item()
        self.net.train()
        return total / len(loader)

    @torch.no_grad()
    def test(self, loader):
        self.net.eval()
        return [self.net(image.to(self.device, non_blocking=True)).argmax(1) for image, _ in loader]


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.body(x)


class TinyModel(Backbone):
    # A module through its same-file base: its predict() runs in its callers' grad mode.
    def predict(self, images):
        return self.body(images).mean((2, 3))
