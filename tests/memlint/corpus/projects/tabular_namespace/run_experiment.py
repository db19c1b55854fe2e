"""A script beside the tabkit/ folder, importing from it as a namespace package."""

import torch
from torch.utils.data import DataLoader

from tabkit.batches import to_device
from tabkit.classifier import TabClassifier


def train(network, dataset, device, epochs=3):
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)  # expect: MEM003
    optimizer = torch.optim.AdamW(network.parameters())
    for _ in range(epochs):
        for batch in loader:
            x, y = to_device(batch, device)  # expect: MEM003
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(network(x), y).backward()
            optimizer.step()
    return TabClassifier(network, device)
