"""A detector base whose fit loop hands every batch to hooks that subclasses override, and
whose predict hands the loader it builds to one."""

import torch
from torch.utils.data import DataLoader


class BaseDetector:
    def __init__(self, model, device="cuda", batch_size=64):
        self.model = model
        self.device = device
        self.batch_size = batch_size

    def fit(self, dataset, epochs=10):
        train_loader = DataLoader(dataset, batch_size=self.batch_size, shuffle=True,
                                  pin_memory=True)
        for epoch in range(epochs):
            for batch in train_loader:
                self.training_forward(batch)
            for batch in train_loader:
                batch = batch.to(self.device, non_blocking=True)
                self.moved_forward(batch)
            self.end_epoch(epoch)

    def scores(self, dataset):
        loader = DataLoader(dataset, batch_size=self.batch_size)
        with torch.no_grad():
            return [self.evaluating_forward(batch) for batch in loader]

    def predict(self, dataset):
        batches = DataLoader(dataset, batch_size=self.batch_size)
        with torch.no_grad():
            return self.predict_batches(batches)

    def training_forward(self, batch):
        raise NotImplementedError

    def predict_batches(self, items):
        raise NotImplementedError

    def evaluating_forward(self, batch):
        raise NotImplementedError

    def moved_forward(self, batch):
        raise NotImplementedError

    def end_epoch(self, epoch):
        pass
