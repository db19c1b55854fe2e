"""A scikit-learn style estimator around a network: a plain class, whatever its name says."""

import numpy as np
import torch
from torch.utils.data import DataLoader


class TabModel:
    def __init__(self, network, device="cuda", batch_size=256):
        self.network = network
        self.device = device
        self.batch_size = batch_size

    def fit(self, loader, optimizer, criterion, epochs):
        self.network.train()
        for _ in range(epochs):
            for x, y in loader:
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                optimizer.zero_grad()
                criterion(self.network(x), y).backward()
                optimizer.step()

    @torch.no_grad()
    def predict(self, features):
        self.network.eval()
        loader = DataLoader(features, batch_size=self.batch_size, pin_memory=True)
        scores = [self.network(x.to(self.device, non_blocking=True)).cpu() for x in loader]
        return np.vstack([s.numpy() for s in scores])
