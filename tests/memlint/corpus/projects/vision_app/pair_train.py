"""Training on (inputs, targets) pairs moved by vision.transfer's helpers."""

from torch.utils.data import DataLoader

from vision.prep import prepare
from vision.transfer import move_pair, move_pair_async, move_unpacked


def train(model, dataset, optimizer, device):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)
    for pair in loader:
        inputs, targets = move_pair(pair, device)  # expect: MEM003
        optimizer.zero_grad()
        model.loss(inputs, targets).backward()
        optimizer.step()


def train_async(model, dataset, optimizer, device):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)
    for pair in loader:
        inputs, targets = move_pair_async(pair, device)
        optimizer.zero_grad()
        model.loss(inputs, targets).backward()
        optimizer.step()


def train_unpacked(model, dataset, optimizer, device):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)
    for pair in loader:
        inputs, targets = move_unpacked(pair, device)  # expect: MEM003
        optimizer.zero_grad()
        model.loss(inputs, targets).backward()
        optimizer.step()


def train_prepared(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)
    for samples in loader:
        samples = prepare(samples)  # expect: MEM003
        optimizer.zero_grad()
        model.loss(samples).backward()
        optimizer.step()
