"""Shapes met on a fourth blind set of single-author training code, with their near misses.

A recommender's fit loop that iterates a progress bar opened as a context manager
(``with tqdm(enumerate(loader)) as t: for ... in t:``), a dilated RNN that builds its padding
and hidden state on the host and moves them in the next statement when CUDA is on, and a
spiking-net loss that detaches a fresh ``arange`` before moving it; a text classifier whose
batches come from a helper named like a loader, imported from another module
(``train_iter = dataloader(data, batch_size)``), copied in a per-batch method.
"""

import torch
from torch import autograd
from torch.utils.data import DataLoader
from tqdm import tqdm

from text_tools.data import LoaderIter, dataloader, make_loaders


def fit(model, dataset, optimizer, loss_func, device, epochs):
    train_loader = DataLoader(dataset, batch_size=256, shuffle=True)  # expect: MEM003
    for _ in range(epochs):
        with tqdm(enumerate(train_loader), disable=False) as t:
            for _, (x_train, y_train) in t:
                x = x_train.to(device).float()  # expect: MEM003
                y = y_train.to(device).float()  # expect: MEM003
                loss = loss_func(model(x).squeeze(), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


def fit_quietly(model, dataset, optimizer, device):
    # Near miss: a bar over plain numbers hands on no batches.
    loader = DataLoader(dataset, batch_size=256, pin_memory=True)
    with tqdm(range(10)) as steps:
        for step in steps:
            weights = torch.full((4,), float(step)).to(device)  # expect: MEM010
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                loss = (model(x) * weights).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


def pad_inputs(inputs, steps, use_cuda):
    zeros = torch.zeros(steps - inputs.size(0), inputs.size(1))  # expect: MEM010
    if use_cuda:
        zeros = zeros.cuda()
    return torch.cat((inputs, zeros))


def init_hidden(batch, width, use_cuda):
    hidden = autograd.Variable(torch.zeros(batch, width))  # expect: MEM010
    if use_cuda:
        hidden = hidden.cuda()
    return hidden


def staged_table(n, device):
    # Near misses: filled on the host before the move, and moved under another name.
    table = torch.zeros(n, n)
    table[0, 0] = 1.0
    table = table.to(device)
    base = torch.ones(n)
    moved = base.to(device)
    return table, base, moved


def spike_times(spikes, device):
    ticks = torch.arange(0, spikes.size(0)).detach().to(device) + 1  # expect: MEM010
    return spikes.transpose(0, -1) * ticks


class TextClassifier:
    def __init__(self, model, device):
        self.model, self.device = model, device

    def train_epoch(self, data, optimizer):
        train_iter = dataloader(data, 32)
        for text, label in train_iter:
            self.train_batch(text, label, optimizer)

    def train_batch(self, text, label, optimizer):
        optimizer.zero_grad()
        text, label = text.to(self.device), label.to(self.device)  # expect: MEM003
        loss = self.model(text).log_softmax(-1).gather(1, label[:, None]).mean()
        loss.backward()
        optimizer.step()

    def warm_up(self, data):
        # Near miss: a helper named for several loaders hands out loaders, not batches.
        loaders = make_loaders(data)
        for dl in loaders:
            dl = dl.to(self.device)
        return loaders


def validate(model, val_loader, device):
    # Near miss: a class named like a loader wraps one; its grad mode comes from elsewhere, so
    # it is left to the wrapper rules (not bound as a loader by its name alone).
    model.eval()
    val_iter = LoaderIter(val_loader)
    for x, y in val_iter:
        x = x.to(device, non_blocking=True)
        with torch.no_grad():
            model(x)
