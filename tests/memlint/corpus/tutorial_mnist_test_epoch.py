"""MNIST-style tutorial script: train_epoch/test_epoch pair with labels built from a list.

`test_epoch` here is the evaluation loop of the tutorial, not a pytest test: the file is a
training script, so the forward inside it runs with autograd on. The label tensor is built
on the host, cast, then copied: the dtype cast between the factory and the move does not hide it.
"""

import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train_epoch(model, loader, optimizer):
    model.train()
    for data, target in loader:
        data, target = data.to(device, non_blocking=True), target.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()


def test_epoch(model, loader):
    model.eval()
    correct = 0
    for data, target in loader:
        data, target = data.to(device, non_blocking=True), target.to(device, non_blocking=True)
        output = model(data)  # expect: MEM002
        correct += output.argmax(dim=1).eq(target).sum().item()
    return correct / len(loader.dataset)


def class_weights(counts):
    weights = torch.tensor(counts).float().to(device)
    kept = torch.tensor(counts).float()
    return weights / weights.sum(), kept


def main(model, train_loader, test_loader, optimizer, epochs):
    for _ in range(epochs):
        train_epoch(model, train_loader, optimizer)
        print(test_epoch(model, test_loader))
