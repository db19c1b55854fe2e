"""Helpers whose names mention a loss without computing one with a graph.

A plotting loop records the value of a dataset-wide loss evaluation (a Python number), an
influence routine collects derivatives of a loss, and a step starts from a fresh zero before
adding its terms. None of these keeps a graph alive; a real criterion call does.
"""

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import metrics
from helpers import jacobian_of_loss_wrt_params, plotter


def train_and_plot(net, train_data, val_data, opt, epochs):
    curve = plotter()
    for epoch in range(epochs):
        for x, y in DataLoader(train_data, batch_size=64, pin_memory=True):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
        curve.add(epoch, (net_eval_loss(net, val_data),))
        curve.add(epoch, (test_loss_of(net, val_data),))
        curve.add(epoch, (metrics.evaluate_loss(net, val_data),))
    return curve


def net_eval_loss(net, data):
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in data:
            total += F.mse_loss(net(x), y, reduction="sum").item()
            count += len(y)
    return total / max(count, 1)


def test_loss_of(net, data):
    return net_eval_loss(net, data)


def influence_scores(model, batches, criterion, opt):
    scores = []
    for x, y in batches:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        scores.append(jacobian_of_loss_wrt_params(model, criterion, x, y))
    return torch.stack(scores)


class StepWithTerms:
    def __init__(self, model, opt, criterion):
        self.model = model
        self.opt = opt
        self.criterion = criterion

    def _make_zero_loss(self):
        return torch.zeros(())

    def fit(self, loader):
        history = []
        for x, y in loader:
            self.opt.zero_grad()
            start = self._make_zero_loss()
            history.append(start)
            loss = start + self.criterion(self.model(x), y)
            loss.backward()
            self.opt.step()
            history.append(self.criterion(self.model(x), y))  # expect: MEM001
        return history
