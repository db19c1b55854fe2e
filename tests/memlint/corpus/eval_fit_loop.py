"""A home-grown Trainer with fit(): training epochs interleaved with validation passes."""

import logging
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, model, optimizer, train_set, val_set, device="cuda", epochs=10):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.device = device
        self.epochs = epochs
        self.criterion = nn.CrossEntropyLoss()
        self.train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8,
                                       pin_memory=True, drop_last=True)
        self.val_loader = DataLoader(val_set, batch_size=256, num_workers=8, pin_memory=True)

    def fit(self):
        best = math.inf
        for epoch in range(self.epochs):
            self.model.train()
            for x, y in self.train_loader:
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                loss = self.criterion(self.model(x), y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()

            self.model.eval()
            val_loss, n = 0.0, 0
            with torch.no_grad():
                for x, y in self.val_loader:
                    x = x.to(self.device, non_blocking=True)
                    y = y.to(self.device, non_blocking=True)
                    val_loss += self.criterion(self.model(x), y).item() * x.size(0)
                    n += x.size(0)
            val_loss /= n
            logger.info("epoch %d val_loss %.4f", epoch, val_loss)
            if val_loss < best:
                best = val_loss
                torch.save(self.model.state_dict(), "best.pt")
        return best


class LegacyTrainer(Trainer):
    """The same loop, as it looked before the no_grad block was added."""

    def fit(self):
        history = []
        for epoch in range(self.epochs):
            self.model.train()
            for x, y in self.train_loader:
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()

            self.model.eval()
            correct = 0
            for x, y in self.val_loader:
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                logits = self.model(x)  # expect: MEM002
                correct += (logits.argmax(1) == y).sum().item()
            history.append(correct / len(self.val_loader.dataset))
        return history


class FrozenBNFinetuner(Trainer):
    """Fine-tuning with batch-norm statistics frozen: eval mode, but a real training loop."""

    def fit(self):
        for epoch in range(self.epochs):
            self.model.eval()
            for x, y in self.train_loader:
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                out = self.model(x)
                loss = self.criterion(out, y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()


class PseudoLabelTrainer(Trainer):
    """Teacher predictions in eval mode, then a student step in train mode."""

    def __init__(self, teacher, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher.to(self.device)

    def fit(self):
        for epoch in range(self.epochs):
            for x, _ in self.train_loader:
                x = x.to(self.device, non_blocking=True)
                self.teacher.eval()
                with torch.no_grad():
                    pseudo = self.teacher(x).argmax(1)
                self.model.train()
                loss = self.criterion(self.model(x), pseudo)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

    def sanity_check(self):
        self.teacher.train(False)
        x, _ = next(iter(self.val_loader))
        x = x.to(self.device, non_blocking=True)
        logits = self.teacher(x)  # expect: MEM002
        print("teacher logits", logits.shape)
        self.teacher.train()
        loss = self.criterion(self.model(x), logits.argmax(1))
        print(loss.item())
