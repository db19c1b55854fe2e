import torch

from textenc.util import move_features


def fit(model, train_loader, optimizer, device):
    for pairs, labels in train_loader:
        labels = labels.to(device, non_blocking=True)
        pairs = [move_features(f, device) for f in pairs]  # expect: MEM003
        loss = model(pairs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def fit_pairs(model, train_loader, optimizer, device):
    for features, labels in train_loader:
        features = list(map(lambda f: move_features(f, device), features))  # expect: MEM003
        loss = model(features, labels.to(device, non_blocking=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.tensor(0)
