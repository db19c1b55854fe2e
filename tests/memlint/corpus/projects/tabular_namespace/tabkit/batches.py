"""Batch helpers shared by the scripts."""


def to_device(batch, device):
    return [t.to(device) for t in batch]
