"""Data helpers shared by the training scripts."""

import torch
from torch.utils.data import DataLoader


def build_loader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=4,
                      pin_memory=True)


def infinite(loader):
    """Batches forever, epoch after epoch."""
    while True:
        for batch in loader:
            yield batch


def to_device(batch, device):
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [to_device(v, device) for v in batch]
    return batch.to(device)


def to_device_async(batch, device):
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def describe(batch):
    return {k: torch.as_tensor(v).shape for k, v in batch.items()}
