import torch
from torch.utils.data import DataLoader

from textenc.util import move_features


def accuracy(model, dataset, device):
    loader = DataLoader(dataset, batch_size=32, pin_memory=True)
    correct = 0
    for features, labels in loader:
        features = move_features(features, device)  # expect: MEM003
        saved = move_features(dict(features), "cpu")
        with torch.no_grad():
            correct += (model(features).argmax(-1) == labels.to(device, non_blocking=True)).sum()
    return correct, saved
