"""The base trainer: its loader loop calls the per-batch hook."""

from .utils import *


class BaseTrainer:
    def __init__(self, model, optimizer, device):
        self.model = model
        self.optimizer = optimizer
        self.device = device

    def train(self, dataloader, epochs):
        for _ in range(epochs):
            for batch in dataloader:
                loss = self.train_on_batch(batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()

    def train_on_batch(self, batch):
        raise NotImplementedError
