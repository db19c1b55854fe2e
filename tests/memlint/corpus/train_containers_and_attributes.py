"""Loss bookkeeping on containers and on self: the leaking forms and their fixed twins."""

import collections

import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optimizer, device):
        self.model = model
        self.optimizer = optimizer
        self.device = device
        self.criterion = nn.SmoothL1Loss()
        self.hist = []
        self.per_epoch = {}
        self.window = collections.deque(maxlen=100)
        self.best_loss = float("inf")

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        out = self.model(x)
        loss = self.criterion(out, y)
        loss.backward()
        self.optimizer.step()
        self.hist.append(loss)  # expect: MEM001
        self.last_loss = loss  # expect: MEM001
        self.window.append(loss.detach())
        self.last_value = loss.item()  # expect: MEM013
        if loss.item() < self.best_loss:
            self.best_loss = loss.item()
        return loss.item()  # expect: MEM013

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            values = [self.train_step(x.to(self.device, non_blocking=True),
                                      y.to(self.device, non_blocking=True))
                      for x, y in loader]
            self.per_epoch[epoch] = sum(values) / len(values)


def train_plain(model, loader, optimizer, criterion, epochs):
    by_epoch = {}
    step_losses = []
    extended = []
    kept = collections.defaultdict(list)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            by_epoch[epoch] = loss  # expect: MEM001
            step_losses += [loss]  # expect: MEM001
            extended.extend([loss.detach()])
            kept["loss"].append(loss.item())  # expect: MEM013
            step_losses += [float(loss)]  # expect: MEM013
    return by_epoch, step_losses, extended, kept


def train_then_convert(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        loss = loss.detach()
        losses.append(loss)
    return torch.stack(losses).mean().item()


def train_python_numbers(model, loader, optimizer, criterion):
    total = 0
    seen = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * x.size(0)  # expect: MEM013
        seen += x.size(0)
    return total / seen


def input_gradients(model, loader, criterion, optimizer):
    """Gradients from autograd.grad have no graph of their own (no create_graph)."""
    saliency = []
    for x, y in loader:
        x.requires_grad_(True)
        loss = criterion(model(x), y)
        (grad_x,) = torch.autograd.grad(loss, x, retain_graph=True)
        saliency.append(grad_x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return saliency
